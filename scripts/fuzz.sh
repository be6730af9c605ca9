#!/usr/bin/env bash
# Runs a cargo-fuzz target of fuzz/ for a bounded time.
#
#   scripts/fuzz.sh TARGET SECONDS    one target (parse_text, model_bytes, tensor_descriptors,
#                                     api_sequence)
#   scripts/fuzz.sh all SECONDS       every target in turn, SECONDS each
#   scripts/fuzz.sh ci SECONDS        every target in turn, reproducibly: libFuzzer seed 1, a
#                                     fixed number of executions per target (ci_runs below),
#                                     SECONDS at most each, a fresh corpus made of the seeds
#                                     only (the test command runs this mode)
#
# Installs the nightly toolchain and a pinned cargo-fuzz when missing, seeds the corpus
# (model_bytes: the ONNX backend node test models .testdata/node/*/model.onnx that
# scripts/test.sh generates; parse_text: tests/text_corpus), runs one fuzzer process (ASan,
# release build with debug assertions: cargo-fuzz's defaults) and prints its final
# statistics (executions, exec/s). Exits non-zero when a target crashed, printing the
# artifact path; replay one with `cargo +NIGHTLY fuzz run TARGET ARTIFACT`.
# A timeout (a run over 10 s) counts as a crash.
#
# Environment: FUZZ_ARGS adds libFuzzer flags (e.g. FUZZ_ARGS=-seed=1);
# FUZZ_KEEP_KNOWN_CRASHES=1 makes the targets stop skipping the library bugs they already found
# (listed in fuzz/fuzz_targets/model_bytes.rs).
set -euo pipefail

CARGO_FUZZ_VERSION=0.13.2
TARGETS=(parse_text model_bytes tensor_descriptors api_sequence)

usage() {
  echo "usage: $0 TARGET|all|ci SECONDS   (targets: ${TARGETS[*]})" >&2
  exit 2
}
[ $# -eq 2 ] || usage
target=$1
seconds=$2
case $seconds in '' | *[!0-9]*) usage ;; esac

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# The nightly of scripts/sanitize.sh and scripts/miri.sh (pinned so CI cannot drift).
NIGHTLY="${ONNXIFI_RUST_NIGHTLY:-nightly-2026-05-20}"
if ! rustup run "$NIGHTLY" rustc --version >/dev/null 2>&1; then
  rustup toolchain install "$NIGHTLY" --profile minimal
fi
if ! cargo fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
  cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked
fi

# Library code reads these; the targets set them too.
export ONNXIFI_RUST_NUM_THREADS=1
export ONNXIFI_RUST_LOG=0

