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
# Everything the tests need is installed above; the tests that need Python, onnx or test data
# fail without them (whether or not CI is set). CI also keeps the other "required" checks on.
export CI="${CI:-1}"
# The per-ISA kernel tests must exercise every SIMD path this CPU has: name them from the CPU's
# own flags (independently of the library's detection), so a test that would skip them fails.
if [ -z "${ONNXIFI_RUST_REQUIRE_ISA:-}" ] && [ -r /proc/cpuinfo ]; then
  flags=$(grep -m1 '^flags' /proc/cpuinfo || true)
  case " $flags " in
    *" avx512f "*" avx512_bf16 "*) export ONNXIFI_RUST_REQUIRE_ISA=avx512,avx2,avx512bf16 ;;
    *" avx512f "*) export ONNXIFI_RUST_REQUIRE_ISA=avx512,avx2 ;;
    *" avx2 "*" fma "* | *" fma "*" avx2 "*) export ONNXIFI_RUST_REQUIRE_ISA=avx2 ;;
  esac
fi
echo "ONNXIFI_RUST_REQUIRE_ISA=${ONNXIFI_RUST_REQUIRE_ISA:-} (SIMD paths the kernel tests must run)"

if [ ! -f .testdata/node.v3.complete ]; then
  "$ONNXIFI_RUST_PYTHON" scripts/gen_node_tests.py .testdata/node
  touch .testdata/node.v3.complete
fi

cargo build --release --locked
cargo test --workspace --locked -- --nocapture
bash ffi-tests/run-c-tests.sh

# Hostile models (tests/hostile/README.md): 2,000 hostile variants of the models above through
# the library in children limited to 4 GiB of address space; any crash or hang fails.
"$ONNXIFI_RUST_PYTHON" scripts/hostile_models.py --jobs 2

# The C lifecycle and stress tests against a nightly AddressSanitizer build of the library.
bash scripts/sanitize.sh

# Every cargo-fuzz target, reproducibly: libFuzzer seed 1, a fixed number of executions each
# (about 2 minutes in all) from a fresh corpus of the seed models, at most 60 s a target. Long
# random-seed sessions (`scripts/fuzz.sh TARGET SECONDS`) run outside the test command, because
# a new finding there must not make the test command fail at random.
bash scripts/fuzz.sh ci 60

# The Python package, installed into the venv as a user would (`pip install ./python` builds the
# library and bundles it), then ONNX's BackendTest and the Session tests against that install.
"$ONNXIFI_RUST_PYTHON" -m pip install --quiet --disable-pip-version-check ./python
(cd python/tests && env -u ONNXIFI_RUST_LIB "$ONNXIFI_RUST_PYTHON" -m pytest -q \
  -p no:cacheprovider -W ignore::RuntimeWarning -W ignore::DeprecationWarning .)

# The install as packagers and users meet it: install.sh into a temporary root, a C program
# built with pkg-config, the official multi-vendor wrapper, the installed CLI, the .deb packages.
bash packaging/test-packaging.sh
