#!/usr/bin/env bash
# Installs the built library and CLI the way an ONNXIFI vendor does:
#   $DESTDIR$PREFIX/lib/libonnxifi-rust.so      the library (SONAME libonnxifi-rust.so, the
#                                              libonnxifi-*.so name the multi-vendor wrapper
#                                              finds in /usr/lib)
#   $DESTDIR$PREFIX/include/onnxifi-rust/onnxifi.h   the header: the ONNXIFI 1.0 API and this
#                                              library's extensions and constants
#   $DESTDIR$PREFIX/lib/pkgconfig/onnxifi-rust.pc
#   $DESTDIR$PREFIX/bin/onnxifi-run            the CLI (finds ../lib/libonnxifi-rust.so)
#
# Usage: packaging/install.sh [--destdir DIR] [--prefix PREFIX] [--strip]
#        packaging/install.sh [PREFIX]              (older form; DESTDIR from the environment)
# Defaults: prefix /usr, destdir $DESTDIR or none. --strip strips the library and the CLI.
# With ONNXIFI_RUST_DEFAULT=1 it also links libonnxifi.so to the library, so frameworks that
# open the default name (Caffe2, the onnx test driver) load this backend.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=/usr
dest="${DESTDIR:-}"
strip=0
usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case "$1" in
    --destdir) [ $# -ge 2 ] || { usage >&2; exit 2; }; dest="$2"; shift 2 ;;
    --destdir=*) dest="${1#--destdir=}"; shift ;;
    --prefix) [ $# -ge 2 ] || { usage >&2; exit 2; }; prefix="$2"; shift 2 ;;
    --prefix=*) prefix="${1#--prefix=}"; shift ;;
    --strip) strip=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "install.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) prefix="$1"; shift ;;
  esac
done
case "$prefix" in
  /*) ;;
  *) echo "install.sh: the prefix must be an absolute path, not '$prefix'" >&2; exit 2 ;;
esac
lib=target/release/libonnxifi_rust.so
bin=target/release/onnxifi-run
[ -f "$lib" ] && [ -f "$bin" ] || cargo build --release --locked
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
install -D -m 0755 "$lib" "$dest$prefix/lib/libonnxifi-rust.so"
install -D -m 0755 "$bin" "$dest$prefix/bin/onnxifi-run"
if [ "$strip" = 1 ]; then
  strip --strip-unneeded "$dest$prefix/lib/libonnxifi-rust.so"
  strip "$dest$prefix/bin/onnxifi-run"
fi
install -D -m 0644 include/onnxifi.h "$dest$prefix/include/onnxifi-rust/onnxifi.h"
mkdir -p "$dest$prefix/lib/pkgconfig"
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" packaging/onnxifi-rust.pc.in \
  > "$dest$prefix/lib/pkgconfig/onnxifi-rust.pc"
if [ "${ONNXIFI_RUST_DEFAULT:-0}" = 1 ]; then
  ln -sf libonnxifi-rust.so "$dest$prefix/lib/libonnxifi.so"
fi
echo "installed libonnxifi-rust.so and onnxifi-run $version under $dest$prefix"
