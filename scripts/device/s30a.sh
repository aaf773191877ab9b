#!/usr/bin/env bash
# (Run in session 30; the ready word lost and was removed afterwards: DSERVE_MOE_SLOT_READY no longer exists.)
# Prepared in session 29 for the next session's first call (~380 s; binaries dserve, ds_ops_cuda_gpu_test).
# (1) The whole GPU suite: session 29's last commits were compiled, not run: the FP8 decode norms quantize x at
# <= 8 rows only (MoeFp8Test.NormQuantizationFeedsTheFp8Ops checks rows 8 / 16) and the opt-in ready word
# (DSERVE_MOE_SLOT_READY=1, kernels/slot_ready.cuh; MoeFp8Test.SlotReadyWordMatchesThePlainWait). (2) The MoE,
# fixture and graph tests with DSERVE_MOE_SLOT_READY=1 forced. (3) bench-one-batch V2-Lite FP8 and bf16 batch 1 / 8,
# default vs DSERVE_MOE_SLOT_READY=1, two rounds alternating. If it wins and (1)-(2) pass, make it the default
# (cuda_ops.cpp slot_ready_). s30b.sh: the old switches on session 29's schedule and the new default's trace.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite timeout 200 bash "$(dirname "$0")/gpusuite.sh"
DSERVE_MOE_SLOT_READY=1 GTEST_FILTER='*Moe*:*Fixture*:*CudaGraph*' SUITE_LIMIT=160 OUT=$OUT/suite_ready \
  timeout 170 bash "$(dirname "$0")/gpusuite.sh"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 \
  AB_CONFIGS="base DSERVE_MOE_SLOT_READY=1 base DSERVE_MOE_SLOT_READY=1" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_MOE_SLOT_READY=1 base DSERVE_MOE_SLOT_READY=1" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
