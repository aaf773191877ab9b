#!/usr/bin/env bash
# Session 33 (~380 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = main 21e6e56): both MoE walks stop at
# the first empty slot record (the slots with rows are a prefix; the FP8 walk stepped over the empty ones a record
# read at a time, and s33d/e's bf16 down walk lost at batch 8: 5.70 vs 5.58-5.64 ms). (1) The whole GPU suite with
# DSERVE_MOE_SMALL_WALK=1 (the bf16 down walk on everywhere; the walk tests force it on and off), its MOEWALK /
# MOEFP8WALK lines. (2) bf16 batch 1 / 8: prev, new (walk off), wd (=1); FP8: prev, new. Two rounds each.
set -u
source "$(dirname "$0")/lib.sh"
DSERVE_MOE_SMALL_WALK=1 SUITE_LIMIT=150 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
grep -rh "MOEWALK\|MOEFP8WALK" "$OUT" 2>/dev/null | sort | uniq | head -60
AB_KINDS=bf16 AB_BINS="prev new wd" AB_CFG_wd=DSERVE_MOE_SMALL_WALK=1 bash "$(dirname "$0")/abbin.sh"
AB_KINDS=fp8 AB_BINS="prev new" bash "$(dirname "$0")/abbin.sh"
