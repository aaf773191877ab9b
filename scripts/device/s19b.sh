#!/usr/bin/env bash
# Session 19's second call: batch-1 bf16 decode with more runs (main 91504e5 / the MoE sum in the norm / the same
# binary with DSERVE_MOE_NORM_FUSED=0, four runs each, alternating); FP8 batch 1 / 8 with and without
# DSERVE_FP8_FUSED_NORM=1 (the norm also writes the FP8 activations; re-measured now that the MoE sum sits in the
# norm); then a CUPTI trace of batch 1 (graph span vs launch-to-next-launch: the step's time outside the graph).
set -u
source "$(dirname "$0")/lib.sh"
printf '#!/bin/sh\nDSERVE_MOE_NORM_FUSED=0 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_nofuse"
printf '#!/bin/sh\nDSERVE_FP8_FUSED_NORM=1 exec "$(dirname "$0")/dserve" "$@"\n' > "$B/dserve_fp8norm"
chmod +x "$B/dserve_nofuse" "$B/dserve_fp8norm"
AB_BATCHES=1 AB_REPS=4 AB_BINS="dserve_main dserve dserve_nofuse" bash "$(dirname "$0")/abbin.sh"
AB_BATCHES=1,8 AB_REPS=2 AB_BINS="dserve dserve_fp8norm" AB_EXTRA="--quantization fp8" bash "$(dirname "$0")/abbin.sh"
TRACE_BS=1 bash "$(dirname "$0")/trace.sh"
