#!/usr/bin/env bash
# Session 65 (run as its last call, s65g): ncu source pages (warp-state samples per SASS instruction) of every
# kernel of one V2-Lite FP8 batch-1 decode step's first layers (eager, inside bench-one-batch's "decode/" NVTX range),
# to look for code-generation defects like the MHA prefill's (session 65: 41% of its samples on branches ptxas put
# around code in an unrolled loop; fixed, +21%), summarized by scripts/ncu_source_top.py. Issue 7's batch-1 line
# (0.47 of the weight roofline) is spent in these kernels. Binaries: dserve (~150 s).
set -u
source "$(dirname "$0")/lib.sh"
ncu_decode_pages decode_fp8 --quantization fp8
