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
# Everything the tests need is installed above, so a test that would skip for lack of Python,
# onnx or test data must fail instead (the tests treat CI as "required").
export CI="${CI:-1}"

if [ ! -f .testdata/node.v2.complete ]; then
  "$ONNXIFI_RUST_PYTHON" scripts/gen_node_tests.py .testdata/node
  touch .testdata/node.v2.complete
fi

cargo build --release --locked
cargo test --workspace --locked -- --nocapture
bash ffi-tests/run-c-tests.sh

# The Python package, installed into the venv as a user would (`pip install ./python` builds the
# library and bundles it), then ONNX's BackendTest and the Session tests against that install.
"$ONNXIFI_RUST_PYTHON" -m pip install --quiet --disable-pip-version-check ./python
(cd python/tests && env -u ONNXIFI_RUST_LIB "$ONNXIFI_RUST_PYTHON" -m pytest -q \
  -p no:cacheprovider -W ignore::RuntimeWarning -W ignore::DeprecationWarning .)

# The vendor install layout: a staged `packaging/install.sh` must give the library under its
# ONNXIFI vendor name with the right SONAME, the header and a pkg-config file.
stage=$(mktemp -d)
DESTDIR="$stage" bash packaging/install.sh /usr >/dev/null
lib="$stage/usr/lib/libonnxifi-rust.so"
if [ -f "$lib" ] && readelf -d "$lib" | grep -q 'SONAME.*\[libonnxifi-rust.so\]' \
  && cmp -s include/onnxifi.h "$stage/usr/include/onnxifi-rust/onnxifi.h" \
  && grep -q -- '-lonnxifi-rust' "$stage/usr/lib/pkgconfig/onnxifi-rust.pc"; then
  echo "packaging: 1 passed, 0 failed"
else
  echo "packaging: 0 passed, 1 failed"
  exit 1
fi
rm -rf "$stage"
