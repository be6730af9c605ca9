//! The operator-schema table compiled into the library (`schemas/onnx-operators.tsv`) must be
//! exactly what the pinned onnx release's `onnx.defs` gives: `scripts/gen_schemas.py --check`
//! regenerates it from the installed onnx and compares. The library's view of the table is
//! then compared with the file, record by record.

mod spec_common;

use onnxifi_rust::schema::{self, ParamOption};
use spec_common::python;
use std::path::Path;
use std::process::Command;

#[test]
fn schema_table_matches_the_installed_onnx() {
    let Some(py) = python() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(py)
        .arg(root.join("scripts/gen_schemas.py"))
        .arg("--check")
        .arg(root.join("schemas/onnx-operators.tsv"))
        .output()
        .expect("python runs");
    let text = String::from_utf8_lossy(&out.stdout);
    print!("{text}");
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn compiled_table_agrees_with_the_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(root.join("schemas/onnx-operators.tsv")).unwrap();
    let heads: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| l.starts_with("S\t"))
        .map(|l| l.split('\t').collect())
        .collect();
    assert_eq!(heads.len(), schema::SCHEMAS.len());
    for (h, s) in heads.iter().zip(schema::SCHEMAS) {
        let domain = if h[1] == "ai.onnx" { "" } else { h[1] };
        assert_eq!((domain, h[2]), (s.domain, s.name));
        assert_eq!(h[3].parse::<i64>().unwrap(), s.since_version);
        assert_eq!(h[6].parse::<u32>().unwrap(), s.min_inputs);
    }
    // Every variadic parameter comes last among its kind.
    for s in schema::SCHEMAS {
        let ins: Vec<_> = s.inputs().collect();
        for f in ins.iter().rev().skip(1) {
            assert_ne!(
                f.option,
                ParamOption::Variadic,
                "{} {}",
                s.name,
                s.since_version
            );
        }
    }
}
