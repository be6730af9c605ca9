#!/usr/bin/env bash
# Installs the built library the way an ONNXIFI vendor does:
#   $DESTDIR$PREFIX/lib/libonnxifi-rust.so   (found by the multi-vendor wrapper, which scans
#                                             /usr/lib for libonnxifi-*.so)
#   $DESTDIR$PREFIX/include/onnxifi-rust/onnxifi.h
#   $DESTDIR$PREFIX/lib/pkgconfig/onnxifi-rust.pc
# Usage: packaging/install.sh [PREFIX]   (default /usr; set DESTDIR to stage elsewhere)
# With ONNXIFI_RUST_DEFAULT=1 it also links libonnxifi.so to it, so frameworks that open the
# default name (Caffe2, the onnx test driver) load this backend.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-/usr}"
dest="${DESTDIR:-}"
lib=target/release/libonnxifi_rust.so
[ -f "$lib" ] || cargo build --release --locked
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
install -D -m 0755 "$lib" "$dest$prefix/lib/libonnxifi-rust.so"
install -D -m 0644 include/onnxifi.h "$dest$prefix/include/onnxifi-rust/onnxifi.h"
mkdir -p "$dest$prefix/lib/pkgconfig"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" packaging/onnxifi-rust.pc.in \
  > "$dest$prefix/lib/pkgconfig/onnxifi-rust.pc"
if [ "${ONNXIFI_RUST_DEFAULT:-0}" = 1 ]; then
  ln -sf libonnxifi-rust.so "$dest$prefix/lib/libonnxifi.so"
fi
echo "installed libonnxifi-rust.so $version under $dest$prefix"
