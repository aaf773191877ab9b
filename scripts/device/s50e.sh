#!/usr/bin/env bash
# Session 50, fifth call (binaries dserve, ds_ops_cuda_gpu_test, dserve_mla_bench; the 8-row MLA decode blocks now
# the default): the whole GPU suite, then issue 6's and 7's tables on this tree (s50b's runs: bf16 1 / 8 / 64 / 256
# with and without graphs, FP8 1 / 4 / 8 / 64, the MLA decode alone at 1 x 32K and 64 x 4K).
set -u
source "$(dirname "$0")/lib.sh"
D="$(dirname "$0")"
SUITE_LIMIT=170 bash "$D/gpusuite.sh" > "$OUT/suite.txt" 2>&1
grep -E "^==|FAILED|PASSED|!!" "$OUT/suite.txt" | head -20
OUT=$OUT/tables bash "$D/s50b.sh"