# Prints the seed directories of a target (created here; they live under the git-ignored
# fuzz/corpus).
seeds() {
  case $1 in
    model_bytes)
      if compgen -G ".testdata/node/*/model.onnx" >/dev/null; then
        local dir=fuzz/corpus/model_bytes.seeds
        mkdir -p "$dir"
        for m in .testdata/node/*/model.onnx; do
          local name
          name=$(basename "$(dirname "$m")")
          [ -e "$dir/$name.onnx" ] || cp "$m" "$dir/$name.onnx"
        done
        echo "$dir"
      else
        echo "note: .testdata/node is missing (scripts/test.sh generates it); model_bytes starts unseeded" >&2
      fi
      ;;
    parse_text) echo tests/text_corpus ;;
  esac
}

# Flags per target: inputs up to the largest seed model for model_bytes; the sequence target
# keeps inputs short so that each exec stays cheap.
max_len() {
  case $1 in
    model_bytes) echo 65536 ;;
    api_sequence) echo 512 ;;
    *) echo 4096 ;;
  esac
}

# Extra libFuzzer flags and ASan options per target. api_sequence makes and ends threads
# (backend pools, the second sequence thread) in every exec, so malloc and free counts never
# match and libFuzzer would run LeakSanitizer after every exec (9 in 10 of the time), and the
# pool threads of released backends still own memory at exit: no leak detection there.
extra_flags() {
  case $1 in
    api_sequence) echo -detect_leaks=0 ;;
  esac
}
asan_options() {
  case $1 in
    api_sequence) echo "${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ;;
    *) echo "${ASAN_OPTIONS:-}" ;;
  esac
}

# Executions per target in ci mode: each takes 15–40 s on the 2-core machine of the README
# (the seeds' own executions count too; model_bytes has about 2,000 seed models).
ci_runs() {
  case $1 in
    parse_text) echo 200000 ;;
    model_bytes) echo 30000 ;;
    tensor_descriptors) echo 100000 ;;
    api_sequence) echo 10000 ;;
  esac
}

ci=0
run_one() {
  # `t` first, on its own: `local` expands all its words before it assigns any, so
  # `corpus=.../$t` in the same declaration read the caller's `t` (unset for one target).
  local t=$1
  local log status corpus="fuzz/corpus/$t"
  mkdir -p "fuzz/artifacts/$t"
  log=$(mktemp "${TMPDIR:-/tmp}/fuzz-$t.XXXXXX.log")
  local -a dirs ci_flags=()
  mapfile -t dirs < <(seeds "$t")
  if [ "$ci" = 1 ]; then
    # A new corpus directory each time, so the run does not depend on what earlier runs on
    # this machine found.
    corpus=$(mktemp -d "${TMPDIR:-/tmp}/fuzz-corpus-$t.XXXXXX")
    ci_flags=(-seed=1 -runs="$(ci_runs "$t")")
  fi
  mkdir -p "$corpus"
  local bin
  bin="fuzz/target/$(rustc "+$NIGHTLY" -vV | sed -n 's/^host: //p')/release/$t"
  echo "== fuzzing $t for ${seconds}s (log: $log)"
  status=0
  # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
  ASAN_OPTIONS=$(asan_options "$t") "$bin" -artifact_prefix="fuzz/artifacts/$t/" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -max_len="$(max_len "$t")" \
    -print_final_stats=1 $(extra_flags "$t") "${ci_flags[@]}" ${FUZZ_ARGS:-} \
    "$corpus" "${dirs[@]}" >"$log" 2>&1 || status=$?
  if [ "$ci" = 1 ]; then rm -rf "$corpus"; fi
  grep -E '^(#[0-9]+ +DONE|Done [0-9]+ runs|stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb))' "$log" |
    sed "s/^/$t: /" || true
  if [ "$status" -ne 0 ]; then
    grep -E -A4 'panicked at|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|^SUMMARY:' "$log" |
      head -n 40 || true
    grep -Eo 'Test unit written to [^ ]+' "$log" | sed "s/^Test unit written to /$t: CRASH: /" || true
    echo "$t: replay with: $bin ARTIFACT (or cargo +$NIGHTLY fuzz run $t ARTIFACT)" >&2
    echo "$t: FAILED (exit $status); full log: $log" >&2
  else
    # A passing run's log has said what it had to (its stats above); only a failure's stays.
    rm -f "$log"
  fi
  return "$status"
}

if [ "$target" = ci ]; then
  ci=1
  target=all
fi
# Built by cargo-fuzz (ASan, release with debug assertions), all targets in one build before
# any runs, and run directly: after a crash `cargo fuzz run` reruns the input to print it, which
# never ends for a timeout.
if [ "$target" = all ]; then
  cargo "+$NIGHTLY" fuzz build
else
  printf '%s\n' "${TARGETS[@]}" | grep -qx -- "$target" || usage
  cargo "+$NIGHTLY" fuzz build "$target"
fi
if [ "$target" = all ]; then
  failed=()
  for t in "${TARGETS[@]}"; do
    run_one "$t" || failed+=("$t")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "failed targets: ${failed[*]}" >&2
    exit 1
  fi
else
  run_one "$target"
fi
