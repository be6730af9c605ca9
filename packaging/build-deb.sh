#!/usr/bin/env bash
# Builds two Debian packages with dpkg-deb from a staged install (packaging/install.sh):
#   target/onnxifi-rust_<version>_<arch>.deb      the stripped library, header, pkg-config
#                                                 file and the onnxifi-run CLI; Depends lists
#                                                 the packages of every shared library they
#                                                 link (libc6, libgcc-s1), found with dpkg -S
#   target/onnxifi-rust-dbg_<version>_<arch>.deb  the detached debug symbols, under
#                                                 /usr/lib/debug/.build-id/ (found by gdb)
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
arch=$(dpkg --print-architecture)
stage=target/deb/onnxifi-rust
dbg=target/deb/onnxifi-rust-dbg
rm -rf "$stage" "$dbg"
bash packaging/install.sh --destdir "$PWD/$stage" --prefix /usr >/dev/null

# Split the debug symbols off: keep them in the -dbg package by build ID, strip the rest.
for f in "$stage/usr/lib/libonnxifi-rust.so" "$stage/usr/bin/onnxifi-run"; do
  id=$(readelf -n "$f" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
  [ -n "$id" ] || { echo "build-deb: $f has no build ID" >&2; exit 1; }
  debug="$dbg/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
  mkdir -p "$(dirname "$debug")"
  objcopy --only-keep-debug "$f" "$debug"
  chmod 0644 "$debug"
  strip --strip-unneeded "$f"
  objcopy --add-gnu-debuglink="$debug" "$f"
done

# The packages that provide the shared libraries the library and the CLI link.
depends=$(
  for f in "$stage/usr/lib/libonnxifi-rust.so" "$stage/usr/bin/onnxifi-run"; do
    readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
  done | sort -u | while read -r soname; do
    path=$(ldconfig -p | awk -v n="$soname" '$1 == n && /x86-64|x86_64|64bit|aarch64/ {print $NF; exit}')
    [ -n "$path" ] || path=$(ldconfig -p | awk -v n="$soname" '$1 == n {print $NF; exit}')
    [ -n "$path" ] || { echo "build-deb: no file provides $soname" >&2; exit 1; }
    real=$(readlink -f "$path")
    { dpkg -S "$path" 2>/dev/null || dpkg -S "$real" 2>/dev/null || dpkg -S "*/$soname" 2>/dev/null; } |
      head -1 | cut -d: -f1
  done | sort -u | paste -sd, | sed 's/,/, /g'
)
[ -n "$depends" ] || { echo "build-deb: could not work out the dependencies" >&2; exit 1; }

mkdir -p "$stage/DEBIAN" "$dbg/DEBIAN"
cat > "$stage/DEBIAN/control" <<CONTROL
Package: onnxifi-rust
Version: $version
Architecture: $arch
Maintainer: onnxifi-rust developers <onnxifi-rust@invalid>
Depends: $depends
Section: libs
Priority: optional
Description: ONNXIFI backend running ONNX models on the CPU
 libonnxifi-rust.so implements the ONNXIFI 1.0 C API; the ONNXIFI multi-vendor
 wrapper finds it in /usr/lib. Includes the C header, a pkg-config file and the
 onnxifi-run command-line tool.
CONTROL
cat > "$dbg/DEBIAN/control" <<CONTROL
Package: onnxifi-rust-dbg
Version: $version
Architecture: $arch
Maintainer: onnxifi-rust developers <onnxifi-rust@invalid>
Depends: onnxifi-rust (= $version)
Section: debug
Priority: optional
Description: debug symbols for onnxifi-rust
 Detached debug symbols of libonnxifi-rust.so and onnxifi-run, by build ID.
CONTROL
dpkg-deb --root-owner-group --build "$stage" "target/onnxifi-rust_${version}_${arch}.deb"
dpkg-deb --root-owner-group --build "$dbg" "target/onnxifi-rust-dbg_${version}_${arch}.deb"
