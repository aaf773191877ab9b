#!/usr/bin/env bash
# Session 19's third call: the whole GPU suite on the final kernels (MoE sum in the norm, FP8 slot records, one-round
# combine_vc merges for 2-4 tokens, the transposed MLA kernel's early tiles with new rows patched in), memcheck on
# the MLA tests, then bench-one-batch: batch 1 / 2 / 4 alternating main 91504e5 (dserve_main), the new binary and
# the new binary with DSERVE_MLA_EARLY_NEW=0 (three runs each); the table batch 1 / 8 / 64 / 256 (two runs each) and
# FP8 batch 1 / 8 / 64 (one run each), main vs new.
set -u
source "$(dirname "$0")/lib.sh"
printf '#!/bin/sh\nDSERVE_MLA_EARLY_NEW=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_noearly"
chmod +x "$B/dserve_noearly"
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
OUT=$OUT/memcheck SKIP_PLAIN=1 MEMCHECK=1 MEMCHECK_LIMIT=150 \
  GTEST_FILTER='MlaDecodeT16.*:MlaAbsorbedVc.*:Cases/MlaAbsorbedGpu.*:RmsNormMoeGpu.*' \
  bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=1,2,4 AB_REPS=3 AB_BINS="dserve_main dserve dserve_noearly" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64,256 AB_REPS=2 AB_BINS="dserve_main dserve" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64 AB_REPS=1 AB_BINS="dserve_main dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
