//! `include/onnxifi.h` must be what cbindgen generates from the Rust declarations now
//! (regenerate with `UPDATE_HEADER=1 cargo test --test header`).

use std::path::Path;

#[test]
fn header_is_up_to_date() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_src(root.join("src/ffi/types.rs"))
        .with_src(root.join("src/ffi/api.rs"))
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let fresh = String::from_utf8(fresh).unwrap();
    let path = root.join("include/onnxifi.h");
    if std::env::var_os("UPDATE_HEADER").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &fresh).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "include/onnxifi.h is stale: run `UPDATE_HEADER=1 cargo test --test header` and commit it"
    );
}
