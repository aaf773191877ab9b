# Sourced by the device scripts (`source "$(dirname "$0")/lib.sh"`): the repository root as the working folder,
# B = the binaries ($DEVBIN, default .devbin), OUT = the log folder (created; default /tmp/<script>_out) and
# DSERVE_SOURCE_DIR (the GPU tests read fixtures and configs through it).
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
B=${DEVBIN:-.devbin}
OUT=${OUT:-/tmp/$(basename "$0" .sh)_out}
mkdir -p "$OUT"
export DSERVE_SOURCE_DIR=$PWD
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)  # Nsight Compute (the ncu_* helpers)
# v3_config PATH LAYERS [bf16|mtp]: the real DeepSeek-V3 config cut to LAYERS layers (the first dense, no MTP layer)
# for `--load-format dummy` runs; with bf16, without its quantization_config (dummy bf16 weights, else block-FP8);
# with mtp, its MTP layer kept (speculative decoding).
v3_config() {
  python3 - "$@" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/deepseek-v3.json"))
c.update(num_hidden_layers=int(sys.argv[2]), first_k_dense_replace=1, num_nextn_predict_layers=0)
if len(sys.argv) > 3 and sys.argv[3] == "mtp":
    c["num_nextn_predict_layers"] = 1
if len(sys.argv) > 3 and sys.argv[3] == "bf16":
    c.pop("quantization_config", None)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
}
# v32_config PATH LAYERS: the real DeepSeek-V3.2-Exp config cut to LAYERS layers (its own first three dense, no MTP
# layer), block-FP8, for `--load-format dummy` runs of the sparse attention.
v32_config() {
  python3 - "$@" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/deepseek-v3.2-exp.json"))
c.update(num_hidden_layers=int(sys.argv[2]), num_nextn_predict_layers=0)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
}
# v3_cut_config PATH LAYERS: the real DeepSeek-V3 config cut to LAYERS layers with its own first three dense (the
# sparse-attention runs' counterpart of v32_config: the same layers with dense MLA), no MTP layer, block-FP8.
v3_cut_config() {
  python3 - "$@" <<'PY'
import json, sys
c = json.load(open("tests/data/configs/deepseek-v3.json"))
c.update(num_hidden_layers=int(sys.argv[2]), first_k_dense_replace=3, num_nextn_predict_layers=0)
json.dump(c, open(sys.argv[1], "w"), indent=1)
PY
}
# prefill_run NAME CONFIG INPUT [VAR=VALUE...]: bench-one-batch of one sequence of INPUT tokens on CONFIG (dummy
# weights, 2 output tokens) with those environment settings, its output in $OUT/NAME.log, and one line
# "== NAME rc=<exit status> <prefill latency and throughput>".
prefill_run() {
  local name=$1 config=$2 input=$3
  shift 3
  timeout 120 env "$@" "$B/dserve" bench-one-batch --device cuda --model-path "$config" --load-format dummy \
    --output-len 2 --batch-size 1 --input-len "$input" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(grep -E 'Prefill\. latency' "$OUT/$name.log" | sed 's/.*latency: //')"
}
# gtest_run NAME SECONDS FILTER: ds_ops_cuda_gpu_test with that gtest filter under a time limit, its output in
# $OUT/NAME.log, and one line "== NAME: rc=<exit status> <its PASSED / FAILED summary lines>".
gtest_run() {
  timeout "$2" "$B/ds_ops_cuda_gpu_test" --gtest_filter="$3" > "$OUT/$1.log" 2>&1
  echo "== $1: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$OUT/$1.log" | tr '\n' ' ')"
}
# memcheck_run NAME SECONDS FILTER: those tests under compute-sanitizer's memcheck (no timing loops), the output in
# $OUT/NAME.log, and one line "== NAME rc=<exit status> <its ERROR SUMMARY / PASSED / FAILED lines>".
memcheck_run() {
  local cs
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  DSERVE_TEST_NO_TIMING=1 timeout "$2" "$cs" --tool memcheck "$B/ds_ops_cuda_gpu_test" --gtest_filter="$3" \
    > "$OUT/$1.log" 2>&1
  echo "== $1 rc=$? $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$OUT/$1.log" | tr '\n' ' ')"
}
# ncu_run NAME SECONDS KERNEL_REGEX BENCH_FILTER HEADER_REGEX LINES [EXTRA_NCU_ARGS...]: ncu (no clock control; speed of
# light, pipes, memory, warp states, scheduler, occupancy, launch) on the first launch of the kernels matching
# KERNEL_REGEX in `dserve_kernel_bench --filter BENCH_FILTER`, the report in $OUT/NAME.txt, a line "== NAME rc=..."
# and the report's first LINES lines less the bench's own output (lines matching HEADER_REGEX) and ncu's noise.
ncu_run() {
  local name=$1 secs=$2 kernel=$3 filter=$4 header=$5 lines=$6
  shift 6
  timeout "$secs" "$NCU" --clock-control none --kernel-name "regex:$kernel" --launch-count 1 --section SpeedOfLight \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats "$@" "$B/dserve_kernel_bench" --filter "$filter" > "$OUT/$name.txt" 2>&1
  echo "== $name rc=$?"
  grep -vE "^==PROF==|^\s*\$|$header|^ceiling|^device|^done|^    ---" "$OUT/$name.txt" | head -"$lines"
}
# kbench_ab NAME FILTER REGEX: `dserve_kernel_bench --filter FILTER` from this build ($B) and from main's ($B/main),
# their outputs in $OUT/NAME_new.log and $OUT/NAME_main.log, a line "== NAME new|main rc=..." each and the lines of
# each matching REGEX (A/B runs of a kernel change in one call).
kbench_ab() {
  local name=$1 filter=$2 regex=$3 bin tag
  for bin in "$B" "$B/main"; do
    tag=$([ "$bin" = "$B" ] && echo new || echo main)
    timeout 100 "$bin/dserve_kernel_bench" --filter "$filter" > "$OUT/${name}_$tag.log" 2>&1
    echo "== $name $tag rc=$?"
    grep -E "$regex" "$OUT/${name}_$tag.log"
  done
}
# ncu_source_page NAME KERNEL_REGEX COMMAND...: ncu's warp-state samples per SASS instruction (WarpStateStats,
# SourceCounters, SpeedOfLight) on the first launch of the kernels matching KERNEL_REGEX while COMMAND runs
# (DSERVE_TEST_NO_TIMING=1 set for gtest commands), the report in $OUT/NAME.ncu-rep, the source page as
# $OUT/NAME_sass.csv, the details page as $OUT/NAME_details.txt, then the duration / throughput lines and
# scripts/ncu_source_top.py's summary (stall reasons, no_instruction share, top instructions).
ncu_source_page() {
  local name=$1 kernel=$2
  shift 2
  DSERVE_TEST_NO_TIMING=1 timeout 100 "$NCU" --clock-control none --kernel-name "regex:$kernel" --launch-count 1 \
    --section WarpStateStats --section SourceCounters --section SpeedOfLight -o "$OUT/$name" "$@" \
    > "$OUT/${name}_collect.log" 2>&1
  echo "== $name collect rc=$?"
  timeout 60 "$NCU" -i "$OUT/$name.ncu-rep" --page source --print-source sass --csv > "$OUT/${name}_sass.csv" 2>&1
  timeout 60 "$NCU" -i "$OUT/$name.ncu-rep" --page details > "$OUT/${name}_details.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued" "$OUT/${name}_details.txt" | head -4
  python3 scripts/ncu_source_top.py "$OUT/${name}_sass.csv" 8 | head -14
}
# ncu_stalls NAME SECONDS KERNEL_REGEX BENCH_FILTER: the stall reasons (average warps stalled a issued instruction, by
# reason) of the first launch of the kernels matching KERNEL_REGEX in `dserve_kernel_bench --filter BENCH_FILTER`, the
# report in $OUT/NAME.txt, a line "== NAME rc=..." and the eight largest reasons.
ncu_stalls() {
  local name=$1 secs=$2 kernel=$3 filter=$4
  timeout "$secs" "$NCU" --clock-control none --kernel-name "regex:$kernel" --launch-count 1 \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    "$B/dserve_kernel_bench" --filter "$filter" > "$OUT/$name.txt" 2>&1
  echo "== $name rc=$?"
  grep -E "stalled" "$OUT/$name.txt" | awk '{print $1, $NF}' | sort -k2 -g -r | head -8
}
# ncu_decode_pages NAME ARGS...: ncu's warp-state samples per SASS instruction of the first 40 kernels of one eager
# decode step (bench-one-batch's "decode/" NVTX range; V2-Lite config, dummy weights, batch 1, input 256, ARGS added),
# the report in $OUT/NAME.ncu-rep, the source page as $OUT/NAME_sass.csv, scripts/ncu_source_top.py's summary in
# $OUT/NAME_top.txt, and each kernel's stall reasons and no_instruction share.
ncu_decode_pages() {
  local name=$1
  shift
  timeout 130 "$NCU" --clock-control none --nvtx --nvtx-include "decode/" --launch-skip 0 --launch-count 40 \
    --section WarpStateStats --section SourceCounters -o "$OUT/$name" "$B/dserve" bench-one-batch --device cuda \
    --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --batch-size 1 --input-len 256 \
    --output-len 2 --disable-cuda-graph "$@" > "$OUT/${name}_collect.log" 2>&1
  echo "== $name collect rc=$?"
  timeout 40 "$NCU" -i "$OUT/$name.ncu-rep" --page source --print-source sass --csv > "$OUT/${name}_sass.csv" 2>&1
  echo "== $name sass rc=$? lines=$(wc -l < "$OUT/${name}_sass.csv")"
  python3 scripts/ncu_source_top.py "$OUT/${name}_sass.csv" 6 > "$OUT/${name}_top.txt"
  grep -E "^==|by reason|no_instruction" "$OUT/${name}_top.txt" | cut -c1-200
}
# decode_run NAME CONFIG ARGS...: bench-one-batch on CONFIG (dummy weights, input 256, graphs) with ARGS, its output in
# $OUT/NAME.log, and one line "== NAME rc=<exit status> <each decode median tok/s> <graphs captured>".
decode_run() {
  local name=$1 config=$2
  shift 2
  timeout 100 "$B/dserve" bench-one-batch --device cuda --model-path "$config" --load-format dummy --input-len 256 \
    "$@" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? $(grep -E 'Decode\.  median' "$OUT/$name.log" | sed 's/.*throughput: //' | tr '\n' ' ')$(grep -ho 'for [0-9]* batch sizes[^:]*' "$OUT/$name.log")"
}
# b1b_run NAME ARGS...: decode_run on the V2-Lite config.
b1b_run() {
  local name=$1
  shift
  decode_run "$name" tests/data/configs/deepseek-v2-lite.json "$@"
}
# wait_ready LOG PID [SECONDS]: waits until a `dserve serve` started in the background logs "ready on" (or exits, or
# SECONDS pass, default 240).
wait_ready() {
  local i
  for i in $(seq "${3:-240}"); do grep -q "ready on" "$1" && return 0; kill -0 "$2" 2>/dev/null || return 1; sleep 1; done
  return 1
}
# bench_random PORT CONCURRENCY IN OUT: bench-serving random-ids (IN tokens in, OUT out, 4 x CONCURRENCY prompts) at
# that concurrency, its throughput / TPOT / ITL (and acceptance) lines.
bench_random() {
  timeout 100 $B/dserve bench-serving --backend sglang --port "$1" --dataset-name random-ids \
    --random-ids-vocab-size 100000 --random-input-len "$3" --random-output-len "$4" --random-range-ratio 1.0 \
    --num-prompts $(($2 * 4)) --max-concurrency "$2" --seed 1 --disable-tqdm 2>&1 |
    grep -E "Successful|Output token throughput|Mean TPOT|Median ITL|Accept length"
}
