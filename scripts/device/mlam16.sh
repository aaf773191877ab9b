#!/usr/bin/env bash
# The M = 16 MLA decode kernel's dispatch (issue 6): MLA / fixture / graph GPU tests, then with
# DSERVE_MLA_M16 unset (by units per split) and =0 (wgmma kernel only): bench-one-batch batch 1 / 8 and the
# server at concurrency 1 (its graphs plan for 4096 tokens: batch 1 takes the new kernel). Binaries: .devbin/.
set -u
source "$(dirname "$0")/lib.sh"
timeout 150 "$B/ds_ops_cuda_gpu_test" --gtest_filter='*MlaAbsorbed*:*Fixture*:*CudaGraph*:MlaDecodePlan*' > "$OUT/tests.log" 2>&1
echo "== tests rc=$?"; grep -E "PASSED|FAILED" "$OUT/tests.log" | tail -5
for v in auto 0; do
  env DSERVE_MLA_M16=$([ $v = auto ] && echo "" || echo $v) timeout 100 "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size 1,8 --input-len 256 \
    --output-len 32 > "$OUT/b$v.log" 2>&1
  echo "== b1b m16=$v rc=$?"; grep -E "median" "$OUT/b$v.log"
  env DSERVE_MLA_M16=$([ $v = auto ] && echo "" || echo $v) "$B/dserve" serve --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --skip-tokenizer-init --port 31000 \
    --max-running-requests 64 --max-total-tokens 200000 > "$OUT/serve$v.log" 2>&1 &
  pid=$!
  for i in $(seq 300); do grep -q "ready on" "$OUT/serve$v.log" && break; kill -0 $pid 2>/dev/null || break; sleep 1; done
  timeout 100 "$B/dserve" bench-serving --backend sglang --port 31000 --dataset-name random-ids \
    --random-ids-vocab-size 100000 --random-input-len 1024 --random-output-len 256 --random-range-ratio 1.0 \
    --num-prompts 4 --request-rate inf --max-concurrency 1 --seed 1 --disable-tqdm 2>&1 |
    grep -E "Output token throughput|Median ITL"
  kill $pid; wait $pid
done
