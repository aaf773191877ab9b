#!/usr/bin/env bash
# Session 19's last call (final code: the MoE sum in the norm, FP8 slot records, one-round combine_vc merges for
# 2-4 tokens; the early-new-rows experiment reverted): the MLA and PDL tests, then bench-one-batch batch 1 / 2 / 4
# / 8 / 64 / 256 alternating main 91504e5 (dserve_main) and the final binary (three runs each), FP8 batch 1 / 8 / 64
# once with the final binary.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite GTEST_FILTER='Mla*:*/Mla*:Pdl*:RmsNorm*' bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=1,2,4,8,64,256 AB_REPS=3 AB_BINS="dserve_main dserve" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64 AB_REPS=1 AB_BINS="dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
