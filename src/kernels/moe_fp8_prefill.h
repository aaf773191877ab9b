// Prefill-sized FP8 MoE layers (issue 7): the routed rows quantized once per layer into the padded per-expert
// segments that cuBLASLt's block-scaled GEMMs read (one call per expert on offsets), instead of a quantization,
// two memsets and a copy around every expert's GEMM. Semantics are ops/fp8.h's (quantize_activations_fp8).
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// Rows of an expert's segment are padded to this many (cuBLASLt's block-scaled GEMM on Hopper takes row counts
// that are multiples of 16: Fp8Gemm::kLtRowMultiple).
constexpr int64_t kMoeFp8SegmentRows = 16;

// pstart[e] = sum over e' < e of round_up(counts[e'], 16), for e in [0, experts] (pstart[experts] = slots).
// One thread; the host computes the same from the counts it read back.
cudaError_t launch_moe_fp8_segments(const int32_t* counts, int experts, int32_t* pstart, cudaStream_t stream);

// Quantizes the rows of every expert segment: slot pstart[e] + i for i < counts[e] holds
//   gather mode (silu = false): x[src_token[offsets[e] + i], 0:K]  (x [tokens, K] bf16, row stride ldx), or
//   silu mode:                   bf16(silu(x[slot, c]) * x[slot, K + c]) for c < K  (x [slots, 2K], stride ldx),
// and slots past counts[e] in the segment hold zeros. q[slot, 0:K] = e4m3(v / s), s = the 128-group scale of
// quant_act (max(amax, 1e-4) / 448, ue8m0: the next power of two up). Scales of segment e (rows Mp =
// pstart[e + 1] - pstart[e]) start at s + pstart[e] * K / 128: K-block-major [K / 128][Mp] when s_m_major
// (cuBLASLt's VEC128 layout with row stride Mp), else token-major [Mp][K / 128]. K % 128 == 0.
struct MoeFp8SegmentQuantParams {
  const void* x = nullptr;
  int64_t ldx = 0;
  bool silu = false;
  const int32_t* src_token = nullptr;  // gather mode: [routed rows] (moe_permute)
  const int32_t* counts = nullptr;     // [experts]
  const int32_t* offsets = nullptr;    // [experts] first permuted row of each expert
  const int32_t* pstart = nullptr;     // [experts + 1] (launch_moe_fp8_segments)
  int experts = 0;
  int64_t slots = 0;  // pstart[experts]: the host's copy
  int64_t K = 0;
  bool ue8m0 = false;
  bool s_m_major = true;
  uint8_t* q = nullptr;  // [slots, K] e4m3
  float* s = nullptr;    // [slots * K / 128]
};
cudaError_t launch_moe_fp8_segment_quant(const MoeFp8SegmentQuantParams& p, cudaStream_t stream);

// row_of[n] (a permuted row from moe_permute, -1 kept) becomes that row's slot: row - offsets[e] + pstart[e] for
// e = topk_ids[n], so moe_combine reads the segments' outputs.
cudaError_t launch_moe_fp8_slot_rows(const int32_t* topk_ids, const int32_t* offsets, const int32_t* pstart,
                                     int32_t* row_of, int64_t entries, cudaStream_t stream);

}  // namespace ds::kernels
