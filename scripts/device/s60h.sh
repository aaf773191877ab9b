#!/usr/bin/env bash
# Session 60: V3.2 on an FP8 latent cache - the top-k gathered rows dequantised by the wgmma decode kernel (was the
# reference kernel). The FP8 MLA cases (new: v3_topk, v3_long_topk with forced splits), the bf16 top-k cases,
# memcheck on the FP8 top-k cases, then V3.2 4 layers at batch 1 x 32K / 16 x 4K with --kv-cache-dtype fp8_e4m3.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run mla 200 '*MlaAbsorbedFp8Gpu*:*MlaAbsorbedGpu*topk*'
grep -E "FAILED|Failure" "$OUT/mla.log" | head -20
memcheck_run mla_mc 150 '*MlaAbsorbedFp8Gpu*topk*'
v32_config "$OUT/v32.json" 4
for spec in "1 32768" "16 4096"; do
  set -- $spec
  timeout 120 $B/dserve bench-one-batch --device cuda --model-path "$OUT/v32.json" --load-format dummy \
    --output-len 16 --batch-size $1 --input-len $2 --kv-cache-dtype fp8_e4m3 > "$OUT/v32_fp8kv_b$1_$2.log" 2>&1
  echo "== v32 fp8 kv batch $1 input $2 rc=$? $(grep -E 'Prefill\. latency|Decode\.  median' "$OUT/v32_fp8kv_b$1_$2.log" | sed 's/.*latency: //' | tr '\n' ' ')"
done
timeout 120 $B/dserve bench-one-batch --device cuda --model-path "$OUT/v32.json" --load-format dummy \
  --output-len 16 --batch-size 1 --input-len 32768 > "$OUT/v32_bf16kv_b1_32768.log" 2>&1
echo "== v32 bf16 kv batch 1 input 32768 rc=$? $(grep -E 'Prefill\. latency|Decode\.  median' "$OUT/v32_bf16kv_b1_32768.log" | sed 's/.*latency: //' | tr '\n' ' ')"
