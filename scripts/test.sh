#!/usr/bin/env bash
# Runs every test of onnxifi-rust on a fresh machine: installs what the tests need (apt packages,
# a Python venv with onnx/onnxruntime, the onnx 1.12.0 ONNXIFI header and loader), generates the
# ONNX backend node test data, builds the release library, then runs the Rust tests (unit,
# conformance, header, libloading status matrix) and the C tests (ABI check against the official
# header, lifecycle under valgrind, the official onnxifi_load loader).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup-test-env.sh
export ONNXIFI_RUST_PYTHON="$PWD/.venv/bin/python"

if [ ! -f .testdata/node.complete ]; then
  "$ONNXIFI_RUST_PYTHON" scripts/gen_node_tests.py .testdata/node
  touch .testdata/node.complete
fi

cargo build --release --locked
cargo test --workspace --locked -- --nocapture
bash ffi-tests/run-c-tests.sh
