#!/usr/bin/env bash
# Makes the v3_fp8_h256 fixture (FP8 with 128-multiple MLP dims) with transformers on the device machine, then
# scores it (and v3_fp8) natively in FP8 on CUDA against the CPU W8A8 emulation and the transformers reference
# (Fp8FixtureGpu). The fixture comes back as $OUT/v3_fp8_h256.tar.gz. Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
timeout 400 python3 scripts/make_fixtures.py --out tests/fixtures --only v3_fp8_h256 --summary "$OUT/summary.json" \
  > "$OUT/gen.log" 2>&1
echo "== make_fixtures rc=$?"; grep -vE "^\s*$" "$OUT/gen.log" | tail -22
tar -C tests/fixtures -czf "$OUT/v3_fp8_h256.tar.gz" v3_fp8_h256
timeout 200 stdbuf -oL "$B/ds_ops_cuda_gpu_test" --gtest_filter='*Fp8FixtureGpu*' > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "FP8FIXTURE|^\[  (PASSED|FAILED)|FAILED  \]|Failure" "$OUT/tests.log" | head -30
for f in v3_fp8_h256; do
  for n in 0 1; do
    DSERVE_FP8_NATIVE=$n timeout 60 "$B/dserve" score --device cuda --model-path tests/fixtures/$f \
      --input-ids 3,17,42,99,5 --top-logprobs 1 > "$OUT/score_${f}_${n}.log" 2>&1
    echo "== score $f native=$n rc=$?"; tail -2 "$OUT/score_${f}_${n}.log"
  done
done
