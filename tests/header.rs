//! `include/onnxifi.h` (ONNXIFI 1.0 of onnx 1.12.0) and `include/onnxifi-foxi.h` (the foxi
//! dialect, for the library built with `--features foxi`) must be what cbindgen generates from
//! the Rust declarations now (regenerate with `UPDATE_HEADER=1 cargo test --test header`).
//!
//! cbindgen writes the items of both dialects, those under `cfg(feature = "foxi")` inside
//! `#if defined(ONNXIFI_RUST_FOXI)` blocks and the others inside `#if !defined(...)`; each
//! header keeps the blocks of its dialect, unwrapped, and drops the others.

use std::path::Path;

/// The macro cbindgen.toml maps the `foxi` feature to.
const FOXI: &str = "ONNXIFI_RUST_FOXI";

/// Keeps the blocks of one dialect: `#if defined(FOXI)` blocks when `foxi`, `#if
/// !defined(FOXI)` ones otherwise (unwrapped), dropping the others; other `#if`s stay.
fn select(text: &str, foxi: bool) -> String {
    let yes = format!("#if defined({FOXI})");
    let no = format!("#if !defined({FOXI})");
    // One entry per open #if: Some(keep) for a dialect block, None for any other.
    let mut stack: Vec<Option<bool>> = Vec::new();
    let mut out = String::new();
    for line in text.lines() {
        let t = line.trim();
        let dialect = if t == yes {
            Some(foxi)
        } else if t == no {
            Some(!foxi)
        } else {
            None
        };
        let visible = stack.iter().all(|s| s.unwrap_or(true));
        if let Some(keep) = dialect {
            stack.push(Some(keep));
            continue;
        }
        if t.starts_with("#if") {
            stack.push(None);
        } else if t.starts_with("#endif") {
            if let Some(Some(_)) = stack.pop() {
                continue;
            }
        } else if t.starts_with("#else") && matches!(stack.last(), Some(Some(_))) {
            panic!("cbindgen wrote an #else inside a dialect block; extend select()");
        }
        if visible {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(stack.is_empty(), "unbalanced #if in the generated header");
    // Blank lines left by dropped blocks: at most one in a row.
    let mut tidy = String::new();
    for line in out.lines() {
        if line.is_empty() && tidy.ends_with("\n\n") {
            continue;
        }
        tidy.push_str(line);
        tidy.push('\n');
    }
    tidy
}

/// Compares (or, with UPDATE_HEADER, writes) one committed header.
fn check(root: &Path, name: &str, fresh: &str) {
    let path = root.join("include").join(name);
    if std::env::var_os("UPDATE_HEADER").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, fresh).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/{name} is stale: run `UPDATE_HEADER=1 cargo test --test header` and commit it"
    );
}

#[test]
fn headers_are_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_src(root.join("src/ffi/types.rs"))
        .with_src(root.join("src/ffi/api.rs"))
        .with_src(root.join("src/ffi/ext.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut both = Vec::new();
    bindings.write(&mut both);
    let both = String::from_utf8(both).unwrap();
    let standard = select(&both, false);
    assert!(!standard.contains(FOXI) && !standard.contains("onnxTraceEvent"));
    check(root, "onnxifi.h", &standard);
    let foxi = select(&both, true).replace(
        " * ABI-identical to the ONNXIFI 1.0 header of onnx 1.12.0 (56-byte tensor descriptor, 24-byte\n * memory fence, 7-argument onnxInitGraph), plus the extension functions this backend exports.",
        " * The foxi dialect of ONNXIFI (Glow, PyTorch's Caffe2 integration) for\n * libonnxifi-rust-foxi.so: 96-byte tensor descriptor with quantization fields, 9-argument\n * onnxInitGraph, onnxSetIOAndRunGraph with a trace-event list, ONNXIFI_STATUS_FATAL_ERROR.",
    );
    assert!(foxi.contains("onnxTraceEventList") && foxi.contains("quantizationParams"));
    assert!(
        foxi.contains("The foxi dialect"),
        "the header comment was not replaced"
    );
    check(root, "onnxifi-foxi.h", &foxi);
}
