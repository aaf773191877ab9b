#!/usr/bin/env bash
# Run record: DSERVE_GRAPH_EDGE_EXP existed only in that call's binaries (removed: it changed nothing, BENCHMARKS.md session 47).
# Session 47, first call (binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): (1) the whole GPU suite (the
# first device run of dc91b66 / 05572e1); (2) the bf16 graph's start stall (session 46): bf16 b1 traces with the
# captured graph's programmatic fork / join edges re-typed as full dependencies after capture
# (DSERVE_GRAPH_EDGE_EXP=1 every fork, 2 the first fork, 3 every join); (3) the batch-list effect on b1:
# `--batch-size 1` alone, with `--cuda-graph-max-bs 8` (graphs 1/2/4/8, b1's cache), and `1,8`, twice alternating.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
for v in 0 1 2 3; do
  DSERVE_GRAPH_EDGE_EXP=$v OUT=$OUT/trace_e$v TRACE_BS=1 TRACE_EXTRA="" TRACE_SUMMARY_ARGS="" bash "$D/trace.sh" | grep "^=="
  grep -h "EDGE_EXP" "$OUT/trace_e$v/b1b_bs1.log" | head -2
done
for d in "$OUT"/trace_*; do
  echo "== $(basename "$d"): first kernels of the last graph replay (start, end us)"
  python3 scripts/device/replay_head.py "$d/trace_bs1.csv"
done
for round in 1 2; do
  for spec in "1 0" "1 8" "1,8 0"; do
    set -- $spec
    timeout 60 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
      --load-format dummy --batch-size "$1" --cuda-graph-max-bs "$2" --input-len 256 --output-len 32 \
      > "$OUT/probe_${1/,/_}_$2_$round.log" 2>&1
    echo "== round $round batch $1 max-bs $2 rc=$?"; grep -E "Decode\.  median" "$OUT/probe_${1/,/_}_$2_$round.log"
  done
done
