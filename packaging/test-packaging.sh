#!/usr/bin/env bash
# Tests the install as a packager and a user meet it: packaging/install.sh into a temporary
# root (--destdir/--prefix, and the older positional form), then
#   files      the library (SONAME libonnxifi-rust.so, only onnx* exports), header, .pc, CLI
#   pkgconfig  a C program (ffi-tests/c/lifecycle.c) compiled with
#              `pkg-config --cflags --libs onnxifi-rust` against the installed files, run
#   wrapper    the official multi-vendor onnxifi_wrapper.c (from the onnx 1.12.0 wheel) built
#              as libonnxifi.so scanning the installed lib/ directory, loaded through the
#              official onnxifi_load, running the small CNN (ffi-tests/c/loader_test.c)
#   cli        the installed onnxifi-run finds ../lib/libonnxifi-rust.so by itself and runs a model
#   deb        packaging/build-deb.sh: Depends names libc6 and libgcc-s1, the packaged library
#              is stripped with a debug link, and the -dbg package holds its symbols by build ID
#   dpkg_install  (with ONNXIFI_RUST_TEST_DPKG_INSTALL=1, as root) the .deb installed with dpkg:
#              the official wrapper scanning /usr/lib/, the CLI, the Python package, then removed
# Needs scripts/setup-test-env.sh and `cargo build --release`. Prints "packaging: N passed,
# M failed"; exits 1 when any check fails.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
OFFICIAL="$ROOT/.testdata/onnx-1.12.0"
PY="${ONNXIFI_RUST_PYTHON:-$ROOT/.venv/bin/python}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
stage="$work/root"
lib="$stage/usr/lib/libonnxifi-rust.so"
passed=0
failed=0
check() { # check NAME COMMAND...
  local name="$1"
  shift
  echo "=== $name"
  if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "--- FAILED: $name"; fi
}

"$PY" examples/make_small_cnn.py --model examples/small_cnn.onnx \
  --input-out "$work/in.bin" --expected "$work/out.bin" >/dev/null || exit 1

files() {
  bash packaging/install.sh --destdir "$stage" --prefix /usr >/dev/null || return 1
  local f
  for f in usr/lib/libonnxifi-rust.so usr/include/onnxifi-rust/onnxifi.h \
    usr/lib/pkgconfig/onnxifi-rust.pc usr/bin/onnxifi-run; do
    [ -f "$stage/$f" ] || { echo "missing $f"; return 1; }
  done
  readelf -d "$lib" | grep -q 'SONAME.*\[libonnxifi-rust.so\]' || { echo "SONAME"; return 1; }
  cmp -s include/onnxifi.h "$stage/usr/include/onnxifi-rust/onnxifi.h" || return 1
  local other
  other=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^onnx' || true)
  [ -z "$other" ] || { echo "exports that are not onnx*: $other"; return 1; }
  # The older positional form with DESTDIR still installs the same files.
  DESTDIR="$work/old" bash packaging/install.sh /opt/x >/dev/null || return 1
  [ -f "$work/old/opt/x/lib/libonnxifi-rust.so" ] && [ -f "$work/old/opt/x/bin/onnxifi-run" ] &&
    grep -q '^prefix=/opt/x$' "$work/old/opt/x/lib/pkgconfig/onnxifi-rust.pc"
}

pkgconfig() {
  local flags
  flags=$(PKG_CONFIG_PATH="$stage/usr/lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$stage" \
    pkg-config --cflags --libs onnxifi-rust) || return 1
  echo "pkg-config: $flags"
  # shellcheck disable=SC2086 # the flags are words
  cc -std=c99 -Wall -Werror -I ffi-tests/c ffi-tests/c/lifecycle.c $flags -lm \
    -o "$work/lifecycle" || return 1
  LD_LIBRARY_PATH="$stage/usr/lib" "$work/lifecycle" examples/small_cnn.onnx "$work/out.bin" 1 2
}

wrapper() {
  [ -f "$OFFICIAL/onnx/onnxifi_wrapper.c" ] || { echo "run scripts/setup-test-env.sh"; return 1; }
  mkdir -p "$work/wrapper"
  cc -std=c11 -O1 -fPIC -shared -I"$OFFICIAL" \
    -DONNXIFI_SEARCH_DIR="\"$stage/usr/lib/\"" \
    "$OFFICIAL/onnx/onnxifi_wrapper.c" "$OFFICIAL/onnx/onnxifi_loader.c" -ldl -lpthread \
    -o "$work/wrapper/libonnxifi.so" || return 1
  cc -std=c11 -Wall -Werror -O1 -I"$OFFICIAL" -I ffi-tests/c ffi-tests/c/loader_test.c \
    "$OFFICIAL/onnx/onnxifi_loader.c" -ldl -lm -o "$work/loader_test" || return 1
  # The wrapper passes bare file names to dlopen: the scanned directory must be searched too.
  LD_LIBRARY_PATH="$work/wrapper:$stage/usr/lib" "$work/loader_test" examples/small_cnn.onnx \
    "$work/out.bin"
}

