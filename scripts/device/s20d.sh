#!/usr/bin/env bash
# Session 20's last call, with models/ carried and tests/fixtures/ left behind (the tree's 64 MiB limit): the MLA
# tests that need no fixture (the combine launcher's final form), the serving tests on CUDA (server_cuda.sh, the
# real-tokenizer case with tests/data/downloads carried), the demo model's bench-accuracy on CUDA (accuracy.sh), and
# the final bench-one-batch bf16 batch 1 / 8 / 64 / 256 against main be4d57b (dserve_base).
set -u
source "$(dirname "$0")/lib.sh"
OUT=$OUT/mla GTEST_FILTER='MlaAbsorbedVc.*:Cases/MlaAbsorbedGpu.*:MlaDecodeT16.*' SUITE_LIMIT=120 \
  bash "$(dirname "$0")/gpusuite.sh"
SERVER_TEST_TIMEOUT=150 OUT=$OUT/server bash "$(dirname "$0")/server_cuda.sh"
OUT=$OUT/accuracy bash "$(dirname "$0")/accuracy.sh"
AB_BATCHES=1,8,64,256 AB_REPS=2 AB_BINS="dserve_base dserve" bash "$(dirname "$0")/abbin.sh"
