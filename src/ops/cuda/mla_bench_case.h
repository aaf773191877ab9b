// One decode case of the MLA kernel benches (dserve_mla_bench, dserve_mla_trace): batch x context x heads of one
// query token per sequence over random bf16 (or packed e4m3) caches with shuffled page tables, enough cache copies
// to overflow the 50 MB L2 when rotated, and the kernel parameters of the split plan. Owns its device buffers.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/kv_fp8.h"
#include "kernels/mla_decode.h"

#define MLA_BENCH_CHECK(expr)                                                                        \
  do {                                                                                               \
    cudaError_t e_ = (expr);                                                                         \
    if (e_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #expr, cudaGetErrorString(e_)); \
      std::exit(1);                                                                                  \
    }                                                                                                \
  } while (0)

namespace ds::mla_bench {

inline uint16_t bf16_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}
inline float bf16_value(uint16_t h) {
  uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Random bf16 in (-1, 1) made on the host and copied (never zeros: they can run faster than real data).
inline void fill_random(void* dev, size_t n, uint32_t seed) {
  std::vector<uint16_t> h(n);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& x : h) {
    float v = u(rng);
    x = bf16_bits(v == 0.0f ? 0.5f : v);
  }
  MLA_BENCH_CHECK(cudaMemcpy(dev, h.data(), n * 2, cudaMemcpyHostToDevice));
}

// Packed e4m3 rows (kernels/kv_fp8.h): e4m3 bytes in (-2, 2) (no NaN), block scales 1/64, bf16 rope in (-1, 1).
inline void fill_packed(void* dev, size_t rows, uint32_t seed) {
  constexpr kernels::KvRowLayout L = kernels::kv_row_layout(kernels::kKvE4M3, 512, 64);
  std::vector<uint8_t> h(rows * L.row_bytes);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 0x3f);  // exponent <= 7: |value| < 2
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (size_t r = 0; r < rows; ++r) {
    uint8_t* row = h.data() + r * L.row_bytes;
    for (int k = 0; k < 512; ++k) row[k] = static_cast<uint8_t>(byte(rng) | ((rng() & 1) << 7));
    for (int b = 0; b < 4; ++b) {
      const float s = 1.0f / 64;
      std::memcpy(row + L.scale_off + 4 * b, &s, 4);
    }
    for (int k = 0; k < 64; ++k) {
      const uint16_t v = bf16_bits(u(rng));
      std::memcpy(row + L.rope_off + 2 * k, &v, 2);
    }
  }
  MLA_BENCH_CHECK(cudaMemcpy(dev, h.data(), h.size(), cudaMemcpyHostToDevice));
}

