//! Printer round trips: `parse(print(m))` gives `m` back for every model in the ONNX backend
//! test data, exactly or after [`normalize_model`] (which removes what the syntax cannot hold).
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};

use onnxifi_rust::model::onnx::ModelProto;
use onnxifi_rust::text::{normalize_model, parse_model, print_model};
use prost::Message;

/// The venv's Python interpreter (see `tests/text_reference.rs`).
fn python() -> PathBuf {
    match std::env::var_os("ONNXIFI_RUST_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"),
    }
}

/// The backend test-data folder of the installed `onnx` package, found through Python.
fn backend_data_dir() -> Option<PathBuf> {
    let out = std::process::Command::new(python())
        .args([
            "-c",
            "import onnx, os; print(os.path.join(os.path.dirname(onnx.__file__), 'backend', 'test', 'data'))",
        ])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let dir = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    dir.is_dir().then_some(dir)
}

/// Every `*.onnx` file under `dir`, sorted.
fn onnx_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "onnx") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Equality as messages; byte equality of the encodings settles NaNs (which `==` never does).
fn same(a: &ModelProto, b: &ModelProto) -> bool {
    a == b || a.encode_to_vec() == b.encode_to_vec()
}

#[test]
fn backend_models_round_trip() {
    let Some(dir) = backend_data_dir() else {
        panic!("python with onnx is required: run scripts/setup-test-env.sh (or set ONNXIFI_RUST_PYTHON)");
    };
    let files = onnx_files(&dir);
    assert!(
        files.len() >= 100,
        "expected the backend test models, found {}",
        files.len()
    );
    let (mut exact, mut normalized) = (0, 0);
    let mut failures = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).expect("readable model");
        let m = ModelProto::decode(bytes.as_slice()).expect("valid model");
        let text = print_model(&m);
        let back = match parse_model(&text) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!("{}: printed text does not parse: {e}", f.display()));
                continue;
            }
        };
        if same(&back, &m) {
            exact += 1;
        }
        if same(&back, &normalize_model(&m)) {
            normalized += 1;
        } else {
            failures.push(format!("{}: differs after normalising", f.display()));
        }
        // Printing is stable: the text of the parsed model is the same text.
        assert_eq!(
            print_model(&back),
            text,
            "{}: printing is not stable",
            f.display()
        );
    }
    eprintln!(
        "backend models: {} total, {exact} round-trip exactly, {normalized} after normalising",
        files.len()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(normalized, files.len());
}
