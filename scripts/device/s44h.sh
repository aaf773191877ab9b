#!/usr/bin/env bash
# Run record: the switch was in this call's binary only and is not in the tree (a tie; BENCHMARKS Session 44).
# Run record (session 44, eighth call, ~100 s; binary dserve with DSERVE_SMALL_M_CAP_MB, an experiment switch): the
# V2-Lite lm_head (419 MB, M = 1) on the small-M kernel (PDL, a weight round before its wait) instead of cuBLASLt
# (110.6 us in s43b's bf16 trace, 0.90 of copy). A/B two rounds, batch 1, bf16 and FP8 (the lm_head is bf16 in both).
set -u
source "$(dirname "$0")/lib.sh"
AB_BATCHES=1 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new cap" AB_CFG_cap=DSERVE_SMALL_M_CAP_MB=512 \
  bash "$(dirname "$0")/abbin.sh"
