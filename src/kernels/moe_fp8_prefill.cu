// Prefill FP8 MoE helpers (see moe_fp8_prefill.h): the padded segment starts, the once-per-layer quantization of
// the routed rows (gathered tokens, or the SiLU-mul of the gate|up GEMM's output) and the combine's row remap.
#include <algorithm>

#include <cuda_bf16.h>

#include "kernels/fp8_quant.cuh"
#include "kernels/moe_fp8_prefill.h"
#include "kernels/pdl.cuh"

namespace ds::kernels {
namespace {

__global__ void segments_kernel(const int32_t* counts, int experts, int32_t* pstart) {
  int32_t acc = 0;
  for (int e = 0; e < experts; ++e) {
    pstart[e] = acc;
    acc += static_cast<int32_t>((counts[e] + kMoeFp8SegmentRows - 1) / kMoeFp8SegmentRows * kMoeFp8SegmentRows);
  }
  pstart[experts] = acc;
}

// One warp per (slot, 128-group), each lane 4 consecutive channels, as quant_act_kernel.
__global__ void segment_quant_kernel(MoeFp8SegmentQuantParams p) {
  const int64_t groups = p.K / 128;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (warp >= p.slots * groups) return;
  const int64_t slot = warp / groups, g = warp % groups;
  // The segment holding the slot: the last expert whose start is <= slot (empty segments share a start).
  int lo = 0, hi = p.experts - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (__ldg(p.pstart + mid) <= slot) lo = mid;
    else hi = mid - 1;
  }
  const int e = lo;
  const int64_t start = __ldg(p.pstart + e), rows = __ldg(p.pstart + e + 1) - start, i = slot - start;
  const bool valid = i < __ldg(p.counts + e);
  const __nv_bfloat16* x = static_cast<const __nv_bfloat16*>(p.x);
  float v[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t c = g * 128 + lane * 4 + j;
    float val = 0.0f;
    if (valid && p.silu) {
      const float gt = __bfloat162float(x[slot * p.ldx + c]);
      const float up = __bfloat162float(x[slot * p.ldx + p.K + c]);
      // silu_mul's bf16 output, which the unfused chain quantizes.
      val = __bfloat162float(__float2bfloat16(gt / (1.0f + expf(-gt)) * up));
    } else if (valid) {
      const int64_t token = __ldg(p.src_token + __ldg(p.offsets + e) + i);
      val = __bfloat162float(x[token * p.ldx + c]);
    }
    v[j] = val;
  }
  uint32_t packed;
  const float s = fp8::quantize_group_warp(v, p.ue8m0, &packed);
  reinterpret_cast<uint32_t*>(p.q + slot * p.K + g * 128)[lane] = packed;
  if (lane == 0) p.s[p.s_m_major ? start * groups + g * rows + i : slot * groups + g] = s;
}

__global__ void slot_rows_kernel(const int32_t* topk_ids, const int32_t* offsets, const int32_t* pstart,
                                 int32_t* row_of, int64_t entries) {
  for (int64_t n = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; n < entries;
       n += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t r = row_of[n];
    if (r < 0) continue;
    const int32_t e = topk_ids[n];
    row_of[n] = r - offsets[e] + pstart[e];
  }
}

}  // namespace

cudaError_t launch_moe_fp8_segments(const int32_t* counts, int experts, int32_t* pstart, cudaStream_t stream) {
  if (experts < 0) return cudaErrorInvalidValue;
  return launch_plain(segments_kernel, 1, 1, 0, stream, counts, experts, pstart);
}

cudaError_t launch_moe_fp8_segment_quant(const MoeFp8SegmentQuantParams& p, cudaStream_t stream) {
  if (p.K <= 0 || p.K % 128 != 0 || p.slots < 0 || p.experts <= 0 || (!p.silu && !p.src_token) ||
      p.ldx < (p.silu ? 2 * p.K : p.K))
    return cudaErrorInvalidValue;
  if ((reinterpret_cast<uintptr_t>(p.q) & 3) != 0) return cudaErrorMisalignedAddress;
  if (p.slots == 0) return cudaSuccess;
  const int64_t threads = 256, warps = p.slots * (p.K / 128);
  const int64_t blocks = (warps * 32 + threads - 1) / threads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  return launch_plain(segment_quant_kernel, static_cast<unsigned>(blocks), threads, 0, stream, p);
}

cudaError_t launch_moe_fp8_slot_rows(const int32_t* topk_ids, const int32_t* offsets, const int32_t* pstart,
                                     int32_t* row_of, int64_t entries, cudaStream_t stream) {
  if (entries < 0) return cudaErrorInvalidValue;
  if (entries == 0) return cudaSuccess;
  const int64_t threads = 256, blocks = std::min<int64_t>((entries + threads - 1) / threads, 4096);
  return launch_plain(slot_rows_kernel, static_cast<unsigned>(blocks), threads, 0, stream, topk_ids, offsets, pstart,
                      row_of, entries);
}

}  // namespace ds::kernels