cli() {
  local out
  out=$(env -u ONNXIFI_RUST_LIB "$stage/usr/bin/onnxifi-run" run examples/small_cnn.onnx \
    --repeat 1) || return 1
  echo "$out" | head -2
  echo "$out" | grep -q "library: $stage/usr/bin/../lib/libonnxifi-rust.so" &&
    echo "$out" | grep -q '^output probs \[1, 10\] float32'
}

deb() {
  bash packaging/build-deb.sh >/dev/null || return 1
  local version arch pkg dbg depends
  version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
  arch=$(dpkg --print-architecture)
  pkg="target/onnxifi-rust_${version}_${arch}.deb"
  dbg="target/onnxifi-rust-dbg_${version}_${arch}.deb"
  depends=$(dpkg-deb -f "$pkg" Depends)
  echo "Depends: $depends"
  case "$depends" in *libc6*libgcc-s1* | *libgcc-s1*libc6*) ;; *) return 1 ;; esac
  rm -rf "$work/deb" "$work/dbg"
  dpkg-deb -x "$pkg" "$work/deb" && dpkg-deb -x "$dbg" "$work/dbg" || return 1
  local packaged="$work/deb/usr/lib/libonnxifi-rust.so" id
  readelf -S "$packaged" | grep -q '\.symtab' && { echo "the packaged library is not stripped"; return 1; }
  readelf -S "$packaged" | grep -q '\.gnu_debuglink' || { echo "no debug link"; return 1; }
  id=$(readelf -n "$packaged" | sed -n 's/.*Build ID: \([0-9a-f]*\).*/\1/p')
  readelf -S "$work/dbg/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" | grep -q '\.symtab' ||
    { echo "the -dbg package lacks the symbols of build $id"; return 1; }
  # The packaged CLI and library still run a model.
  "$work/deb/usr/bin/onnxifi-run" run examples/small_cnn.onnx --repeat 1 | grep -q '^output probs'
}

# The .deb installed for real with dpkg, then used as a user would: the official wrapper built
# with its default search directory (/usr/lib/), the CLI on PATH, the Python package without a
# bundled library. It changes the machine, so it runs only when asked
# (ONNXIFI_RUST_TEST_DPKG_INSTALL=1, which .ci/run sets on its throwaway machine), as root;
# the package is removed afterwards.
dpkg_install() {
  local version arch pkg
  version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
  arch=$(dpkg --print-architecture)
  pkg="target/onnxifi-rust_${version}_${arch}.deb"
  [ -f "$pkg" ] || bash packaging/build-deb.sh >/dev/null || return 1
  dpkg -i "$pkg" >/dev/null || return 1
  local ok=0
  (
    set -e
    cc -std=c11 -O1 -fPIC -shared -I"$OFFICIAL" "$OFFICIAL/onnx/onnxifi_wrapper.c" \
      "$OFFICIAL/onnx/onnxifi_loader.c" -ldl -lpthread -o "$work/default-wrapper.so"
    mkdir -p "$work/default-wrapper"
    cp "$work/default-wrapper.so" "$work/default-wrapper/libonnxifi.so"
    cc -std=c11 -Wall -Werror -O1 -I"$OFFICIAL" -I ffi-tests/c ffi-tests/c/loader_test.c \
      "$OFFICIAL/onnx/onnxifi_loader.c" -ldl -lm -o "$work/loader_default"
    LD_LIBRARY_PATH="$work/default-wrapper" "$work/loader_default" examples/small_cnn.onnx \
      "$work/out.bin"
    env -u ONNXIFI_RUST_LIB onnxifi-run run examples/small_cnn.onnx --repeat 1 |
      grep -q '^library: /usr/bin/../lib/libonnxifi-rust.so'
    # The package built without a library inside it finds the installed one.
    rm -rf "$work/py"
    cp -r python "$work/py"
    rm -f "$work/py/onnxifi_rust/"*.so
    (cd "$work" && env -u ONNXIFI_RUST_LIB PYTHONPATH="$work/py" "$PY" -c "
import numpy as np, onnxifi_rust
assert onnxifi_rust.library_path() == 'libonnxifi-rust.so', onnxifi_rust.library_path()
with onnxifi_rust.Session('$ROOT/examples/small_cnn.onnx') as s:
    want = np.fromfile('$work/out.bin', np.float32)
    got = s.run({'input': np.fromfile('$work/in.bin', np.float32).reshape(1, 3, 16, 16)})['probs']
    assert np.abs(got.ravel() - want).max() < 1e-5
print('python: the installed library ran the model')")
  ) || ok=1
  dpkg -r onnxifi-rust >/dev/null || ok=1
  return $ok
}

check files files
check pkgconfig pkgconfig
check wrapper wrapper
check cli cli
check deb deb
if [ "${ONNXIFI_RUST_TEST_DPKG_INSTALL:-0}" = 1 ] && [ "$(id -u)" = 0 ]; then
  check dpkg_install dpkg_install
fi
echo "packaging: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
