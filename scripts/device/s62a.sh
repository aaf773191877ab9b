#!/usr/bin/env bash
# Prepared in session 61 (no device time left) for the next session's first call (binaries ds_ops_cuda_gpu_test,
# dserve_kernel_bench, dserve; ~400 s: all.sh s62a:450): two opt-ins never run on a GPU. (1) The wgmma MLA prefill's split tile loads
# (DSERVE_MLA_PREFILL_SPLIT_LOADS=1: the ncu of s61g found the load loop's division / branches making ALU the busiest
# pipe and 20 of 32 threads active). (2) The indexer's prefill scores on wgmma (DSERVE_INDEXER_WGMMA=1,
# kernels/indexer_wgmma.cu: the mma.sync kernel is bound by its ldmatrix loads). Consistency cases on every kernel (+
# memcheck), the kernel bench's rows, V3 4 layers 32K prefill with / without (1), V3.2 4 layers 32K with / without
# (2). Keep each as the default if it wins (and drop the other path), else remove it.
# Session 62 added: the MHA prefill's context chunks (lse outputs of every kernel, the merge; MlaMhaPartsGpu,
# memcheck), V3 4 layers 32K prefill with the chunk path (one chunk: lse + row gather) vs one pass, and `dserve score`
# over 8K tokens in 2,048-token steps with 1,024-row context chunks vs one pass (same logprobs, time).
set -u
source "$(dirname "$0")/lib.sh"
gtest_run sample 120 'SampleGpu.*'
grep -E "^SAMPLE|Failure" "$OUT/sample.log" | head -30
timeout 150 $B/ds_ops_cuda_gpu_test --gtest_filter='Cases/MlaMha*:*IndexerTopk*' > "$OUT/mha.log" 2>&1
echo "== mha rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/mha.log" | tr '\n' ' ')"
grep -E "^ERR.*(split|wgmma-multi|lse|parts)|Failure" "$OUT/mha.log" | head -80
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
DSERVE_TEST_NO_TIMING=1 timeout 180 "$CS" --tool memcheck $B/ds_ops_cuda_gpu_test \
  --gtest_filter='Cases/MlaMha*lite_prefill:Cases/MlaMha*v3_chunked:Cases/MlaMha*fixture_dims:*IndexerTopk*' > "$OUT/mha_mc.log" 2>&1
echo "== mha_mc rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/mha_mc.log" | tr '\n' ' ')"
timeout 90 $B/dserve_kernel_bench --filter 'mla_prefill|indexer_prefill' 2>&1 | grep -E "mla_prefill|mla prefill|indexer"
v3_cut_config "$OUT/v3.json" 4
for split in 1 0 1 0; do prefill_run v3_32k_split$split "$OUT/v3.json" 32768 DSERVE_MLA_PREFILL_SPLIT_LOADS=$split; done
v32_config "$OUT/v32.json" 4
for w in 1 0 1 0; do prefill_run v32_32k_wgmma$w "$OUT/v32.json" 32768 DSERVE_INDEXER_WGMMA=$w; done
for c in 1 0; do prefill_run v3_32k_chunkpath$c "$OUT/v3.json" 32768 DSERVE_MHA_CHUNK_BYTES=$([ $c = 1 ] && echo 1073741824 || echo 1000000000000); done
IDS=$(python3 -c "import random; random.seed(1); print(','.join(str(random.randrange(1, 10)) for _ in range(8192)))")
for c in 67108864 1000000000000; do
  start=$(date +%s.%N)
  timeout 150 env DSERVE_MHA_CHUNK_BYTES=$c $B/dserve score --device cuda --model-path "$OUT/v3.json" --load-format dummy \
    --chunk-size 2048 --json --input-ids "$IDS" > "$OUT/score_$c.json" 2> "$OUT/score_$c.err"
  echo "== score chunk_bytes=$c rc=$? $(python3 -c "print(round($(date +%s.%N) - $start, 2))") s"
done
python3 - "$OUT/score_67108864.json" "$OUT/score_1000000000000.json" <<'PY'
import json, sys
a, b = (json.load(open(f))["input_token_logprobs"][1:] for f in sys.argv[1:])
d = [abs(x - y) for x, y in zip(a, b)]
print("== score chunked vs one pass: n", len(d), "max |diff|", max(d), "mean", sum(d) / len(d), "mean |lp|", sum(abs(x) for x in b) / len(b))
PY
