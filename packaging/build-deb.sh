#!/usr/bin/env bash
# Builds target/onnxifi-rust_<version>_<arch>.deb with dpkg-deb from a staged install.
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
stage=target/deb/onnxifi-rust
rm -rf "$stage"
DESTDIR="$PWD/$stage" bash packaging/install.sh /usr
mkdir -p "$stage/DEBIAN"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: onnxifi-rust
Version: $version
Architecture: $arch
Maintainer: onnxifi-rust developers <onnxifi-rust@invalid>
Depends: libc6
Section: libs
Priority: optional
Description: ONNXIFI backend running ONNX models on the CPU
 libonnxifi-rust.so implements the ONNXIFI 1.0 C API; the ONNXIFI multi-vendor
 wrapper finds it in /usr/lib.
CONTROL
dpkg-deb --root-owner-group --build "$stage" "target/onnxifi-rust_${version}_${arch}.deb"
