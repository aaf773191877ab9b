#!/usr/bin/env bash
# Session 37, last call (~330 s; binaries dserve, ds_ops_cuda_gpu_test, dserve_mla_bench from main with the t16
# half-tile change): (1) the whole GPU suite on the final kernels; (2) the split combine's early trigger (an H100
# choice, session 23) on the H200: dserve_mla_bench 1 x 32K / 8 x 4K / 64 x 4K, three rounds alternating, and
# bench-one-batch bf16 batch 16 / 32 (the batches whose decode runs that combine), two rounds; (3) issue 6's table:
# bf16 batch 1 / 8 / 64 / 256 with and without CUDA graphs, and FP8 batch 1 / 4 / 8 / 64.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=160 bash "$D/gpusuite.sh" | grep -E "^==|FAILED|PASSED|!!"
for r in 1 2 3; do
  for c in 1 0; do
    DSERVE_MLA_COMBINE_EARLY=$c MLA_BENCH_SHAPES=1x32768x16,8x4096x16,64x4096x16 MLA_BENCH_ALT=0 \
      timeout 45 "$B/dserve_mla_bench" > "$OUT/mla_r${r}_c$c.log" 2>&1
    echo "== mla_bench round $r, combine early $c rc=$?"
    grep -E "^mla_decode" "$OUT/mla_r${r}_c$c.log" | sed -E 's/; naive.*//; s/mla_decode kv=bf16 //' | cut -c1-160
  done
done
for r in 1 2; do
  AB_BATCHES=16,32 AB_CONFIGS="base DSERVE_MLA_COMBINE_EARLY=0" OUT=$OUT/ce_$r bash "$D/ab.sh" | grep -E "^==|Decode"
done
B1B_BATCHES=1,8,64,256 OUT=$OUT/b1b_graphs bash "$D/b1b.sh" | grep -E "^==|Decode\.  median|Prefill"
B1B_BATCHES=1,8,64,256 B1B_EXTRA=--disable-cuda-graph OUT=$OUT/b1b_eager bash "$D/b1b.sh" | grep -E "^==|Decode\.  median"
B1B_BATCHES=1,4,8,64 B1B_EXTRA="--quantization fp8" OUT=$OUT/b1b_fp8 bash "$D/b1b.sh" | grep -E "^==|Decode\.  median|Prefill"
