#!/usr/bin/env bash
# Run record: ModelOptions::shared_issue_late / Ops::side_mark (DSERVE_SHARED_ISSUE_LATE) and its fixture test were in this call's binaries only (measured, not kept; BENCHMARKS.md, Session 46).
# Session 46, sixth call (~240 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so): (1) the whole GPU suite
# (new: FixtureGpuTest.SharedIssuedLateMatchesTheDefaultOrder); (2) the shared MLP forked before the routing but
# issued after it (DSERVE_SHARED_ISSUE_LATE=1: does the bf16 graph's second kernel still wait ~10 us?): a bf16 b1
# trace, bench-one-batch bf16 b1 / b8 two rounds; (3) this session's tree against its old host flow
# (DSERVE_BENCH_DEVICE_TOKENS=0, DSERVE_GRAPH_ONE_COPY=0), bf16 / FP8 b1 / b8 two rounds; graph timing.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -40
grep -h "shared MLP issued late" "$OUT"/*.log | head -8
DSERVE_SHARED_ISSUE_LATE=1 OUT=$OUT/trace_late TRACE_BS=1 TRACE_EXTRA="" TRACE_SUMMARY_ARGS="" bash "$D/trace.sh" | grep "^=="
python3 scripts/device/replay_head.py "$OUT/trace_late/trace_bs1.csv"
AB_BATCHES=1,8 AB_KINDS="bf16" AB_ROUNDS=2 AB_BINS="new late" AB_CFG_late=DSERVE_SHARED_ISSUE_LATE=1 bash "$D/abbin.sh"
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new old" \
  AB_CFG_old=DSERVE_BENCH_DEVICE_TOKENS=0,DSERVE_GRAPH_ONE_COPY=0 bash "$D/abbin.sh"
DSERVE_GRAPH_TIMING=1 timeout 100 "$B/dserve" bench-one-batch --device cuda \
  --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size 1 --input-len 256 \
  --output-len 64 > "$OUT/timing.log" 2>&1
echo "== graph timing rc=$?"; grep -E "Decode\.  median|CUDA graph timing" "$OUT/timing.log"
