#!/usr/bin/env bash
# Session 50, fourth call (binaries dserve, ds_ops_cuda_gpu_test, dserve_mla_bench, libds_cupti_trace.so): the MLA
# decode's transposed kernel at 8 query rows a block (twice the blocks, half the serial work each; DSERVE_MLA_T8=1
# where they fit one wave): its consistency cases (forced t16_rows = 8) and memcheck, the kernel alone at batch 1
# (288 / 1K / 4K context), T8 vs default alternating, a bf16 batch-1 trace with T8, then bench-one-batch A/B
# bf16 1,8 three rounds, FP8 two.
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
gtest_run mla 120 'MlaAbsorbedGpu.*:MlaDecodeT16.*:MlaAbsorbedVc.*:MlaDecodePlan.*'
DSERVE_MLA_T8=1 gtest_run rows_t8 30 'MlaDecodeT16.RowsABlock'
memcheck_run memcheck_mla 150 'MlaDecodeT16.*:MlaAbsorbedGpu.MatchesCpu/t16*:MlaAbsorbedGpu.MatchesCpu/lite_decode_b8'
for r in 1 2; do
  for t8 in 0 1; do
    DSERVE_MLA_T8=$t8 MLA_BENCH_SHAPES=1x288x16,1x1024x16,1x4096x16,4x288x16 MLA_BENCH_ALT=0 timeout 60 \
      "$B/dserve_mla_bench" > "$OUT/mla_t8_${t8}_$r.log" 2>&1
    echo "== T8=$t8: $(grep -E '^mla_decode' "$OUT/mla_t8_${t8}_$r.log" | sed -E 's/ = [0-9]+ GB.s.*//; s/mla_decode kv=bf16 //; s/heads=16 //' | tr '\n' ' ')"
  done
done
DSERVE_MLA_T8=1 OUT=$OUT/trace_t8 TRACE_BS=1 TRACE_EXTRA="" bash "$D/trace.sh" > /dev/null
python3 scripts/device/trace_layers.py t8 "$OUT/trace_t8/trace_bs1.csv" --replays 1 2>/dev/null | head -8
AB_BATCHES=1,8 AB_KINDS="bf16" AB_BINS="base t8" AB_CFG_t8=DSERVE_MLA_T8=1 AB_ROUNDS=3 bash "$D/abbin.sh"
AB_BATCHES=1,8 AB_KINDS="fp8" AB_BINS="base t8" AB_CFG_t8=DSERVE_MLA_T8=1 AB_ROUNDS=2 bash "$D/abbin.sh"
