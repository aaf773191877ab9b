#!/usr/bin/env bash
# Prepared in session 54 (no device lent) for after s54c (binaries ds_ops_cuda_gpu_test, dserve; ~330 s): the MLA
# decode's split count at batch 32-128 through the new A/B knob DSERVE_MLA_SPLITS=n (replaces the plan's count). At
# V2-Lite FP8 batch 64 (context ~288) the decode took 14.0 us a layer for ~5 us of cache at copy (session 53's trace:
# two splits of ~2.3 tiles a block, merged in-cluster). (1) The MLA and fixture cases with the count forced to 3.
# (2) bench-one-batch V2-Lite FP8 32 / 64 / 128: the plan vs 1 / 3 / 4 splits, alternating.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
DSERVE_MLA_SPLITS=3 gtest_run sp3 200 '*Mla*:*Fixture*'
grep -E "^\[  FAILED" "$OUT/sp3.log" | head
AB_BATCHES=32,64,128 AB_KINDS="fp8" AB_BINS="plan s1 s3 s4" AB_CFG_plan=base AB_CFG_s1=DSERVE_MLA_SPLITS=1 \
  AB_CFG_s3=DSERVE_MLA_SPLITS=3 AB_CFG_s4=DSERVE_MLA_SPLITS=4 AB_ROUNDS=2 OUT=$OUT/splits bash "$D/abbin.sh"
