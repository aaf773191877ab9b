// The split-K block-FP8 GEMM on Hopper's native wgmma e4m3, for decode-sized M (1..64 tokens): a CTA is 64 weight
// rows x every token x a range of 128-deep K blocks, fed by TMA boxes through a ring of shared-memory stages; the
// K ranges' fp32 partials are summed in split order by the last CTA of each 64-row tile, or by the tile's thread-block
// cluster in distributed shared memory (deterministic either way).
// Semantics: fp8_gemm.h's small-M GEMM (ops/fp8.h linear_w8a8_reference). Raw pointers, no allocation.
#pragma once
#include <cstdint>

#include <cuda_runtime.h>

namespace ds::kernels {

// d[m, n] (bf16, m < M, n < N) = sum over kb of (sum_k q[m, k] w[n, k]) * sx[m * sx_ld + kb] * sw[n / 128, kb].
// w: e4m3 [Np, Kp] (Np % 128 == 0, Kp % 128 == 0), described by `weight_map` (make_fp8_weight_map); q: e4m3
// [M, ldq] (ldq % 16 == 0, 16-byte aligned); sx token-major.
struct Fp8GemmWgmmaParams {
  const uint8_t* q = nullptr;
  int64_t ldq = 0;
  const float* sx = nullptr;
  int64_t sx_ld = 0;
  const float* sw = nullptr;  // [Np / 128, Kp / 128]
  void* d = nullptr;          // bf16 [M, ldd]
  int64_t ldd = 0;
  int64_t M = 0, N = 0, Np = 0, Kp = 0;
  // K split in `splits` ranges of ceil(kb / splits) <= kFp8WgmmaMaxBlocks blocks (every range non-empty). With
  // splits > 1: partial fp32 [splits * Np / 64 * 64 * Mt] (Mt = M rounded up to 16, 32 or 64), tickets int
  // [Np / 64], zero before the launch and left zero after it (one launch at a time on a buffer pair).
  int splits = 1;
  float* partial = nullptr;
  int64_t partial_floats = 0;
  int* tickets = nullptr;
  int64_t ticket_count = 0;
  bool evict_first = true;  // the weight boxes evict-first in the L2 (read once a step)
  // 2, 4 or 8 (fp8_gemm_wgmma_cluster_supported; splits == cluster): a tile's K ranges run as one thread-block
  // cluster and are summed in distributed shared memory (no partials or tickets); 1: as `splits` says.
  int cluster = 1;
};
constexpr int64_t kFp8WgmmaMaxM = 64;
constexpr int kFp8WgmmaMaxBlocks = 48;  // K blocks a range at most (its scales are staged in shared memory)

// A weight's tensor map as the kernel takes it (a CUtensorMap's 128 bytes; valid once make_fp8_weight_map filled it).
struct alignas(64) Fp8WeightMap {
  uint8_t bytes[128] = {};
  bool valid = false;
};

// The tensor map of an e4m3 weight [Np, Kp] row-major for the kernel's boxes (128 bytes of K x 64 rows, 128-byte
// swizzle). False (out->valid false) when the driver has no encoder or the layout does not fit.
bool make_fp8_weight_map(const uint8_t* w, int64_t Np, int64_t Kp, Fp8WeightMap* out);
// Token columns a launch at M uses (16, 32 or 64) and CTAs of it an SM (0: the kernel cannot be resident).
int fp8_gemm_wgmma_tokens(int64_t M);
int fp8_gemm_wgmma_ctas_per_sm(int64_t M);
bool fp8_gemm_wgmma_supported(const Fp8GemmWgmmaParams& p);
// Whether a launch at M tokens can split K over clusters of `cluster` CTAs (2, 4 or 8; at most 8 at 16 tokens).
bool fp8_gemm_wgmma_cluster_supported(int cluster, int64_t M);
// CTAs such a launch keeps resident at once, in whole clusters (cudaOccupancyMaxActiveClusters x cluster: a cluster's
// CTAs share a GPC, so this can be fewer than CTAs an SM x SMs); 0 when such a cluster cannot run.
int fp8_gemm_wgmma_cluster_ctas(int cluster, int64_t M);
cudaError_t launch_fp8_gemm_wgmma(const Fp8GemmWgmmaParams& p, const Fp8WeightMap& weight_map, cudaStream_t stream);

// A second product of p's tokens in the same launch (launch_fp8_gemm_wgmma_pair: V2-Lite's q / kv_a pair): its
// weight (second_map, K = p's), weight scales [Np / 128, p.Kp / 128] and bf16 output [p.M, ldd]; its Np / 64 CTAs
// follow p's. One K range each (p.splits == 1).
struct Fp8GemmWgmmaSecond {
  const float* sw = nullptr;
  void* d = nullptr;
  int64_t ldd = 0;
  int64_t N = 0, Np = 0;
};
bool fp8_gemm_wgmma_pair_supported(const Fp8GemmWgmmaParams& p, const Fp8GemmWgmmaSecond& second);
cudaError_t launch_fp8_gemm_wgmma_pair(const Fp8GemmWgmmaParams& p, const Fp8WeightMap& weight_map,
                                       const Fp8GemmWgmmaSecond& second, const Fp8WeightMap& second_map,
                                       cudaStream_t stream);

}  // namespace ds::kernels
