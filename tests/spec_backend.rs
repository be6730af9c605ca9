//! Every ONNX backend-test model (node, simple, pytorch-converted, pytorch-operator, real,
//! light) passes the spec checker, and the verdicts are compared with `onnx.checker`.
//!
//! Needs Python with onnx (`$ONNXIFI_RUST_PYTHON`, default `.venv/bin/python`); fails
//! without it.
#![forbid(unsafe_code)]

mod spec_common;

use onnxifi_rust::check::spec::check_model;
use onnxifi_rust::model::decode;
use spec_common::*;
use std::path::PathBuf;

/// Backend-test models this checker rejects on purpose, with the reason (see
/// `docs/spec-checker.md`). Matched against the model's directory name.
const EXPECTED_REJECTIONS: &[(&str, &str)] = &[];

#[test]
fn backend_test_models_pass_the_spec_checker() {
    let Some(py) = python() else { return };
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("spec-backend-models");
    let listing = helper(&py, &["models", out.to_str().expect("utf-8 path")], None);
    let paths: Vec<PathBuf> = listing.lines().map(PathBuf::from).collect();
    assert!(
        paths.len() > 1000,
        "only {} backend models found",
        paths.len()
    );

    let verdicts = onnx_checker(&py, &paths);
    let mut ours_fail = Vec::new();
    let mut theirs_fail = Vec::new();
    let mut by_kind: std::collections::BTreeMap<String, (usize, usize)> = Default::default();
    let mut spent = std::time::Duration::ZERO;
    for (path, theirs) in &verdicts {
        let bytes = std::fs::read(path).expect("model readable");
        let m = decode(&bytes).expect("backend model decodes");
        let t = std::time::Instant::now();
        let v = check_model(&m);
        spent += t.elapsed();
        let dir = path
            .parent()
            .and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let light = path.parent().and_then(|p| p.file_name()) == Some("light".as_ref());
        let kind = path
            .ancestors()
            .nth(if light { 1 } else { 2 })
            .and_then(|p| p.file_name())
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let e = by_kind.entry(kind).or_default();
        e.0 += 1;
        if v.is_empty() {
            e.1 += 1;
        } else {
            ours_fail.push((dir.clone(), path.clone(), v));
        }
        if let Some(msg) = theirs {
            theirs_fail.push((dir, msg.clone()));
        }
    }
    eprintln!(
        "backend models: {} in all, checked in {spent:?} ({:?} each on average)",
        verdicts.len(),
        spent / verdicts.len() as u32
    );
    for (kind, (n, ok)) in &by_kind {
        eprintln!("  {kind}: {ok}/{n} pass the spec checker");
    }
    eprintln!(
        "onnx.checker(full_check=True) rejects {}: {theirs_fail:?}",
        theirs_fail.len()
    );
    let unexpected: Vec<_> = ours_fail
        .iter()
        .filter(|(dir, _, _)| !EXPECTED_REJECTIONS.iter().any(|(d, _)| d == dir))
        .collect();
    for (dir, path, v) in &unexpected {
        eprintln!("REJECTED {dir} ({}):", path.display());
        for x in v.iter().take(3) {
            eprintln!("    {x}");
        }
    }
    assert!(
        unexpected.is_empty(),
        "{} backend models fail the spec checker",
        unexpected.len()
    );
    for (d, why) in EXPECTED_REJECTIONS {
        assert!(
            ours_fail.iter().any(|(dir, _, _)| dir == d),
            "{d} is listed as rejected ({why}) but passes"
        );
    }
}
