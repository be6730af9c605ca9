#!/usr/bin/env bash
# Runs the unit tests of the handle registry, the events, the run queue and the IR code under
# miri (the pinned nightly's interpreter, which reports undefined behaviour, data races and
# leaks). Kept out of scripts/test.sh: miri interprets the whole crate, and the build alone
# takes about 10 minutes on 2 cores (see README.md, "Tests").
#
# usage: scripts/miri.sh [TEST-FILTER...]   (default: ffi::handles sync:: ir::)
#
# Tree borrows, not stacked borrows: crossbeam-epoch (under rayon's thread pool, which the run
# queue tests use) breaks a stacked-borrows rule that tree borrows, the newer aliasing model,
# accepts. Isolation is off because rayon reads the CPU count. Leaks are not checked here:
# rayon's worker threads exit asynchronously after their pool is dropped, so at the end of the
# test process miri still sees their thread-local epoch records; leaks are checked by valgrind
# and LeakSanitizer on the C lifecycle and stress tests (run-c-tests.sh, sanitize.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

NIGHTLY="${ONNXIFI_RUST_NIGHTLY:-nightly-2026-05-20}"
if ! rustup run "$NIGHTLY" cargo miri --version >/dev/null 2>&1; then
    rustup toolchain install "$NIGHTLY" --profile minimal --component miri,rust-src
fi
[ $# -gt 0 ] || set -- ffi::handles sync:: ir::
MIRIFLAGS="${MIRIFLAGS:-} -Zmiri-disable-isolation -Zmiri-tree-borrows -Zmiri-ignore-leaks" \
    cargo "+$NIGHTLY" miri test --locked --lib --target-dir target/miri -- "$@"
