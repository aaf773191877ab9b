#!/usr/bin/env bash
# Session 61, second call: the indexer's multi-token prefill scores (four query rows of a sequence a block sharing each
# key tile, double-buffered). Consistency cases in every mode (+ memcheck), v32's fixture / graph cases, the kernel
# bench's indexer rows (decode and prefill), and V3.2-Exp 4 layers prefill at 32K / 8K with DSERVE_INDEXER_MT=1 / 0.
set -u
source "$(dirname "$0")/lib.sh"
gtest_run idx 300 '*IndexerTopk*:Fixtures/FixtureGpuTest.*/4:Fixtures/CudaGraphTest.*/4'
grep -E "^ERR indexer|FAILED|Failure" "$OUT/idx.log" | head -50
memcheck_run idx_mc 200 '*IndexerTopk*'
timeout 120 $B/dserve_kernel_bench --filter indexer 2>&1 | grep -E "indexer"
v32_config "$OUT/v32.json" 4
run() {  # run NAME INPUT [env...]
  local name=$1 input=$2; shift 2
  timeout 150 env "$@" $B/dserve bench-one-batch --device cuda --model-path "$OUT/v32.json" --load-format dummy \
    --output-len 4 --batch-size 1 --input-len $input > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(grep -E 'Prefill\. latency|Decode\.  median' "$OUT/$name.log" | sed 's/.*latency: //' | tr '\n' ' ')"
}
for input in 32768 8192; do
  run mt_$input $input DSERVE_INDEXER_MT=1
  run one_$input $input DSERVE_INDEXER_MT=0
done
run trace_mt 32768 DSERVE_TRACE_OUT="$OUT/trace_mt.csv" LD_PRELOAD="$PWD/$B/libds_cupti_trace.so"
python3 scripts/device/trace_summary.py "$OUT/trace_mt.csv" --all > "$OUT/trace_mt.txt" 2>&1
head -16 "$OUT/trace_mt.txt"
rm -f "$OUT/trace_mt.csv"
