#!/usr/bin/env bash
# Session 20: issue 6's table on the final binary (d00c799): bench-one-batch bf16 batch 1 / 8 / 64 / 256 with CUDA
# graphs and with --disable-cuda-graph, and --quantization fp8 with graphs.
set -u
source "$(dirname "$0")/lib.sh"
AB_BATCHES=1,8,64,256 AB_REPS=1 AB_BINS="dserve" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64,256 AB_REPS=1 AB_BINS="dserve" AB_EXTRA="--disable-cuda-graph" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8,64,256 AB_REPS=1 AB_BINS="dserve" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
