#!/usr/bin/env bash
# Session 20's third call: the whole GPU suite with the small-M MoE kernels' shared block-to-expert code
# (kernels/moe_block.cuh) and combine_vc counting each token's non-empty splits from the step's positions; memcheck
# on the changed kernels' tests; bench-one-batch bf16 batch 1 / 2 / 4 / 8 alternating 7151a28 (dserve_base), the new
# binary, and the new binary under the server's split plan (DSERVE_GRAPH_PLAN_CONTEXT=4096) with and without the
# count (DSERVE_MLA_COMBINE_COUNT=0); FP8 batch 1 / 8 / 64 base vs new (the MoE kernels' registers changed).
set -u
source "$(dirname "$0")/lib.sh"
printf '#!/bin/sh\nDSERVE_GRAPH_PLAN_CONTEXT=4096 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_p4096"
printf '#!/bin/sh\nDSERVE_GRAPH_PLAN_CONTEXT=4096 DSERVE_MLA_COMBINE_COUNT=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_p4096_nocount"
chmod +x "$B"/dserve_*
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
OUT=$OUT/memcheck SKIP_PLAIN=1 MEMCHECK=1 MEMCHECK_LIMIT=200 \
  GTEST_FILTER='MlaAbsorbedVc.*:SampleGpu.Greedy*:MoeFp8Test.MatchesCpu*:MoeGroupedTest.RoutePermuteMatchesCpu:FastKernelsTest.Moe*' \
  bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=1,2,4,8 AB_REPS=2 AB_BINS="dserve_base dserve dserve_p4096 dserve_p4096_nocount" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64 AB_REPS=2 AB_BINS="dserve_base dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
