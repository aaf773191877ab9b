#!/usr/bin/env bash
# Session 12's last call: bench-one-batch V2-Lite dummy (input 256 / output 32, graphs) at batch 1 / 8 / 64 / 256,
# bf16 and --quantization fp8, on the final binaries (the whole GPU suite runs beside it in all.sh).
set -u
source "$(dirname "$0")/lib.sh"
for extra in "" "--quantization fp8"; do
  B1B_EXTRA="$extra" bash "$(dirname "$0")/b1b.sh"
done
