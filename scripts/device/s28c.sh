#!/usr/bin/env bash
# Session 28, fourth call: shared-experts fusion (the shared MLP as extra routed experts, default on;
# --disable-shared-experts-fusion runs it apart). The whole GPU suite (new: MoeGroupedTest.SharedExpertsFusedRouting,
# the norm's MoE sum at top_k 9; the fixtures and graph tests now run fused), then bench-one-batch V2-Lite dummy
# bf16 and FP8 at batch 1, 8 and 64, fused vs apart, two alternating rounds. Binaries: dserve, ds_ops_cuda_gpu_test.
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/suite timeout 250 bash "$(dirname "$0")/gpusuite.sh"
grep -h "GRAPHSTATS v2_lite  bs 3\|GRAPHSTATS v3_fp8   bs 3" "$OUT"/suite/*.log
mkdir -p "$OUT/ab"
for rep in 1 2; do
  for q in "" "--quantization fp8"; do
    for f in "" "--disable-shared-experts-fusion"; do
      log="$OUT/ab/r${rep}_$(echo "x${q}${f}" | tr -c 'A-Za-z0-9_\n' '_').log"
      start=$(date +%s)
      timeout 150 "$B/dserve" bench-one-batch --device cuda --model-path tests/data/configs/deepseek-v2-lite.json \
        --load-format dummy --batch-size 1,8,64 --input-len 256 --output-len 32 $q $f > "$log" 2>&1
      echo "== round $rep ${q:-bf16} ${f:-fused} rc=$? ($(( $(date +%s) - start )) s)"
      grep -E "^Decode\.  median" "$log"
    done
  done
done
grep -h "captured CUDA graphs" "$OUT"/ab/r1_*.log | cut -c1-300
