#!/usr/bin/env bash
# Session 36 (~180 s; binaries dserve, ds_ops_cuda_gpu_test, libds_cupti_trace.so from main). s36c measured the FP8
# gate|up walk's last-CTA quantization losing 0.3 ms a step at batch 1 (2.11-2.12 vs 1.81-1.82 ms without): the down
# walk, no longer behind a quant_act launch, was let in at the gate|up walk's entry and its CTAs' pre-wait weight
# loads competed with the gate|up stream (lesson 8). Now the walk lets it in after its tiles. (1) The MoE FP8 tests;
# (2) FP8 A/B, three rounds alternating, batch 1 / 8: main vs DSERVE_MOE_FP8_WALK_QUANT=0; (3) one layer's timeline
# at FP8 batch 1 on the defaults (CUPTI).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_TEST_NO_TIMING=1 gtest_run kernel_tests 120 'MoeFp8Test.*:MlaAbsorbedVc.*'
AB_KINDS=fp8 AB_ROUNDS=3 AB_BATCHES=1,8 AB_BINS="new wq0" AB_CFG_wq0=DSERVE_MOE_FP8_WALK_QUANT=0 bash "$D/abbin.sh"
OUT=$OUT/trace_fp8_1 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" \
  bash "$D/trace.sh" | sed -n '/^timeline/,$p'
