#!/usr/bin/env bash
# Session 25, first call: the FP8 batch-1 CUPTI trace (per-kernel table, for planning) of main 732dbea's binaries.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/fp8 TRACE_BS=1 TRACE_EXTRA="--quantization fp8" bash "$(dirname "$0")/trace.sh"
