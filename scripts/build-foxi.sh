#!/usr/bin/env bash
# Builds the foxi-dialect library (cargo feature `foxi`) in its own target directory and puts it
# at target/foxi/libonnxifi-rust-foxi.so (SONAME libonnxifi-rust-foxi.so); its header is
# include/onnxifi-foxi.h.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO_TARGET_DIR=target/foxi cargo build --release --locked --lib --features foxi
cp target/foxi/release/libonnxifi_rust.so target/foxi/libonnxifi-rust-foxi.so
echo "target/foxi/libonnxifi-rust-foxi.so"
