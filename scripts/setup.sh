#!/usr/bin/env bash
# Installs everything dserve needs to build and test on a fresh Debian machine (run as root or with sudo).
# The CUDA toolkit is optional: when /usr/local/cuda/bin/nvcc exists, the CUDA backend is built too.
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PKGS=(build-essential cmake ninja-build pkg-config git ca-certificates
      libgtest-dev nlohmann-json3-dev libpcre2-dev libboost-dev clang
      python3)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# Node and npm (the openai client tests, the tokenizer test data): any install that provides both commands will do.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: installing nodejs npm"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nodejs npm >/dev/null
fi
echo "setup: dependencies present"
