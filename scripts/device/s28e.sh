#!/usr/bin/env bash
# Session 28, last call: stream priorities (DSERVE_STREAM_PRIORITY=1: main stream = routed experts' chain first,
# 2: side stream = shared expert first; graphs keep their nodes' priorities), an A/B against the default:
# bench-one-batch V2-Lite FP8 (base, 1, 2) and bf16 (base, 1), batch 1 and 8; the graph tests with 1.
set -u
source "$(dirname "$0")/lib.sh"
AB_EXTRA="--quantization fp8" AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_STREAM_PRIORITY=1 DSERVE_STREAM_PRIORITY=2" \
  OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
AB_BATCHES=1,8 AB_CONFIGS="base DSERVE_STREAM_PRIORITY=1" OUT=$OUT/ab bash "$(dirname "$0")/ab.sh" | grep -E "^==|Decode\.  median"
DSERVE_STREAM_PRIORITY=1 GTEST_FILTER='*CudaGraph*' SUITE_LIMIT=60 OUT=$OUT/graphs timeout 70 bash "$(dirname "$0")/gpusuite.sh"
