#!/usr/bin/env bash
# Session 17's last call (main's binaries): bench-one-batch V2-Lite dummy (input 256 / output 32) at batch 1 / 8 /
# 64 / 256, bf16 and --quantization fp8 (graphs), then the register routing off vs on at batch 1 / 8.
set -u
source "$(dirname "$0")/lib.sh"
for extra in "" "--quantization fp8"; do
  B1B_EXTRA="$extra" bash "$(dirname "$0")/b1b.sh"
  cp "$OUT/b1b.log" "$OUT/b1b_$(echo "x$extra" | tr -c 'A-Za-z0-9_\n' '_').log"
done
AB_BATCHES=1,8 AB_CONFIGS="DSERVE_MOE_ROUTE_FAST=0 base" bash "$(dirname "$0")/ab.sh"
