#!/usr/bin/env bash
# Session 41, fourth call (~330 s): the one-row norms split over a thread-block cluster (RmsNormParams::ctas;
# DSERVE_NORM_CLUSTER for the MoE-summing norm, DSERVE_NORM_CLUSTER_PLAIN for the others), new this call. s41b/s41c
# traces: the MoE-summing norm (one CTA loading ~36 KB: six routed rows, the fp32 shared output, the residual) ends
# 3.2-3.8 us after the down walk, a plain norm (12 KB) 1.3 us after its GEMM. (1) the kernel test (bit for bit against
# one CTA) and memcheck; (2) A/B two rounds bf16 / FP8 b1 / b8: default, MoE norm on 4 / 8 CTAs, both kinds on 4;
# (3) a bf16 batch-1 trace with the MoE norm on 4; (4) the GPU suite with both switches at 4 (every norm path).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run normcl 120 'RmsNormClusterGpu.*:RmsNormMoeGpu.*:RmsNormQuantGpu.*'
grep -E "Failure|FAILED|error" "$OUT/normcl.log" | head -20
memcheck_run normcl_memcheck 120 'RmsNormClusterGpu.*'
AB_BATCHES=1,8 AB_KINDS="bf16 fp8" AB_ROUNDS=2 AB_BINS="new c4 c8 c4p4" AB_CFG_c4=DSERVE_NORM_CLUSTER=4 \
  AB_CFG_c8=DSERVE_NORM_CLUSTER=8 AB_CFG_c4p4=DSERVE_NORM_CLUSTER=4,DSERVE_NORM_CLUSTER_PLAIN=4 bash "$D/abbin.sh"
DSERVE_NORM_CLUSTER=4 OUT=$OUT/trace_c4 TRACE_BS="1" TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" \
  bash "$D/trace.sh" > "$OUT/trace_c4.txt" 2>&1
echo "== trace c4 bf16"; sed -n "/^timeline/,\$p" "$OUT/trace_c4.txt"
xz -9 "$OUT/trace_c4/trace_bs1.csv"
DSERVE_NORM_CLUSTER=4 DSERVE_NORM_CLUSTER_PLAIN=4 SUITE_LIMIT=170 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