class DecodeCase {
 public:
  // fmt: kernels::kKvBf16 or kKvE4M3; splits 0: mla_decode_num_splits's plan.
  DecodeCase(int batch, int context, int heads, int fmt, int num_sms, int splits = 0) : B_(batch), H_(heads) {
    constexpr int D = kernels::kMlaHeadDim, V = kernels::kMlaValueDim;
    const int L = context, pages_per_seq = (L + 63) / 64, pages = B_ * pages_per_seq;
    row_bytes_ = kernels::kv_row_layout(fmt, V, D - V).row_bytes;
    const size_t cache_bytes = static_cast<size_t>(pages) * 64 * row_bytes_;
    caches_.resize(static_cast<size_t>(std::max<size_t>(2, (size_t{200} << 20) / cache_bytes + 1)));
    for (size_t i = 0; i < caches_.size(); ++i) {
      MLA_BENCH_CHECK(cudaMalloc(&caches_[i], cache_bytes));
      if (fmt)
        fill_packed(caches_[i], static_cast<size_t>(pages) * 64, 17 + static_cast<uint32_t>(i));
      else
        fill_random(caches_[i], cache_bytes / 2, 17 + static_cast<uint32_t>(i));
    }
    q_ = alloc(static_cast<size_t>(B_) * H_ * D * 2);
    fill_random(q_, static_cast<size_t>(B_) * H_ * D, 5);
    out_ = alloc(static_cast<size_t>(B_) * H_ * V * 2);
    std::vector<int32_t> perm(pages), q_starts(B_ + 1), lens(B_, L), pos(B_, L - 1);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(3));
    std::iota(q_starts.begin(), q_starts.end(), 0);
    p.block_table = upload(perm);
    p.q_starts = upload(q_starts);
    p.seq_lens = upload(lens);
    p.positions = upload(pos);
    p.q = q_;
    p.cache = caches_[0];
    p.out = out_;
    p.num_seqs = B_;
    p.num_tokens = B_;
    p.num_heads = H_;
    p.num_slots = static_cast<int64_t>(pages) * 64;
    p.max_pages = pages_per_seq;
    p.page_size = 64;
    p.max_q_len = 1;
    p.scale = 0.1352338f;
    p.cache_format = fmt;
    p.plan_context = L;
    p = with_splits(splits > 0 ? splits
                               : kernels::mla_decode_num_splits(B_, B_, 1, H_, L, false, num_sms, fmt && H_ <= 16 ? 16 : 64));
  }
  ~DecodeCase() {
    for (void* c : caches_) cudaFree(c);
    for (void* b : owned_) cudaFree(b);
  }
  DecodeCase(const DecodeCase&) = delete;
  DecodeCase& operator=(const DecodeCase&) = delete;

  // p with `splits` and its partials in scratch of their own (allocated here, kept until the case ends).
  kernels::MlaDecodeParams with_splits(int splits) {
    kernels::MlaDecodeParams q = p;
    q.num_splits = splits;
    q.part_o = nullptr;
    q.part_lse = nullptr;
    if (const size_t bytes = kernels::mla_decode_scratch_bytes(splits, B_, H_)) {
      void* s = alloc(bytes);
      q.part_o = static_cast<float*>(s);
      q.part_lse = reinterpret_cast<float*>(static_cast<char*>(s) + kernels::mla_decode_lse_offset(splits, B_, H_));
    }
    return q;
  }
  const std::vector<void*>& caches() const { return caches_; }
  int64_t row_bytes() const { return row_bytes_; }

  kernels::MlaDecodeParams p;

 private:
  void* alloc(size_t bytes) {
    void* d = nullptr;
    MLA_BENCH_CHECK(cudaMalloc(&d, bytes));
    owned_.push_back(d);
    return d;
  }
  int32_t* upload(const std::vector<int32_t>& v) {
    auto* d = static_cast<int32_t*>(alloc(v.size() * 4));
    MLA_BENCH_CHECK(cudaMemcpy(d, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    return d;
  }

  int B_, H_;
  int64_t row_bytes_ = 0;
  void *q_ = nullptr, *out_ = nullptr;
  std::vector<void*> caches_, owned_;
};

// A CUDA graph of `launches` decodes of `plan` rotating over `caches` (each launch reads another copy, so the L2 holds
// none of them), for timing by replays.
class DecodeGraph {
 public:
  DecodeGraph(const kernels::MlaDecodeParams& plan, const std::vector<void*>& caches, int launches, cudaStream_t stream)
      : launches_(launches), stream_(stream) {
    kernels::MlaDecodeParams pg = plan;
    MLA_BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < launches; ++i) {
      pg.cache = caches[static_cast<size_t>(i) % caches.size()];
      MLA_BENCH_CHECK(kernels::launch_mla_decode(pg, stream));
    }
    MLA_BENCH_CHECK(cudaStreamEndCapture(stream, &graph_));
    MLA_BENCH_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    MLA_BENCH_CHECK(cudaEventCreate(&e0_));
    MLA_BENCH_CHECK(cudaEventCreate(&e1_));
  }
  ~DecodeGraph() {
    cudaEventDestroy(e0_);
    cudaEventDestroy(e1_);
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  DecodeGraph(const DecodeGraph&) = delete;
  DecodeGraph& operator=(const DecodeGraph&) = delete;

  void replay() { MLA_BENCH_CHECK(cudaGraphLaunch(exec_, stream_)); }
  // Median over `reps` replays (after `warmup` untimed ones) of the time per launch, in microseconds.
  double median_us(int reps, int warmup) {
    for (int i = 0; i < warmup; ++i) replay();
    std::vector<float> us;
    for (int i = 0; i < reps; ++i) {
      MLA_BENCH_CHECK(cudaEventRecord(e0_, stream_));
      replay();
      MLA_BENCH_CHECK(cudaEventRecord(e1_, stream_));
      MLA_BENCH_CHECK(cudaEventSynchronize(e1_));
      float ms;
      MLA_BENCH_CHECK(cudaEventElapsedTime(&ms, e0_, e1_));
      us.push_back(ms * 1000.0f / launches_);
    }
    std::sort(us.begin(), us.end());
    return us[us.size() / 2];
  }

 private:
  int launches_;
  cudaStream_t stream_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t e0_ = nullptr, e1_ = nullptr;
};

}  // namespace ds::mla_bench
