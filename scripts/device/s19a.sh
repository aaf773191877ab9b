#!/usr/bin/env bash
# Session 19's first call: the whole GPU suite on main + the FP8 small-M slot records + the MoE combine summed in the
# next norm (it also covers session 18's two review mends, not run on a GPU then); memcheck on the changed
# kernels' tests (4 shards); bench-one-batch bf16 batch 1 / 8 / 64 / 256 alternating main 91504e5 (dserve_main),
# the new binary (dserve) and the new binary with DSERVE_MOE_NORM_FUSED=0 (dserve_nofuse, a wrapper); FP8 batch
# 1 / 8 / 64 the same three.
set -u
source "$(dirname "$0")/lib.sh"
printf '#!/bin/sh\nDSERVE_MOE_NORM_FUSED=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_nofuse"
chmod +x "$B/dserve_nofuse"
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
OUT=$OUT/memcheck SKIP_PLAIN=1 MEMCHECK=1 MEMCHECK_LIMIT=150 \
  GTEST_FILTER='RmsNormMoeGpu.*:MoeFp8Test.OpenMoe*:MoeFp8Test.MatchesCpu*:MlaAbsorbedVc.*:MoeGroupedTest.RoutePermuteMatchesCpu' \
  bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=1,8,64,256 AB_REPS=2 AB_BINS="dserve_main dserve dserve_nofuse" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64 AB_REPS=1 AB_BINS="dserve_main dserve dserve_nofuse" AB_EXTRA="--quantization fp8" \
  bash "$(dirname "$0")/abbin.sh"
