#!/usr/bin/env bash
# Session 38, spare device time (~60 s, run twice: the naive probe, then a producer warp + one block in flight; binary
# dserve_kernel_bench from the working tree): the FP8 weight stream on
# native wgmma e4m3 (kernels/fp8_wgmma_probe.cu, bench-only): a step's routed gate|up bytes (V2-Lite 34.6 MB, V3
# 235 MB) as TMA boxes through 2 / 4 / 8 stages per CTA into wgmma m64n8k32 e4m3, checked against a host product
# (max_rel ~1e-6 = layouts right) and timed against the read probe of the same bytes after its wait. The question
# before rewriting the FP8 walks on wgmma: does such a stream reach the read floor (V2-Lite 34.6 MB: 9.0 us; today's
# gate|up walk 12.9 us in the chain, 11.8 alone)?
set -u
source "$(dirname "$0")/lib.sh"
timeout 150 "$B/dserve_kernel_bench" --filter 'fp8_wgmma|weight_read v2-lite routed|weight_read v3 routed' \
  --csv "$OUT/wgmma.csv" > "$OUT/wgmma.log" 2>&1
echo "== kernel bench rc=$?"; grep -E "fp8_wgmma|weight_read|ceiling|copy|rror" "$OUT/wgmma.log" | cut -c1-230 | head -30
