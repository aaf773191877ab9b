#!/usr/bin/env bash
# Session 31 (~400 s; binaries dserve, ds_ops_cuda_gpu_test, prev/dserve = main before the change): the norm weight
# and the latent row's slot / position / angles / norm weight read before the PDL wait (rms_norm.cu, mla_fused.cu).
# (1) The whole GPU suite. (2) bench-one-batch prev vs new, alternating, two rounds: FP8 batch 1 / 8, bf16 batch 1 / 8.
set -u
source "$(dirname "$0")/lib.sh"
bash "$(dirname "$0")/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
bash "$(dirname "$0")/abbin.sh"
