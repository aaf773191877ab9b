#!/usr/bin/env bash
# Session 65 (run as its last call, s65g): ncu source pages (warp-state samples per SASS instruction) of every
# kernel of one V2-Lite FP8 batch-1 decode step's first layers (eager, inside bench-one-batch's "decode/" NVTX range),
# to look for code-generation defects like the MHA prefill's (session 65: 41% of its samples on branches ptxas put
# around code in an unrolled loop; fixed, +21%), summarized by scripts/ncu_source_top.py. Issue 7's batch-1 line
# (0.47 of the weight roofline) is spent in these kernels. Binaries: dserve (~150 s).
set -u
source "$(dirname "$0")/lib.sh"
ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || echo ncu)
timeout 130 "$ncu" --clock-control none --nvtx --nvtx-include "decode/" --launch-skip 0 --launch-count 40 \
  --section WarpStateStats --section SourceCounters -o "$OUT/decode_fp8" "$B/dserve" bench-one-batch --device cuda \
  --model-path tests/data/configs/deepseek-v2-lite.json --load-format dummy --quantization fp8 --batch-size 1 \
  --input-len 256 --output-len 2 --disable-cuda-graph > "$OUT/decode_fp8_collect.log" 2>&1
echo "== collect rc=$?"
timeout 40 "$ncu" -i "$OUT/decode_fp8.ncu-rep" --page source --print-source sass --csv > "$OUT/decode_fp8_sass.csv" 2>&1
echo "== sass rc=$? lines=$(wc -l < "$OUT/decode_fp8_sass.csv")"
python3 scripts/ncu_source_top.py "$OUT/decode_fp8_sass.csv" 6 | tee "$OUT/decode_fp8_top.txt" | \
  grep -E "^==|by reason|no_instruction" | cut -c1-200
