#!/usr/bin/env bash
# Session 41, second call (~70 s, right after s41a on the warm machine): CUPTI traces of bf16 and FP8 V2-Lite batch 1
# with the CSVs kept under $OUT (analysed here, not on the device: which kernel each MoE-summing norm and q / kv_a
# pair waits for, the side stream's shared expert against the routed walk).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
for kind in bf16 fp8; do
  extra=""; [ "$kind" = fp8 ] && extra="--quantization fp8"
  OUT=$OUT/trace_$kind TRACE_BS="1" TRACE_EXTRA="$extra" TRACE_SUMMARY_ARGS="--timeline mla_absorb_prep 12" \
    bash "$D/trace.sh" > "$OUT/trace_$kind.txt" 2>&1
  echo "== trace $kind"; sed -n "/^per decode step/,/total kernel time/p;/^timeline/,\$p" "$OUT/trace_$kind.txt"
  xz -9 "$OUT/trace_$kind/trace_bs1.csv"
done
