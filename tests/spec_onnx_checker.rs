//! Agreement with onnx's own checker tests: `tests/py/onnx_checker_cases.py` runs
//! `tests/python/checker_test.py` of the pinned onnx source distribution (downloaded from PyPI at
//! test time) and records every model the tests hand to `onnx.checker.check_model` or
//! `check_graph`, with onnx's `full_check=True` verdict. Every model onnx rejects must be
//! rejected here at the spec level (decoding included), except the cases listed in
//! [`ONNX_WRONG`] or [`NOT_CHECKED`] with the reason; a model onnx accepts and this checker
//! rejects must be listed in [`STRICTER`].
#![forbid(unsafe_code)]

mod spec_common;

use onnxifi_rust::check::spec::check_model;
use spec_common::python;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Cases where onnx rejects a model that the specification allows.
const ONNX_WRONG: &[(&str, &str)] = &[
    (
        "test_check_opaque_type_requires_name",
        "onnx.proto says of TypeProto.Opaque.name: \"The name is optional but significant when provided\"",
    ),
    (
        "test_check_model_protobuf_size_over_limit_raises",
        "the test lowers onnx's 2 GiB limit to refuse a model of 82 bytes",
    ),
];

/// Cases onnx rejects for reasons this checker does not examine.
const NOT_CHECKED: &[(&str, &str)] = &[];

/// Cases onnx accepts and this checker rejects, following the specification.
const STRICTER: &[(&str, &str)] = &[
    (
        "test_check_graph_optional_input",
        "GivenTensorFill is one of the retired experimental operators onnx.checker skips with a \
         warning; no operator set of onnx 1.23.2 defines it",
    ),
    (
        "test_nested_graph",
        "Scale is a retired experimental operator (see above)",
    ),
    (
        "test_nested_graph_without_subgraph_input_shape",
        "Scale is a retired experimental operator (see above)",
    ),
];

#[test]
fn onnx_checker_tests_agree() {
    let Some(py) = python() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("onnx-checker-cases");
    let _ = std::fs::remove_dir_all(&out);
    let run = Command::new(py)
        .arg(root.join("tests/py/onnx_checker_cases.py"))
        .arg(root.join(".testdata/onnx-sdist"))
        .arg(&out)
        .output()
        .expect("python runs");
    assert!(
        run.status.success(),
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let manifest = std::fs::read_to_string(out.join("manifest.tsv")).expect("manifest");
    let (mut agree, mut total) = (0, 0);
    let mut missed = Vec::new();
    let mut stricter = Vec::new();
    for line in manifest.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (file, test, theirs, why) = (f[0], f[1], f[2], f.get(3).copied().unwrap_or(""));
        total += 1;
        let bytes = std::fs::read(out.join(file)).expect("recorded model");
        let ours = match onnxifi_rust::model::decode(&bytes) {
            Err(e) => Some(e.message),
            Ok(m) => check_model(&m).first().map(|v| v.to_string()),
        };
        let listed = |l: &[(&str, &str)]| l.iter().any(|(t, _)| *t == test);
        match (theirs, &ours) {
            ("reject", Some(_)) | ("accept", None) => agree += 1,
            ("reject", None) if listed(ONNX_WRONG) || listed(NOT_CHECKED) => {}
            ("reject", None) => missed.push(format!("{test} ({file}): onnx says {why}")),
            (_, Some(_)) if listed(STRICTER) => {}
            (_, Some(v)) => stricter.push(format!("{test} ({file}): {v}")),
            _ => unreachable!("verdicts are accept or reject"),
        }
    }
    println!("onnx checker tests: {agree} of {total} recorded models get onnx's verdict");
    for (t, why) in ONNX_WRONG.iter().chain(NOT_CHECKED) {
        println!("  onnx rejects, not followed: {t}: {why}");
    }
    for (t, why) in STRICTER {
        println!("  onnx accepts, this checker does not: {t}: {why}");
    }
    assert!(total > 40, "only {total} models recorded");
    assert!(
        missed.is_empty(),
        "onnx rejects, this checker accepts:\n{}",
        missed.join("\n")
    );
    assert!(
        stricter.is_empty(),
        "onnx accepts, this checker rejects (list them in STRICTER with the reason):\n{}",
        stricter.join("\n")
    );
}
