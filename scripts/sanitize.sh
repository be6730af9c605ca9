#!/usr/bin/env bash
# Runs the C lifecycle and stress tests against an AddressSanitizer build of the library:
# a nightly `-Zsanitizer=address` build (the debug profile: overflow checks and debug
# assertions on as well), linked into C programs built with gcc's -fsanitize=address, with
# LeakSanitizer on. Any ASan or LSan report fails the run.
#
# usage: scripts/sanitize.sh
# Needs: scripts/setup-test-env.sh (the venv computes the expected outputs). Installs the pinned
# nightly toolchain with rustup when it is missing. Build output: target/asan.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

# The nightly that builds the sanitizer and fuzz builds (pinned so CI cannot drift).
NIGHTLY="${ONNXIFI_RUST_NIGHTLY:-nightly-2026-05-20}"
TRIPLE=x86_64-unknown-linux-gnu
PY="${ONNXIFI_RUST_PYTHON:-$ROOT/.venv/bin/python}"
CC="${CC:-cc}"

if ! rustup run "$NIGHTLY" rustc --version >/dev/null 2>&1; then
    rustup toolchain install "$NIGHTLY" --profile minimal
fi

RUSTFLAGS="-Zsanitizer=address" cargo "+$NIGHTLY" build --locked --lib --target "$TRIPLE" \
    --target-dir target/asan
LIB="$ROOT/target/asan/$TRIPLE/debug/libonnxifi_rust.so"

BUILD="$ROOT/target/asan-c"
rm -rf "$BUILD"
mkdir -p "$BUILD/lib"
ln -s "$LIB" "$BUILD/lib/libonnxifi_rust.so"
ln -s "$LIB" "$BUILD/lib/libonnxifi-rust.so"
"$PY" examples/make_small_cnn.py --model examples/small_cnn.onnx \
    --input-out "$BUILD/small_cnn.in.bin" --expected "$BUILD/small_cnn.out.bin" >/dev/null

FLAGS=(-std=c99 -Wall -Wextra -Werror -O1 -g -fsanitize=address -fno-omit-frame-pointer
    -Iinclude -Iffi-tests/c)
LINK=(-L"$BUILD/lib" -lonnxifi_rust -Wl,-rpath,"$BUILD/lib" -lm)
"$CC" "${FLAGS[@]}" ffi-tests/c/lifecycle.c "${LINK[@]}" -o "$BUILD/lifecycle"
"$CC" "${FLAGS[@]}" -pthread ffi-tests/c/stress.c "${LINK[@]}" -o "$BUILD/stress"

export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:exitcode=99"
echo "=== lifecycle (AddressSanitizer)"
"$BUILD/lifecycle" examples/small_cnn.onnx "$BUILD/small_cnn.out.bin" 3 3
echo "=== stress (AddressSanitizer)"
"$BUILD/stress" examples/small_cnn.onnx "$BUILD/small_cnn.out.bin" 1000 60
echo "sanitize: lifecycle and stress clean under AddressSanitizer and LeakSanitizer"
