#!/usr/bin/env bash
# GPU sampling + memory planning (issue 6 items 1 and 5), run from the repo root on the device machine with
# .devbin/{ds_ops_cuda_gpu_test,dserve}: the Ops::sample CUDA-vs-CPU consistency tests (plain and under
# compute-sanitizer memcheck), `dserve generate --device cuda` with sampling parameters on the v3 fixture,
# and bench-one-batch on the V2-Lite config (dummy weights) printing the memory plan lines.
# Logs under $OUT (sample_*.log); keeps going after a failure.
set -u
source "$(dirname "$0")/lib.sh"
T=$PWD/$B/ds_ops_cuda_gpu_test
D=$PWD/$B/dserve
start=$(date +%s)
timeout 90 "$T" --gtest_filter='SampleGpu.*' > "$OUT/sample_gpu_test.log" 2>&1
echo "== SampleGpu tests rc=$? ($(( $(date +%s) - start )) s)"
grep -E '^SAMPLE|FAILED|PASSED' "$OUT/sample_gpu_test.log" | head -30
start=$(date +%s)
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 100 "$SAN" --tool memcheck --leak-check no "$T" \
  --gtest_filter='SampleGpu.SmallVocab:SampleGpu.Ties:SampleGpu.NonFiniteRows:SampleGpu.ManyUniformsOneRow' \
  > "$OUT/sample_memcheck.log" 2>&1
echo "== memcheck rc=$? ($(( $(date +%s) - start )) s)"
grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/sample_memcheck.log" | head -10
start=$(date +%s)
{
  for args in "--temperature 0" "--temperature 0.8 --top-k 20 --top-p 0.9" "--temperature 1.0 --min-p 0.05" \
              "--temperature 0.7 --top-p 0.000001"; do
    for dev in cuda cpu; do
      echo "-- $dev $args"
      timeout 60 "$D" generate --device $dev --model-path tests/fixtures/v3 --input-ids 3,17,42,7,99 \
        --max-new-tokens 12 --seed 5 $args --json
      echo "rc=$?"
    done
  done
} > "$OUT/sample_generate.log" 2>&1
echo "== generate ($(( $(date +%s) - start )) s): greedy and top-p-tiny must be identical on cuda and cpu"
grep -E '^--|output_ids|rc=' "$OUT/sample_generate.log" | head -40
start=$(date +%s)
timeout 150 "$D" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy \
  --batch-size 1,64 --input-len 256 --output-len 8 > "$OUT/sample_bench.log" 2>&1
echo "== bench-one-batch rc=$? ($(( $(date +%s) - start )) s)"
grep -E 'Memory plan|KV Cache|Decode\.|Prefill|error' "$OUT/sample_bench.log" | head -12
timeout 40 "$D" bench-one-batch --device cuda --model-path tests/fixtures/v3 \
  --batch-size 1 --input-len 16 --output-len 2 --mem-fraction-static 0.001 > "$OUT/sample_bench_nofit.log" 2>&1
echo "== bench-one-batch --mem-fraction-static 0.001 rc=$? (expect rc 1 and 'does not fit ... GiB missing')"
tail -2 "$OUT/sample_bench_nofit.log"
