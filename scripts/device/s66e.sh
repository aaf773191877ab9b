#!/usr/bin/env bash
# Session 66, last call: the session's final tree (e492821's kernels) against the session's start ($B/main = fd85cc7)
# at V2-Lite FP8 batch 1 / 8 and bf16 batch 1, and a sweep of the batch-1 schedule switches on the H100 (their
# defaults were measured on the H200 in sessions 34-45): walk ring depth, early PDL triggers, the side stream's flag
# join, dynamic walk tiles at every batch. Two rounds alternating. Binaries: dserve (~180 s).
set -u
source "$(dirname "$0")/lib.sh"
F=(--quantization fp8 --batch-size 1 8 --output-len 32)
for round in 1 2; do
  b1b_run final$round "${F[@]}"
  B=$B/main b1b_run start$round "${F[@]}"
  DSERVE_MOE_WGMMA_STAGES=8 b1b_run stages8_$round "${F[@]}"
  DSERVE_MOE_WGMMA_STAGES=4 b1b_run stages4_$round "${F[@]}"
  DSERVE_PDL_EARLY=0 b1b_run early0_$round "${F[@]}"
  DSERVE_SIDE_FLAG_JOIN=1 b1b_run flagjoin1_$round "${F[@]}"
  DSERVE_MOE_WALK_DYNAMIC=1 b1b_run dynamic1_$round "${F[@]}"
done
b1b_run bf16_final --batch-size 1 8 --output-len 32
B=$B/main b1b_run bf16_start --batch-size 1 8 --output-len 32
