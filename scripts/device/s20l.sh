#!/usr/bin/env bash
# Session 20's last call: the whole GPU suite on main 9cd9e71, memcheck on the FP8 quantization / GEMM tests.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite bash "$(dirname "$0")/gpusuite.sh"
OUT=$OUT/memcheck SKIP_PLAIN=1 MEMCHECK=1 MEMCHECK_LIMIT=150 GTEST_FILTER='Fp8GemmGpu.*' bash "$(dirname "$0")/gpusuite.sh"
