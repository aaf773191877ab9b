#!/usr/bin/env bash
# Shared-memory carveout A/B (DSERVE_SMEM_CARVEOUT=max: every launch_pdl kernel prefers the largest shared carveout,
# so an SM never reconfigures L1 / shared between consecutive kernels): dserve_mla_bench on a few 16-head cases,
# then bench-one-batch (V2-Lite dummy, bf16 and --quantization fp8) batch 1 / 8. Binaries: .devbin/. The switch
# measured slower (BENCHMARKS.md, session 12) and was removed; the script is the record of that run.
set -u
source "$(dirname "$0")/lib.sh"
for cfg in base DSERVE_SMEM_CARVEOUT=max; do
  envs=(); [ "$cfg" = base ] || envs=("$cfg")
  env "${envs[@]}" MLA_BENCH_SHAPES=1x32768x16,1x4096x16,64x4096x16,8x4096x16 MLA_BENCH_ALT=64 timeout 100 \
    "$B/dserve_mla_bench" "$OUT/mla_${cfg//[^A-Za-z0-9]/_}.csv" > "$OUT/mla_${cfg//[^A-Za-z0-9]/_}.log" 2>&1
  echo "== mla_bench $cfg rc=$?"; grep -E "^mla_decode|alt splits" "$OUT/mla_${cfg//[^A-Za-z0-9]/_}.log" | sed 's/naive.*//'
done
for extra in "" "--quantization fp8"; do
  AB_EXTRA="$extra" AB_CONFIGS="base DSERVE_SMEM_CARVEOUT=max base DSERVE_SMEM_CARVEOUT=max" bash "$(dirname "$0")/ab.sh"
done
