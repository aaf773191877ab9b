#!/usr/bin/env bash
# Session 33 (~400 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = main 21e6e56; the ticketed build is not
# in main: measured as a loss, BENCHMARKS "Session 33"): the FP8 MoE walk with
# tile tickets (DSERVE_MOE_FP8_WALK_DYN=1: past its first tile a CTA takes the next free one, so a CTA made resident
# late, behind a side-stream kernel, does less instead of ending the launch late). (1) The FP8 GPU tests (both
# walks bit for bit against the one-round kernel, tickets reset; MOEFP8WALK timing lines). (2) FP8 batch 1 / 8:
# prev, new (static walk), dyn, and dyn with the shared MLP forked before the routing (DSERVE_SHARED_AFTER_ROUTE=0,
# which lost 12% with the static walk in s32a).
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='*Fp8*:*fp8*:CudaGraph*' SUITE_LIMIT=120 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
grep -rh "MOEFP8WALK" "$OUT" 2>/dev/null | sort | uniq | head -60
AB_KINDS=fp8 AB_BINS="prev new dyn dynbr" AB_CFG_dyn=DSERVE_MOE_FP8_WALK_DYN=1 \
  AB_CFG_dynbr=DSERVE_MOE_FP8_WALK_DYN=1,DSERVE_SHARED_AFTER_ROUTE=0 bash "$(dirname "$0")/abbin.sh"
