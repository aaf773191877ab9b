#!/usr/bin/env bash
# Session 33 (~330 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = main 21e6e56; the three-stage build is
# not in main: measured as a loss, BENCHMARKS "Session 33"): the FP8 MoE walk with
# three stages (DSERVE_MOE_FP8_PIPE=3: activations in registers, a stage = the 32 KB of weights; s33a's ncu: the
# two-stage walk alone streams 2.1-2.6 TB/s, long scoreboard leading). (1) The FP8 GPU tests (both walks bit for
# bit against the one-round kernel; MOEFP8WALK timing lines). (2) FP8 batch 1 / 8: prev, new (two stages), w3.
set -u
source "$(dirname "$0")/lib.sh"
GTEST_FILTER='*Fp8*:*fp8*:CudaGraph*' SUITE_LIMIT=120 bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
grep -rh "MOEFP8WALK\|MOEFP8TILES" "$OUT" 2>/dev/null | sort | uniq | head -60
AB_KINDS=fp8 AB_BINS="prev new w3" AB_CFG_w3=DSERVE_MOE_FP8_PIPE=3 bash "$(dirname "$0")/abbin.sh"
