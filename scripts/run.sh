#!/usr/bin/env bash
# Installs, builds and runs dserve's main job on the bundled default model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec ./build/dserve serve "$@"
