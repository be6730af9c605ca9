#!/usr/bin/env bash
# Prepares everything the tests outside the library need, idempotently:
#   * system tools (gcc, g++, valgrind, unzip, binutils, pkg-config, dpkg, python3-venv) through
#     apt-get when missing,
#   * a Python virtual environment `.venv/` at the repository root with onnx, onnxruntime, numpy,
#   * the official ONNXIFI 1.12.0 headers and loader, taken from the onnx 1.12.0 wheel at test
#     time (never committed) and unpacked into `.testdata/onnx-1.12.0/onnx/`.
# Run it from anywhere; as root on a fresh Debian machine it installs the missing packages.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
TESTDATA="$ROOT/.testdata"
ONNX112="$TESTDATA/onnx-1.12.0"
# The test oracles are pinned so that they cannot drift under the tests. ml_dtypes is onnx's
# own dependency, which writes the expected outputs of the 2- and 4-bit Cast cases: from 0.7.0 on
# it casts out-of-range floats to 0 where 0.6.0 wraps them (the Cast spec leaves float to
# fixed point out of range undefined), so an unpinned install changed eight test cases.
PY_PACKAGES=(onnx==1.23.2 onnxruntime==1.32.0 numpy==2.4.6 pytest==8.4.2 ml_dtypes==0.6.0)

log() { printf '[setup-test-env] %s\n' "$*"; }

# --- 1. system packages -------------------------------------------------------------------
missing=()
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
command -v unzip >/dev/null 2>&1 || missing+=(unzip)
command -v readelf >/dev/null 2>&1 || missing+=(binutils)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ ! -x "$VENV/bin/python" ] && ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
    if ! command -v apt-get >/dev/null 2>&1; then
        log "missing tools: ${missing[*]}; install them (no apt-get here)" >&2
        exit 1
    fi
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
    log "installing: ${missing[*]}"
    $SUDO apt-get update
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
else
    log "system tools present"
fi

# --- 2. Python virtual environment -------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    log "creating $VENV"
    python3 -m venv "$VENV"
fi
if "$VENV/bin/python" - <<'PY' >/dev/null 2>&1
import importlib.metadata as m
assert m.version("onnx") == "1.23.2"
assert m.version("onnxruntime") == "1.32.0"
assert m.version("numpy") == "2.4.6"
assert m.version("pytest") == "8.4.2"
assert m.version("ml_dtypes") == "0.6.0"
import onnx, onnxruntime, numpy, pytest  # noqa: F401
PY
then
    log "venv already has ${PY_PACKAGES[*]}"
else
    log "installing ${PY_PACKAGES[*]} into $VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet "${PY_PACKAGES[@]}"
fi

# --- 3. official ONNXIFI 1.12.0 headers and loader ----------------------------------------
wanted=(onnx/onnxifi.h onnx/onnxifi_ext.h onnx/onnxifi_loader.c onnx/onnxifi_loader.h
        onnx/onnxifi_wrapper.c)
have_all=1
for f in "${wanted[@]}"; do
    [ -s "$ONNX112/$f" ] || have_all=0
done
if [ "$have_all" -eq 1 ]; then
    log "official headers present in $ONNX112/onnx"
else
    mkdir -p "$TESTDATA/wheels" "$ONNX112"
    wheel="$(ls "$TESTDATA"/wheels/onnx-1.12.0-*.whl 2>/dev/null | head -n1 || true)"
    if [ -z "$wheel" ]; then
        log "downloading the onnx 1.12.0 wheel"
        "$VENV/bin/python" -m pip download --quiet --no-deps --only-binary=:all: \
            --python-version 3.10 --platform manylinux_2_17_x86_64 \
            --dest "$TESTDATA/wheels" onnx==1.12.0
        wheel="$(ls "$TESTDATA"/wheels/onnx-1.12.0-*.whl | head -n1)"
    fi
    log "unpacking ${wanted[*]} from $(basename "$wheel")"
    unzip -o -q "$wheel" "${wanted[@]}" -d "$ONNX112"
fi

log "done: venv $VENV, headers $ONNX112/onnx"
