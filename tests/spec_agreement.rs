//! Agreement of the spec checker with `onnx.checker.check_model(full_check=True)` on the
//! invalid variants (one or more per rule) and on the valid models of the rule tests.
//!
//! Where onnx.checker is more lenient than the specification, the variant says why
//! (`checker_lenient`) and the specification is followed; see `docs/spec-checker.md`.
//! Needs Python with onnx (`$ONNXIFI_RUST_PYTHON`, default `.venv/bin/python`); fails
//! without it.
#![forbid(unsafe_code)]

mod spec_common;

use onnxifi_rust::check::spec::check_model;
use prost::Message;
use spec_common::*;
use std::path::PathBuf;

#[test]
fn onnx_checker_rejects_the_variants_the_spec_rejects() {
    let Some(py) = python() else { return };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("spec-variants");
    std::fs::create_dir_all(dir.join("weights")).expect("variant dir");
    // The external-data variants point at weights/b.bin: give the valid one its file.
    std::fs::write(dir.join("weights/b.bin"), [0u8; 12]).expect("weights");
    let all = variants();
    let paths: Vec<PathBuf> = all
        .iter()
        .map(|v| {
            let p = dir.join(format!("{}.onnx", v.name));
            std::fs::write(&p, (v.build)().encode_to_vec()).expect("write variant");
            p
        })
        .collect();
    let verdicts = onnx_checker(&py, &paths);

    let mut rejected = 0;
    let mut missed = Vec::new();
    let mut stale = Vec::new();
    for (v, (_, theirs)) in all.iter().zip(&verdicts) {
        match (theirs, v.checker_lenient) {
            (Some(_), _) => rejected += 1,
            (None, Some(why)) => eprintln!("  onnx.checker accepts {} ({}): {why}", v.name, v.rule),
            (None, None) => missed.push(v.name),
        }
        if let (Some(msg), Some(_)) = (theirs, v.checker_lenient) {
            stale.push(format!("{}: {msg}", v.name));
        }
    }
    eprintln!(
        "invalid variants: {} in all; onnx.checker rejects {rejected}, accepts {} (documented as more lenient than the spec)",
        all.len(),
        all.len() - rejected
    );
    assert!(
        stale.is_empty(),
        "variants documented as accepted by onnx.checker are rejected by it: {stale:#?}"
    );
    assert!(
        missed.is_empty(),
        "onnx.checker accepts variants not documented as lenient: {missed:?}"
    );
}

#[test]
fn onnx_checker_accepts_the_valid_models() {
    let Some(py) = python() else { return };
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("spec-valid");
    std::fs::create_dir_all(dir.join("weights")).expect("valid dir");
    std::fs::write(dir.join("weights/b.bin"), [0u8; 12]).expect("weights");
    let models = [
        ("base", base()),
        ("with_if", with_if()),
        ("with_function", with_function()),
        ("with_training", with_training()),
        ("with_sparse", with_sparse()),
        ("with_external", with_external()),
        ("with_device_config", with_device_config()),
    ];
    let mut paths = Vec::new();
    for (name, m) in &models {
        assert!(
            check_model(m).is_empty(),
            "{name} is flagged by the spec checker"
        );
        let p = dir.join(format!("{name}.onnx"));
        std::fs::write(&p, m.encode_to_vec()).expect("write model");
        paths.push(p);
    }
    let verdicts = onnx_checker(&py, &paths);
    let bad: Vec<_> = verdicts.iter().filter(|(_, e)| e.is_some()).collect();
    assert!(
        bad.is_empty(),
        "onnx.checker rejects valid models: {bad:#?}"
    );
}
