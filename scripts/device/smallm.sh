#!/usr/bin/env bash
# Decode-sized GEMMs (issue 6, batch-1 decode): dserve_kernel_bench's linear rows at M = 1 / 8, the per-head
# bmm_heads rows and the MoE layer at 1 / 8 tokens, first with the small-M kernels (default), then with every
# bf16 GEMM on cuBLASLt (DSERVE_SMALL_M_GEMM=0) and the pipelined MoE kernel (DSERVE_MOE_SMALL_M=0).
# Binary: .devbin/dserve_kernel_bench. Logs: $OUT/smallm_{on,off}.log.
set -u
source "$(dirname "$0")/lib.sh"
F=${SMALLM_FILTER:-"M=1 |M=8 |bmm_heads|moe_layer v2-lite tokens=1 |moe_layer v2-lite tokens=8 |moe_layer v3 tokens=1 |moe_layer v3 tokens=8 "}
for mode in ${SMALLM_MODES:-on off}; do
  start=$(date +%s)
  if [ $mode = on ]; then
    timeout 100 "$B/dserve_kernel_bench" --filter "$F" > "$OUT/smallm_$mode.log" 2>&1
  else
    DSERVE_SMALL_M_GEMM=0 DSERVE_MOE_SMALL_M=0 timeout 100 "$B/dserve_kernel_bench" --filter "$F" > "$OUT/smallm_$mode.log" 2>&1
  fi
  echo "== $mode rc=$? ($(( $(date +%s) - start )) s)"
  grep -vE "^ceiling" "$OUT/smallm_$mode.log" | cut -c1-200
done
