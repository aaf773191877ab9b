#!/usr/bin/env bash
# Session 38, fourth call (~330 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so from the working tree):
# the FP8 MoE walk in three stages at one row an expert (opt-in DSERVE_MOE_FP8_PIPE3=1): two tiles in flight per CTA
# while it computes a third, one activation row staged. (1) MoeFp8Test.SmallMColumnTilesAgree (the three-stage walk
# bit for bit against the one-round kernel at one row, settled and not, every column-tile choice; MOEFP8WALK /
# MOEFP8WALK3 timings alone) and memcheck on it; (2) A/B FP8 three rounds b1 / b8: new (two stages), p3, p3 + the
# shared experts' L2 prefetch (24 MB); (3) V3-shaped FP8 5 layers new / p3 (only its down walk qualifies: K 2048);
# (4) one FP8 layer's timeline with p3.
# Prediction: the V2-Lite gate|up walk 12.9 -> ~9 us after the routing, the down walk ~9 -> ~6: FP8 b1 -8 to -12%;
# b8 unchanged (8 rows an expert: not taken).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run walk3 150 'MoeFp8Test.SmallMColumnTilesAgree'
grep -E "MOEFP8WALK|Failure|FAILED|differs" "$OUT/walk3.log" | head -40
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 200 "$CS" --tool memcheck "$B/ds_ops_cuda_gpu_test" \
  --gtest_filter='MoeFp8Test.SmallMColumnTilesAgree' > "$OUT/memcheck.log" 2>&1
echo "== memcheck rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/memcheck.log" | tr '\n' ' ')"
AB_KINDS=fp8 AB_ROUNDS=3 AB_BINS="new p3 p3pf" AB_CFG_p3=DSERVE_MOE_FP8_PIPE3=1 \
  AB_CFG_p3pf=DSERVE_MOE_FP8_PIPE3=1,DSERVE_L2_PREFETCH_MB=24 bash "$D/abbin.sh"
v3_config "$OUT/v3l5fp8.json" 5
AB_MODEL="$OUT/v3l5fp8.json" AB_KINDS=bf16 AB_ROUNDS=1 AB_BINS="new p3" AB_CFG_p3=DSERVE_MOE_FP8_PIPE3=1 \
  bash "$D/abbin.sh"
DSERVE_MOE_FP8_PIPE3=1 OUT=$OUT/trace_fp8_p3 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" \
  TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" bash "$D/trace.sh" | sed -n '/^timeline/,$p'
