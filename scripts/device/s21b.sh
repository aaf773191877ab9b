#!/usr/bin/env bash
# Session 21, call 2: MLA decode at batch 1 x 32K (issue 6) under experiment switches: the t16 kernel's TMA box rows
# (DSERVE_MLA_T16_BOX), tiles issued before the PDL wait (DSERVE_MLA_T16_EARLY), the tensor map's L2 promotion
# (DSERVE_MLA_L2PROMO), the combine kernel triggering its dependents at entry (DSERVE_MLA_COMBINE_EARLY): the
# timeline (dserve_mla_trace) and dserve_mla_bench for each; the t16 GPU tests under the non-default switches.
set -u
source "$(dirname "$0")/lib.sh"
for cfg in base DSERVE_MLA_T16_BOX=16 DSERVE_MLA_T16_BOX=8 DSERVE_MLA_T16_EARLY=1 DSERVE_MLA_T16_EARLY=0 \
           DSERVE_MLA_L2PROMO=128 DSERVE_MLA_L2PROMO=0 DSERVE_MLA_COMBINE_EARLY=1 \
           "DSERVE_MLA_COMBINE_EARLY=1 DSERVE_MLA_T16_BOX=8" "DSERVE_MLA_COMBINE_EARLY=1 DSERVE_MLA_T16_EARLY=1"; do
  envs=(); [ "$cfg" = base ] || envs=($cfg)
  tag=${cfg//[^A-Za-z0-9]/_}
  echo "######## $cfg"
  env "${envs[@]}" timeout 60 "$B/dserve_mla_trace" > "$OUT/trace_$tag.log" 2>&1
  echo "== trace rc=$?"; grep -vE "^ *[0-9]+ \|" "$OUT/trace_$tag.log" | grep -vE "^launch"
  env "${envs[@]}" MLA_BENCH_SHAPES=1x32768x16,1x16384x16,64x4096x16 MLA_BENCH_ALT=0 timeout 100 "$B/dserve_mla_bench" "$OUT/mla_$tag.csv" > "$OUT/mla_$tag.log" 2>&1
  echo "== mla_bench rc=$?"; grep -E "^mla_decode" "$OUT/mla_$tag.log" | sed -E 's/; naive.*//'
done
for cfg in "DSERVE_MLA_T16_BOX=8 DSERVE_MLA_T16_EARLY=1" "DSERVE_MLA_T16_BOX=16 DSERVE_MLA_COMBINE_EARLY=1"; do
  env $cfg timeout 120 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*MlaAbsorbed*:*MlaDecode*' > "$OUT/tests_${cfg//[^A-Za-z0-9]/_}.log" 2>&1
  echo "== tests [$cfg] rc=$?"; grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$OUT/tests_${cfg//[^A-Za-z0-9]/_}.log" | tail -5
done
