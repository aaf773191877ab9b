#!/usr/bin/env bash
# The whole GPU suite (every *_gpu_test binary in .devbin/, i.e. what `ctest -L gpu` runs), then, with
# MEMCHECK=1, the same binaries under compute-sanitizer memcheck (issue 9: sanitizers on the GPU suite).
# GTEST_FILTER narrows both. SHARDS=N (default 4; 1 = one process) runs each binary as N gtest shards in parallel processes on the
# one GPU: the suite's wall time is mostly single-threaded CPU references (a whole run is ~270-300 s in one
# process), so shards cut it several-fold; the timings some tests print are perturbed then (none is asserted).
# Logs: $OUT/<binary>[.shardI].log, <binary>_memcheck[.shardI].log. Keeps going after a failure.
set -u
source "$(dirname "$0")/lib.sh"
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
SHARDS=${SHARDS:-4}
run() {  # name timeout command...: SHARDS processes (gtest sharding), their summaries merged
  local name=$1 secs=$2
  shift 2
  local start=$(date +%s) pids=() rcs=() i
  for ((i = 0; i < SHARDS; i++)); do
    local log="$OUT/$name.log"
    [ "$SHARDS" -gt 1 ] && log="$OUT/$name.shard$i.log"
    GTEST_TOTAL_SHARDS=$SHARDS GTEST_SHARD_INDEX=$i timeout --kill-after=5 "$secs" "$@" > "$log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do
    wait "$i"
    rcs+=($?)
  done
  echo "== $name rc=${rcs[*]} ($(( $(date +%s) - start )) s, $SHARDS shard(s))"
  for i in "${!rcs[@]}"; do  # a shard that died (abort, timeout) prints no FAILED line: name it and its last words
    [ "${rcs[$i]}" = 0 ] && continue
    local bad="$OUT/$name.log"
    [ "$SHARDS" -gt 1 ] && bad="$OUT/$name.shard$i.log"
    echo "!! shard $i rc=${rcs[$i]}: $(grep -E '^\[ RUN' "$bad" | tail -1) / $(tail -1 "$bad")"
  done
  local logs=("$OUT/$name.log")
  [ "$SHARDS" -gt 1 ] && logs=("$OUT/$name".shard*.log)
  grep -hE "^\[  FAILED  \] [^0-9]|ERROR SUMMARY|tests ran" "${logs[@]}" | tail -25
  grep -hE "^\[  PASSED  \] [0-9]+ test" "${logs[@]}" | awk '{n += $4} END {print "[  PASSED  ] " n " tests (all shards)"}'
}
for t in "$B"/*_gpu_test; do
  [ -x "$t" ] || continue
  n=$(basename "$t")
  filter=${GTEST_FILTER:-*}
  # The MultiGpu* cases (ctest label multigpu) need 2 GPUs or more: scripts/device/multigpu.sh runs them.
  [ "$n" = ds_dist_cuda_gpu_test ] && [ -z "${GTEST_FILTER:-}" ] && filter='-MultiGpu*:*/MultiGpu.*'
  [ "${SKIP_PLAIN:-0}" = 1 ] || run "$n" "${SUITE_LIMIT:-240}" "$t" --gtest_filter="$filter"
  if [ "${MEMCHECK:-0}" = 1 ]; then
    run "${n}_memcheck" "${MEMCHECK_LIMIT:-400}" "$CS" --tool memcheck --leak-check no --error-exitcode 3 \
      "$t" --gtest_filter="$filter"
  fi
done
