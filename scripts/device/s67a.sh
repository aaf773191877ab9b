#!/usr/bin/env bash
# Session 67: the expert distribution recorder's GPU cases (MoeCountExperts against the CPU, the recorder through the
# CUDA graphs' padded batches) inside the whole suite (all.sh gpusuite), memcheck of them; then the per-shape walk
# ring depth from the MoE tuning table (configs/moe_fp8/NVIDIA_H100_80GB_HBM3.json: V2-Lite's experts at 8 stages)
# against the same binary on the table without it, V2-Lite FP8 batch 1 / 8 / 32 / 64, two rounds alternating; the
# V3-shaped model (no depth in the table: the same code path) once as a control. Binaries: dserve,
# ds_ops_cuda_gpu_test (~200 s).
set -u
source "$(dirname "$0")/lib.sh"
memcheck_run mc 120 'CudaOpsTest.MoeCountExperts:CudaGraphExperts.*'
python3 - "$OUT/nostage.json" <<'PY'
import json, sys
j = json.load(open("configs/moe_fp8/NVIDIA_H100_80GB_HBM3.json"))
for s in j["shapes"]:
    s.pop("walk_stages", None)
json.dump(j, open(sys.argv[1], "w"), indent=1)
PY
for round in 1 2; do
  b1b_run table_$round --quantization fp8 --batch-size 1 8 32 64 --output-len 32
  DSERVE_MOE_FP8_CONFIG=$OUT/nostage.json b1b_run base_$round --quantization fp8 --batch-size 1 8 32 64 --output-len 32
done
v3_config "$OUT/v3.json" 4
decode_run v3_table "$OUT/v3.json" --batch-size 1 8 --output-len 32
DSERVE_MOE_FP8_CONFIG=$OUT/nostage.json decode_run v3_base "$OUT/v3.json" --batch-size 1 8 --output-len 32
