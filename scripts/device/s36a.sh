#!/usr/bin/env bash
# Prepared in session 35 for session 36's first call (~260 s; binaries dserve, ds_ops_cuda_gpu_test from main, and
# prev/dserve = 33110f4). Checks session 35's device-unverified host changes: the faster e4m3 encoding (8618a2a:
# same bits by an exhaustive CPU check) and prepare_fp8_weight's unpadded upload (50cc7ae). (1) The whole GPU suite
# (FP8 GEMM / MoE / fixture tests load FP8 weights through the changed paths). (2) V2-Lite --quantization fp8
# bench-one-batch, main vs 33110f4, one round each: the decode lines must agree within noise (same weights, same
# kernels) and each run's wall time, printed by ab.sh as "(N s)", should drop from ~40 s (session 35: 36-46 s).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_KINDS=fp8 AB_ROUNDS=1 AB_BINS="prev new" bash "$D/abbin.sh"
