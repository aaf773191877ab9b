#!/usr/bin/env bash
# The whole GPU suite (every *_gpu_test binary in .devbin/, i.e. what `ctest -L gpu` runs), then, with
# MEMCHECK=1, the same binaries under compute-sanitizer memcheck (issue 9: sanitizers on the GPU suite).
# GTEST_FILTER narrows both. Logs: $OUT/<binary>.log, <binary>_memcheck.log. Keeps going after a failure.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
run() {  # name timeout command...
  local name=$1 secs=$2
  shift 2
  local start=$(date +%s)
  timeout --kill-after=5 "$secs" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "== $name rc=$rc ($(( $(date +%s) - start )) s)"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR SUMMARY|tests ran" "$OUT/$name.log" | tail -25
}
for t in "$B"/*_gpu_test; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  [ "${SKIP_PLAIN:-0}" = 1 ] || run "$n" "${SUITE_LIMIT:-240}" "$t" --gtest_filter="${GTEST_FILTER:-*}"
  if [ "${MEMCHECK:-0}" = 1 ]; then
    run "${n}_memcheck" "${MEMCHECK_LIMIT:-400}" "$CS" --tool memcheck --leak-check no --error-exitcode 3 \
      "$t" --gtest_filter="${GTEST_FILTER:-*}"
  fi
done
