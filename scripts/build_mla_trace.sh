#!/usr/bin/env bash
# Builds dserve_mla_trace (src/ops/cuda/trace/mla_trace.cpp) into ${1:-build}/dserve_mla_trace: the MLA decode kernels
# compiled again with -DDS_MLA_TRACE (per-block timelines), linked against the build's ops/cuda library for the rest.
# A diagnostic only; not part of the CMake build. Needs a configured CUDA build (bash scripts/build.sh).
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
FLAGS=(-std=c++17 -O3 -DDS_MLA_TRACE -DDSERVE_WITH_CUDA=1 -gencode=arch=compute_90a,code=sm_90a -I src)
for f in mla_decode mla_decode_m16 mla_decode_t16; do
  "$NVCC" "${FLAGS[@]}" -c "src/kernels/$f.cu" -o "$TMP/$f.o" &
done
"$NVCC" "${FLAGS[@]}" -x cu -c src/ops/cuda/trace/mla_trace.cpp -o "$TMP/mla_trace.o" &
wait
"$NVCC" -gencode=arch=compute_90a,code=sm_90a -cudart static "$TMP"/*.o "$BUILD/libds_ops_cuda.a" "$BUILD/libds_core.a" \
  -lcublasLt -o "$BUILD/dserve_mla_trace"
echo "built $BUILD/dserve_mla_trace"
