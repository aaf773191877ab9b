#!/usr/bin/env bash
# Session 37, sixth call (~150 s; binaries dserve, ds_ops_cuda_gpu_test): the plain launchers (25 <<<>>> launches in
# kernels/*.cu) now launch through launch_plain (cudaLaunchKernelEx, its own error) instead of returning
# cudaGetLastError(): (1) the new test Pdl.PlainLaunchersReportTheirOwnErrors, (2) the whole GPU suite, (3) one
# bench-one-batch round FP8 / bf16 batch 1 / 8 (the greedy sampler is one of them).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run plain 60 'Pdl.*'
grep -E "Failure|Expected|Which is" "$OUT/plain.log" | head -6
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
AB_ROUNDS=1 AB_BINS="new" bash "$D/abbin.sh"
