#!/usr/bin/env bash
# Session 68 (after all.sh gpusuite, which runs every GPU case once): session 67's last commit (Fp8Gemm::update
# without a stream wait per weight) and return_hidden_states through the CUDA graphs under compute-sanitizer
# memcheck; then the MLA decode kernel alone on the H100 at issue 6's two shapes (no H100 figure since session 25).
# Binaries: ds_ops_cuda_gpu_test, dserve_mla_bench (~250 s).
set -u
source "$(dirname "$0")/lib.sh"
memcheck_run mc_update 300 'Fixtures/CudaWeightUpdate.*:CudaGraphHidden.*'
grep -hE "^GRAPH hidden" "$OUT/mc_update.log" | head -2
for round in 1 2; do
  MLA_BENCH_SHAPES=1x32768x16,64x4096x16 timeout 120 "$B/dserve_mla_bench" "$OUT/mla_$round.csv" > "$OUT/mla_$round.log" 2>&1
  echo "== mla round $round rc=$?"; grep -E "^mla_decode|splits=" "$OUT/mla_$round.log" | head -8
done
