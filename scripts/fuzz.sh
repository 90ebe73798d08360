#!/usr/bin/env bash
# Coverage-guided fuzzing of spmd's input handling (docs/robustness.md):
# builds the fuzz targets in scripts/sanitize.sh's build (clang-22,
# AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer coverage), makes
# the seed corpora, and runs every target at once for SECONDS each.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
#     SECONDS  per target (default 1800); TARGET: spmd-opt-fuzzer,
#              spmd-plan-fuzzer, spmd-bundle-fuzzer (default: all three)
# Corpora grow across runs in $build/fuzz/corpus/<target>; a crash, hang
# (a unit over 60 s), leak or sanitizer report is written to
# $build/fuzz/artifacts/<target>/ and makes the script exit 1. Prints, per
# target: executions, executions per second, coverage, corpus size and
# findings.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

seconds="${1:-1800}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(spmd-opt-fuzzer spmd-plan-fuzzer spmd-bundle-fuzzer)
fi
build="${SPMD_SANITIZE_BUILD:-build-sanitize}"
SPMD_SANITIZE_BUILD="$build" ./scripts/sanitize.sh "${targets[@]}"

export ASAN_OPTIONS="halt_on_error=1:detect_odr_violation=0:allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$root/test/sanitizer-suppressions.txt:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}"

work="$build/fuzz"
seeds="$(mktemp -d)"
trap 'rm -rf "$seeds"' EXIT
# The project's Python environment (scripts/setup.sh, run by sanitize.sh).
"${SPMD_PYTHON_ENV:-$root/.venv}/bin/python" tools/fuzz/make_corpus.py "$root" "$seeds"

declare -A maxlen=([spmd-opt-fuzzer]=65536 [spmd-plan-fuzzer]=8192
                   [spmd-bundle-fuzzer]=16384)
declare -A dict=([spmd-opt-fuzzer]=tools/fuzz/mlir.dict
                 [spmd-plan-fuzzer]=tools/fuzz/plan.dict
                 [spmd-bundle-fuzzer]=tools/fuzz/bundle.dict)
pids=()
for t in "${targets[@]}"; do
  mkdir -p "$work/corpus/$t" "$work/artifacts/$t"
  "$build/bin/$t" "$work/corpus/$t" "$seeds/$t" \
    -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
    -max_len="${maxlen[$t]}" -dict="${dict[$t]}" -keep_seed=1 \
    -artifact_prefix="$work/artifacts/$t/" -print_final_stats=1 \
    > "$work/$t.log" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || status=1
done

printf '%-20s %12s %9s %7s %7s %9s\n' target executions exec/s cov ft findings
for t in "${targets[@]}"; do
  log="$work/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  found=$(find "$work/artifacts/$t" -type f | wc -l)
  printf '%-20s %12s %9s %7s %7s %9s\n' "$t" "${execs:-?}" "${rate:-?}" \
    "${cov:-?}" "${ft:-?}" "$found"
  if [ "$found" -gt 0 ]; then
    status=1
    find "$work/artifacts/$t" -type f | sed 's/^/  /'
  fi
done
if [ "$status" -ne 0 ]; then
  echo "spmd fuzz: findings or a failed run: see $work/<target>.log"
fi
exit "$status"
