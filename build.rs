//! Build script: compiles the ONNX schema in `proto/` with protox (pure Rust, so no `protoc` is
//! needed anywhere) into prost types, and gives the shared library its ONNXIFI vendor SONAME and
//! an export list holding only the `onnx*` entry points.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=proto/onnx.proto");
    println!("cargo:rerun-if-changed=packaging/onnxifi-rust.map");

    let descriptors = match protox::compile(["onnx.proto"], ["proto"]) {
        Ok(set) => set,
        Err(err) => panic!("proto/onnx.proto does not compile: {err}"),
    };
    if let Err(err) = prost_build::Config::new().compile_fds(descriptors) {
        panic!("prost code generation failed: {err}");
    }

    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets this"));
    let map = manifest.join("packaging").join("onnxifi-rust.map");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libonnxifi-rust.so");
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
            map.display()
        );
    }
}
