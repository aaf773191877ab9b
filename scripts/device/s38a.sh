#!/usr/bin/env bash
# Prepared in session 37 for session 38's first call (~330 s; binaries dserve, ds_ops_cuda_gpu_test from main; a
# baseline as prev/dserve: b3b5d10's binary, the evict-first hint on every decode weight stream, which s37g measured).
# (1) the graph tests with the arena's L2 window (CudaGraphTest.ReplayMatchesEagerDecode captures batch 3 with
# DSERVE_L2_PERSIST_ARENA=1 and asserts every kernel node got it), the whole GPU suite; (2) A/B, three rounds, FP8 and
# bf16, batch 1 / 8: prev (b3b5d10: hint on bf16 too) vs new (main: hint on FP8 only) vs l2 (main + the persisting
# L2 window over the graph arena's activations, DSERVE_L2_PERSIST_ARENA=1); (3) the V3-shaped FP8 model, one round.
# (4) dserve_kernel_bench's grid_barrier cases (binary dserve_kernel_bench): a grid barrier inside one persistent
# launch against today's launch handoff, per phase of 0-35 MB of weight reads (the first question of a one-launch
# decode layer), next to the weight_read floors.
# Predictions: new = prev at FP8, new <= prev at bf16; l2 -0.5 to -2% if the chain's reads of the residual stream and
# the shared expert's output still miss the L2, nothing if the evict-first hint already keeps them; a barrier of
# 1-2 us under streaming against a 3-5 us handoff would make the persistent layer worth building.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
grep -h "GRAPHSTATS" "$OUT"/ds_ops_cuda_gpu_test*.log | head -8
BINS="new l2"; [ -x "$B/prev/dserve" ] && BINS="prev new l2"  # prev only when carried
AB_ROUNDS=3 AB_BINS="$BINS" AB_CFG_l2=DSERVE_L2_PERSIST_ARENA=1 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BATCHES=1,8 AB_BINS="new l2" \
  AB_CFG_l2=DSERVE_L2_PERSIST_ARENA=1 bash "$D/abbin.sh"
[ -x "$B/dserve_kernel_bench" ] || echo "== no $B/dserve_kernel_bench"
timeout 120 "$B/dserve_kernel_bench" --filter 'grid_barrier|weight_read' --csv "$OUT/barrier.csv" > "$OUT/barrier.log" 2>&1
echo "== kernel bench rc=$?"; grep -E "grid_barrier|weight_read.*(pair|routed)|ceiling|copy" "$OUT/barrier.log" | cut -c1-200 | head -30
