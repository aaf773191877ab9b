#!/usr/bin/env bash
# Session 51, last call: the whole GPU suite on the final tree (the FP8 walk up to 32 rows an expert on average is the
# default: MoeFp8Test.WgmmaWalkPassesThroughTheOps checks the new bound), then bench-one-batch V2-Lite FP8 at 64 /
# 128 / 256 with the default against DSERVE_MOE_WALK_ROWS_PER_EXPERT=8 (the old bound), alternating.
set -u
source "$(dirname "$0")/lib.sh"
SUITE_LIMIT=170 bash "$(dirname "$0")/gpusuite.sh"
AB_BATCHES=64,128,256 AB_KINDS="fp8" AB_BINS="walk32 r8" AB_CFG_walk32=base AB_CFG_r8=DSERVE_MOE_WALK_ROWS_PER_EXPERT=8 \
  AB_ROUNDS=2 bash "$(dirname "$0")/abbin.sh"
