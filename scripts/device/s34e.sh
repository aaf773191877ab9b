#!/usr/bin/env bash
# Session 34, last call (~420 s; binaries dserve, ds_ops_cuda_gpu_test): the whole GPU suite on the new defaults
# (the bf16 down walk at one token where tiles are few; FP8 one-token early PDL triggers; the new
# FixtureGpuTest.EarlyTriggersMatchTheDefaultSchedule), then the defaults against their off switches, two rounds
# alternating: FP8 new vs DSERVE_PDL_EARLY=0, bf16 new vs DSERVE_MOE_SMALL_WALK=0.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
grep -rh "early triggers" "$OUT" 2>/dev/null | sort | uniq
AB_KINDS=fp8 AB_BINS="new off" AB_CFG_off=DSERVE_PDL_EARLY=0 bash "$D/abbin.sh"
AB_KINDS=bf16 AB_BINS="new off" AB_CFG_off=DSERVE_MOE_SMALL_WALK=0 OUT=$OUT/bf16 bash "$D/abbin.sh"
