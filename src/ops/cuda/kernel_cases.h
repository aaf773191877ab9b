// Inputs shared by the CUDA consistency tests (*_gpu_test.cpp) and dserve_kernel_bench: random
// bf16-representable data (never zeros), device copies, a paged-attention batch over shuffled pages with
// spare pages, uniform top-k routing and the models' router settings. Header-only and gtest-free, so the benchmark measures the very
// inputs the tests check.
#pragma once
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "core/check.h"
#include "ops/cuda/cuda_runtime.h"
#include "ops/kernel_cost.h"
#include "ops/ops.h"

namespace ds::kcases {

// F32 host tensor of N(offset, scale) values rounded to bf16 (so both backends see identical inputs).
// Draws from a table of 64K normals with a xorshift index: big weight matrices fill in well under a second.
inline Tensor randn(Shape shape, std::mt19937& rng, float scale = 1.0f, float offset = 0.0f) {
  static const std::vector<float> table = [] {
    std::mt19937 g(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> v(1 << 16);
    for (float& x : v) x = nd(g);
    return v;
  }();
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  uint64_t x = (static_cast<uint64_t>(rng()) << 32 | rng()) | 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    float v = round_bf16(offset + scale * table[(x >> 20) & 0xFFFF]);
    if (v == 0.0f) v = scale * 1e-3f;  // never zeros
    t.f32()[i] = v;
  }
  return t;
}

// Host F32 -> host tensor of `dtype` (bf16/f32) -> device.
inline Tensor to_device(const Tensor& f32, DType dtype = DType::kBF16) {
  if (dtype == DType::kF32) return cuda_upload(f32);
  Tensor h = Tensor::empty(f32.shape(), DType::kBF16);
  for (int64_t i = 0; i < f32.numel(); ++i) h.data_as<uint16_t>()[i] = f32_to_bf16(f32.f32()[i]);
  return cuda_upload(h);
}

inline Tensor i32_tensor(const std::vector<int32_t>& v, Shape shape = {}) {
  if (shape.empty()) shape = {static_cast<int64_t>(v.size())};
  Tensor t = Tensor::empty(shape, DType::kI32);
  std::copy(v.begin(), v.end(), t.data_as<int32_t>());
  return t;
}

// A batch for paged attention: per sequence its context length after the step and its new (query) tokens,
// the last positions of the context. Host and device copies of the metadata.
struct Batch {
  std::vector<int> seq_lens, q_lens;
  int page_size = 64;
  AttnMetadata host, dev;
  int64_t slots = 0;
  std::vector<std::vector<int32_t>> pages;  // per sequence
};

// Pages come from a shuffled pool with spare pages that no sequence uses.
inline Batch make_batch(std::vector<int> seq_lens, std::vector<int> q_lens, int page_size, std::mt19937& rng) {
  Batch b;
  b.seq_lens = std::move(seq_lens);
  b.q_lens = std::move(q_lens);
  b.page_size = page_size;
  DS_CHECK(b.seq_lens.size() == b.q_lens.size() && page_size > 0);
  const int S = static_cast<int>(b.seq_lens.size());
  int total_pages = 0, max_pages = 1;
  for (int s = 0; s < S; ++s) {
    const int np = (b.seq_lens[s] + page_size - 1) / page_size;
    total_pages += np;
    max_pages = std::max(max_pages, np);
  }
  const int pool = total_pages + 3 + total_pages / 4;
  std::vector<int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  b.slots = static_cast<int64_t>(pool) * page_size;
  std::vector<int32_t> positions, slot_mapping, q_starts{0}, table(static_cast<size_t>(S) * max_pages, -1);
  int next = 0, max_q = 0, max_len = 0;
  int64_t total_context = 0;
  b.pages.resize(S);
  for (int s = 0; s < S; ++s) {
    const int len = b.seq_lens[s], qn = b.q_lens[s];
    DS_CHECK(qn <= len, "sequence ", s, ": ", qn, " new tokens of a context of ", len);
    const int np = (len + page_size - 1) / page_size;
    for (int i = 0; i < np; ++i) {
      b.pages[s].push_back(perm[next++]);
      table[static_cast<size_t>(s) * max_pages + i] = b.pages[s].back();
    }
    for (int i = 0; i < qn; ++i) {
      const int pos = len - qn + i;
      positions.push_back(pos);
      slot_mapping.push_back(b.pages[s][pos / page_size] * page_size + pos % page_size);
    }
    q_starts.push_back(q_starts.back() + qn);
    max_q = std::max(max_q, qn);
    max_len = std::max(max_len, len);
    total_context += len;
  }
  const int T = q_starts.back();
  AttnMetadata& h = b.host;
  h.num_seqs = S;
  h.num_tokens = T;
  h.page_size = page_size;
  h.max_seq_len = max_len;
  h.max_q_len = max_q;
  h.total_context = total_context;
  h.positions = i32_tensor(positions, {T});
  h.slot_mapping = i32_tensor(slot_mapping, {T});
  h.q_starts = i32_tensor(q_starts, {S + 1});
  h.seq_lens = i32_tensor(std::vector<int32_t>(b.seq_lens.begin(), b.seq_lens.end()), {S});
  h.block_table = i32_tensor(table, {S, max_pages});
  b.dev = h;
  b.dev.positions = cuda_upload(h.positions);
  b.dev.slot_mapping = cuda_upload(h.slot_mapping);
  b.dev.q_starts = cuda_upload(h.q_starts);
  b.dev.seq_lens = cuda_upload(h.seq_lens);
  b.dev.block_table = cuda_upload(h.block_table);
  return b;
}

// top_k distinct experts per token, uniform over [0, used) (used <= experts), in random order.
inline std::vector<int32_t> route_uniform(int64_t tokens, int used, int top_k, std::mt19937& rng) {
  DS_CHECK(top_k <= used, "top-", top_k, " of ", used, " experts");
  std::vector<int32_t> ids, all(used);
  ids.reserve(static_cast<size_t>(tokens) * top_k);
  for (int64_t t = 0; t < tokens; ++t) {
    std::iota(all.begin(), all.end(), 0);
    for (int k = 0; k < top_k; ++k) std::swap(all[k], all[k + rng() % (used - k)]);  // partial Fisher-Yates
    ids.insert(ids.end(), all.begin(), all.begin() + top_k);
  }
  return ids;
}

// The router of a model (dims from ops/kernel_cost.h, checked against the real configs): V3's sigmoid
// noaux_tc over groups, V2-Lite's softmax greedy top-k.
inline MoeRouting routing_of(const kbench::ModelDims& m) {
  MoeRouting r;
  r.method = m.sigmoid ? MoeRouting::Method::kNoauxTc
                       : (m.n_group > 1 ? MoeRouting::Method::kGroupLimitedGreedy : MoeRouting::Method::kGreedy);
  r.sigmoid = m.sigmoid;
  r.num_experts = m.n_routed;
  r.top_k = m.top_k;
  r.n_group = m.n_group;
  r.topk_group = m.topk_group;
  r.norm_topk_prob = m.norm_topk;
  r.routed_scaling_factor = m.routed_scaling;
  return r;
}

}  // namespace ds::kcases
