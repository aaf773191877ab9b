#!/usr/bin/env bash
# Prepared in session 56 for the next session's first call (binaries dserve, ds_ops_cuda_gpu_test,
# libds_cupti_trace.so; ~340 s): the GPU suite (session 56's last commits refactored two GPU test files after its last
# device call), where the batch-64 step goes now, and why the cover mode's kernel win vanishes in the model. (0) The
# GPU suite (217 tests). (1) A CUPTI trace of V2-Lite FP8 batch 64 on the defaults (session 56's router GEMM,
# session 55's pair): the per-kernel time from the previous kernel's end, for the routing / grouping / absorb-BMM /
# store-latent launches that remain on the critical path.
# (2) The V3-shaped 3-layer model FP8 at batch 32, default vs DSERVE_FP8_WGMMA_COVER=8: the clustered wgmma launches'
# start delays against the cuBLASLt ones they replace (trace_summary's gap lines).
# Session 57 (no device lent) added to the suite: SpeculativeGpu.* (MTP speculative decoding on CUDA against the CPU
# engine, v3 and v3_fp8; the engine refuses CUDA speculative decoding until it passes: then drop the
# DSERVE_SPECULATIVE_CUDA gate in runner/batch_engine.cpp), and the PaddedCheck refactor still unrun. If it fails,
# `gtest_run spec 200 'Fixtures/SpeculativeGpu*'` alone gives its log.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=150 bash "$D/gpusuite.sh"
bash "$D/s58c.sh"  # the traces (moved there in session 58)
