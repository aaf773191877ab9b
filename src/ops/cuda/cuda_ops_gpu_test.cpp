// CUDA-vs-CPU consistency of every CudaOps op (the CPU backend is the oracle) on random bf16 data, at
// DeepSeek-V2-Lite / V3 sizes and ragged ones. Every new device allocation is NaN-poisoned, so an output
// element an op forgets to write fails the comparison; unused cache slots and table rows are NaN too.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <set>

#include <gtest/gtest.h>

#include "ops/cuda/gpu_test_util.h"
#include "runner/attn_metadata.h"

namespace ds {
namespace {

using test::compare;
using test::i32_tensor;
using test::randn;
using test::to_device;
using test::shape_name;
using test::to_host_f32;

class CudaOpsTest : public test::CudaVsCpuTest {
 protected:
  std::mt19937 rng_{20261122};
};

void expect_identical(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float a = got.f32()[i], b = want.f32()[i];
    if (!(a == b || (std::isnan(a) && std::isnan(b)))) ++bad;
  }
  std::printf("ERR %-40s mismatches %lld\n", what.c_str(), static_cast<long long>(bad));
  EXPECT_EQ(bad, 0) << what;
}

// ---- elementwise / norms ----

TEST_F(CudaOpsTest, Embedding) {
  for (int64_t d : {2048, 7168, 192, 12288, 100}) {  // 12288: two rounds of the vector path's loads; 100: scalar
    const int64_t vocab = 1000;
    Tensor table = randn({vocab, d}, rng_, 0.5f);
    std::vector<int32_t> ids = {5, 999, 0, 5, 17, 400, 3};
    // Rows nobody asks for are NaN: a wrong row index shows up.
    std::set<int32_t> used(ids.begin(), ids.end());
    for (int64_t r = 0; r < vocab; ++r)
      if (!used.count(static_cast<int32_t>(r)))
        for (int64_t c = 0; c < d; ++c) table.f32()[r * d + c] = NAN;
    Tensor got = to_host_f32(gpu().embedding(to_device(table), cuda_upload(i32_tensor(ids))));
    Tensor want = cpu().embedding(table, i32_tensor(ids));
    expect_identical(got, want, shape_name("embedding", {d}));
    // An F32 table gives the same bf16 rows.
    Tensor got32 = to_host_f32(gpu().embedding(to_device(table, DType::kF32), cuda_upload(i32_tensor(ids))));
    expect_identical(got32, want, shape_name("embedding f32 table", {d}));
  }
}

TEST_F(CudaOpsTest, RmsNormAndFusedAdd) {
  for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 7168}, {37, 2048}, {5, 512}, {3, 1536}, {64, 192}}) {
    for (DType wt : {DType::kBF16, DType::kF32}) {
      Tensor x = randn({rows, n}, rng_), res = randn({rows, n}, rng_), w = randn({n}, rng_, 0.1f, 1.0f);
      Tensor got = to_host_f32(gpu().rms_norm(to_device(x), to_device(w, wt), 1e-6f));
      Tensor want = cpu().rms_norm(x, w, 1e-6f);
      DS_EXPECT_CLOSE(got, want, 8e-3, 4e-3, shape_name("rms_norm", {rows, n}));
      // Fused: residual += x (rounded to bf16, as the residual stream is bf16), out = norm(residual).
      Tensor dres = to_device(res);
      Tensor got_f = to_host_f32(gpu().add_rms_norm(dres, to_device(x), to_device(w, wt), 1e-6f));
      Tensor res_ref = Tensor::empty({rows, n}, DType::kF32);
      for (int64_t i = 0; i < res.numel(); ++i) res_ref.f32()[i] = round_bf16(res.f32()[i] + x.f32()[i]);
      Tensor want_f = cpu().rms_norm(res_ref, w, 1e-6f);
      DS_EXPECT_CLOSE(got_f, want_f, 8e-3, 4e-3, shape_name("add_rms_norm", {rows, n}));
      expect_identical(to_host_f32(dres), res_ref, shape_name("add_rms_norm residual", {rows, n}));
    }
  }
}

TEST_F(CudaOpsTest, LayerNorm) {
  for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{7, 128}, {33, 32}, {1, 7168}, {300, 192}}) {
    for (DType wt : {DType::kBF16, DType::kF32}) {
      Tensor x = randn({rows, n}, rng_, 2.0f, 0.5f), w = randn({n}, rng_, 0.1f, 1.0f), b = randn({n}, rng_, 0.1f);
      Tensor got = to_host_f32(gpu().layer_norm(to_device(x), to_device(w, wt), to_device(b, wt), 1e-6f));
      DS_EXPECT_CLOSE(got, cpu().layer_norm(x, w, b, 1e-6f), 8e-3, 4e-3, shape_name("layer_norm", {rows, n}));
    }
  }
}

TEST_F(CudaOpsTest, AddInPlace) {
  for (DType t : {DType::kBF16, DType::kF32}) {
    Tensor a = randn({37, 2048}, rng_), b = randn({37, 2048}, rng_);
    Tensor da = to_device(a, t);
    gpu().add_(da, to_device(b, t));
    Tensor want = cpu().upload(a);
    cpu().add_(want, b);
    if (t == DType::kBF16)
      for (int64_t i = 0; i < want.numel(); ++i) want.f32()[i] = round_bf16(want.f32()[i]);
    expect_identical(to_host_f32(da), want, t == DType::kBF16 ? "add_ bf16" : "add_ f32");
  }
  // bf16 += fp32 (Ops::linear_partial's product): the exact sum of the two, rounded once.
  Tensor a = randn({37, 2048}, rng_), b = randn({37, 2048}, rng_);
  Tensor da = to_device(a, DType::kBF16);
  gpu().add_(da, to_device(b, DType::kF32));
  Tensor want = cpu().upload(a);
  for (int64_t i = 0; i < want.numel(); ++i) want.f32()[i] = round_bf16(round_bf16(a.f32()[i]) + b.f32()[i]);
  expect_identical(to_host_f32(da), want, "add_ bf16 += f32");
}

TEST_F(CudaOpsTest, SiluMul) {
  for (auto [rows, inter] : std::vector<std::pair<int64_t, int64_t>>{{3, 18432}, {37, 1408}, {64, 2048}, {5, 64}, {1, 10944}}) {
    Tensor gu = randn({rows, 2 * inter}, rng_, 2.0f);
    Tensor got = to_host_f32(gpu().silu_mul(to_device(gu)));
    DS_EXPECT_CLOSE(got, cpu().silu_mul(gu), 8e-3, 4e-3, shape_name("silu_mul", {rows, inter}));
  }
}

TEST_F(CudaOpsTest, ConcatSliceSelect) {
  for (auto [rows, n, m] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{37, 512, 64}, {5, 3, 7}, {130, 128, 64}, {1, 64, 16}}) {
    for (DType t : {DType::kBF16, DType::kF32}) {
      Tensor a = randn({rows, n}, rng_), b = randn({rows, m}, rng_);
      Tensor cat = gpu().concat_cols(to_device(a, t), to_device(b, t));
      expect_identical(to_host_f32(cat), cpu().concat_cols(a, b), shape_name("concat_cols", {rows, n, m}));
      Tensor ab = cpu().concat_cols(a, b);
      for (auto [b0, e0] : std::vector<std::pair<int64_t, int64_t>>{{0, n}, {n, n + m}, {1, n + m - 1}, {0, 1}}) {
        expect_identical(to_host_f32(gpu().slice_cols(cat, b0, e0)), cpu().slice_cols(ab, b0, e0),
                         shape_name("slice_cols", {rows, b0, e0}));
      }
      std::vector<int64_t> sel = {rows - 1, 0};
      for (int64_t r = 0; r < rows; r += 3) sel.push_back(r);
      sel.push_back(rows - 1);
      expect_identical(to_host_f32(gpu().select_rows(cat, sel)), cpu().select_rows(ab, sel),
                       shape_name("select_rows", {rows}));
    }
  }
}

// ---- matmuls ----

TEST_F(CudaOpsTest, Linear) {
  // (T, in, out): V3 q_a / q_b / kv_a / o_proj, V2-Lite q_proj / kv_b, fixture-sized and ragged shapes.
  for (auto [T, in, out] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {1, 7168, 1536}, {7, 1536, 24576}, {3, 7168, 576}, {2, 16384, 7168}, {4, 2048, 3072}, {37, 512, 4096},
           {130, 192, 80}, {5, 96, 200}, {1, 2048, 10944}}) {
    Tensor x = randn({T, in}, rng_), w = randn({out, in}, rng_, 0.05f);
    LinearWeight lw;
    lw.weight = to_device(w);
    Tensor got = to_host_f32(gpu().linear(to_device(x), lw));
    LinearWeight cw;
    cw.weight = w;
    DS_EXPECT_CLOSE(got, cpu().linear(x, cw), 1e-2, 5e-3, shape_name("linear", {T, in, out}));
  }
}

TEST_F(CudaOpsTest, LinearF32) {
  // bf16 weights (lm_head: fp32 logits) and F32 weights (router).
  for (auto [T, in, out, wt] : std::vector<std::tuple<int64_t, int64_t, int64_t, DType>>{
           {3, 7168, 32000, DType::kBF16}, {37, 192, 1024, DType::kBF16}, {37, 2048, 64, DType::kF32},
           {5, 7168, 256, DType::kF32}, {64, 5120, 160, DType::kF32}}) {
    Tensor x = randn({T, in}, rng_), w = randn({out, in}, rng_, 0.05f);
    Tensor got = cuda_download(gpu().linear_f32(to_device(x), to_device(w, wt)));
    ASSERT_EQ(got.dtype(), DType::kF32);
    DS_EXPECT_CLOSE(got, cpu().linear_f32(x, w), 1e-4, 1e-5, shape_name("linear_f32", {T, in, out}));
  }
}

TEST_F(CudaOpsTest, BmmHeads) {
  // (T, H, K, N): V2-Lite / V3 W_UK (nope -> lora) and W_UV (lora -> v), fixture and ragged shapes.
  for (auto [T, H, K, N] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {3, 16, 128, 512}, {5, 128, 512, 128}, {1, 128, 128, 512}, {33, 4, 32, 64}, {7, 3, 24, 40}}) {
    Tensor x = randn({T, H, K}, rng_), w = randn({H, K, N}, rng_, 0.05f);
    Tensor got = to_host_f32(gpu().bmm_heads(to_device(x), to_device(w)));
    DS_EXPECT_CLOSE(got, cpu().bmm_heads(x, w), 1e-2, 5e-3, shape_name("bmm_heads", {T, H, K, N}));
  }
}

// ---- rotary ----

TEST_F(CudaOpsTest, Rope) {
  struct Case {
    int64_t T, H, hd, off, dim;
    RopeStyle style;
  };
  for (const Case& c : std::vector<Case>{{7, 128, 192, 128, 64, RopeStyle::kInterleaved},
                                         {5, 1, 64, 0, 64, RopeStyle::kInterleaved},
                                         {9, 64, 128, 0, 64, RopeStyle::kNeox},
                                         {33, 4, 48, 32, 16, RopeStyle::kInterleaved},
                                         {3, 16, 32, 0, 16, RopeStyle::kNeox}}) {
    Tensor x = randn({c.T, c.H, c.hd}, rng_);
    std::vector<int32_t> pos(c.T);
    std::uniform_int_distribution<int32_t> pd(0, 160000);
    for (auto& p : pos) p = pd(rng_);
    pos[0] = 0;
    Tensor inv = Tensor::empty({c.dim / 2}, DType::kF32);
    for (int64_t i = 0; i < c.dim / 2; ++i)  // YaRN-like spread of frequencies
      inv.f32()[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / c.dim) * (i < c.dim / 4 ? 1.0 : 0.25));
    Tensor dx = to_device(x);
    gpu().rope_(dx, c.off, c.dim, cuda_upload(i32_tensor(pos)), cuda_upload(inv), 1.2f, c.style);
    Tensor want = cpu().upload(x);
    cpu().rope_(want, c.off, c.dim, i32_tensor(pos), inv, 1.2f, c.style);
    Tensor got = to_host_f32(dx);
    DS_EXPECT_CLOSE(got, want, 8e-3, 4e-3, shape_name("rope", {c.T, c.H, c.hd, c.off, c.dim}));
    for (int64_t t = 0; t < c.T; ++t)  // untouched dims stay bit-identical
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t i = 0; i < c.hd; ++i)
          if (i < c.off || i >= c.off + c.dim) {
            const int64_t k = (t * c.H + h) * c.hd + i;
            ASSERT_EQ(got.f32()[k], x.f32()[k]) << "rope changed dim " << i;
          }
  }
}

// ---- KV cache ----

struct Batch {
  std::vector<std::vector<int32_t>> pages;
  std::vector<SeqSlice> seqs;
};

// Sequences (start_pos, num_new) over shuffled pages of `page_size` slots out of `num_pages`.
Batch make_batch(const std::vector<std::pair<int64_t, int64_t>>& shape, int page_size, int num_pages, std::mt19937& rng) {
  Batch b;
  std::vector<int32_t> free(num_pages);
  std::iota(free.begin(), free.end(), 0);
  std::shuffle(free.begin(), free.end(), rng);
  b.pages.resize(shape.size());
  for (size_t s = 0; s < shape.size(); ++s) {
    const int64_t len = shape[s].first + shape[s].second;
    for (int64_t p = 0; p < (len + page_size - 1) / page_size; ++p) {
      DS_CHECK(!free.empty());
      b.pages[s].push_back(free.back());
      free.pop_back();
    }
  }
  for (size_t s = 0; s < shape.size(); ++s) b.seqs.push_back(SeqSlice{shape[s].first, shape[s].second, &b.pages[s]});
  return b;
}

// A cache [slots, D] holding random rows in every slot of the batch's contexts and NaN elsewhere.
Tensor make_cache(const Batch& b, int page_size, int num_pages, int64_t D, std::mt19937& rng) {
  Tensor cache = Tensor::empty({static_cast<int64_t>(num_pages) * page_size, D}, DType::kF32);
  std::fill(cache.f32(), cache.f32() + cache.numel(), NAN);
  Tensor r = randn({1, D}, rng);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (size_t s = 0; s < b.seqs.size(); ++s) {
    const int64_t len = b.seqs[s].start_pos + b.seqs[s].num_new;
    for (int64_t p = 0; p < len; ++p) {
      const int64_t slot = static_cast<int64_t>(b.pages[s][p / page_size]) * page_size + p % page_size;
      for (int64_t c = 0; c < D; ++c) {
        float v = round_bf16(nd(rng));
        cache.f32()[slot * D + c] = v == 0.0f ? 1e-3f : v;
      }
    }
  }
  return cache;
}

TEST_F(CudaOpsTest, StoreRowsAndGatherContext) {
  const int page_size = 64, num_pages = 40;
  for (int64_t D : {576, 80, 128}) {
    Batch b = make_batch({{0, 130}, {200, 1}, {63, 2}, {0, 1}, {500, 37}}, page_size, num_pages, rng_);
    AttnMetadata gm = build_attn_metadata(b.seqs, page_size, gpu());
    AttnMetadata cm = build_attn_metadata(b.seqs, page_size, cpu());
    Tensor cache = make_cache(b, page_size, num_pages, D, rng_);
    Tensor rows = randn({gm.num_tokens, D}, rng_);
    Tensor dcache = to_device(cache);
    gpu().store_rows(dcache, to_device(rows), gm.slot_mapping);
    Tensor ccache = cpu().upload(cache);
    cpu().store_rows(ccache, rows, cm.slot_mapping);
    expect_identical(to_host_f32(dcache), ccache, shape_name("store_rows", {D}));
    Tensor got = to_host_f32(gpu().gather_context(dcache, gm));
    Tensor want = cpu().gather_context(ccache, cm);
    expect_identical(got, want, shape_name("gather_context", {D}));
    for (int64_t i = 0; i < want.numel(); ++i) ASSERT_FALSE(std::isnan(want.f32()[i])) << "gathered an unused slot";
  }
}

// ---- V3.2 indexer ----

TEST_F(CudaOpsTest, IndexerTopk) {
  struct Case {
    std::vector<std::pair<int64_t, int64_t>> seqs;
    int64_t Hi, D;
    int topk;
  };
  const int page_size = 64;
  const std::vector<Case> cases{
      {{{0, 130}, {40, 3}}, 16, 32, 64},
      {{{2400, 2}, {0, 70}, {700, 1}}, 64, 128, 2048},
      {{{0, 200}}, 2, 32, 64},  // few heads: many exact-zero scores (ties)
      {{{90, 1}, {10, 1}}, 16, 32, 64},
      {{{4000, 1}, {0, 1}, {3000, 2}, {2047, 1}}, 64, 128, 2048},  // decode rows past top-k: the radix select
      {{{0, 300}}, 48, 64, 128},                                    // heads padded to the tile's 64
      {{{150, 2}}, 80, 64, 64},                                     // more heads than the tensor-core path takes
      {{{45000, 1}}, 64, 128, 2048},  // a row past the select's 40960 keys staged in shared memory
      // prefill rows of several sequences, counts not multiples of the multi-token kernel's 4, cached prefixes
      {{{100, 37}, {0, 9}, {2100, 70}, {5, 1}}, 64, 128, 2048},
      {{{0, 21}, {64, 11}}, 32, 64, 16},
  };
  // Modes: the tensor cores with several prefill rows a block; the same with 5 rows a launch (chunk boundaries
  // inside a block's rows); one row a block; CUDA cores.
  struct Mode {
    const char* name;
    bool mma, mt;
    const char* chunk_rows;
    bool wgmma = false;
    bool tma = false;
  };
  for (const Mode mode : {Mode{"mma-multi-token", true, true, "0"}, Mode{"mma-multi-token-chunk5", true, true, "5"},
                          Mode{"wgmma-multi-token", true, true, "0", true},
                          Mode{"wgmma-multi-token-chunk5", true, true, "5", true},
                          Mode{"wgmma-tma-multi-token", true, true, "0", true, true},
                          Mode{"wgmma-tma-multi-token-chunk5", true, true, "5", true, true}, Mode{"mma", true, false, "0"},
                          Mode{"cuda-core", false, false, "0"}})
    for (const Case& c : cases) {
      const bool mma = mode.mma;
      test::ScopedEnv env("DSERVE_INDEXER_MMA", mma ? "1" : "0");
      test::ScopedEnv env_mt("DSERVE_INDEXER_MT", mode.mt ? "1" : "0");
      test::ScopedEnv env_wgmma("DSERVE_INDEXER_WGMMA", mode.wgmma ? "1" : "0");
      test::ScopedEnv env_tma("DSERVE_INDEXER_TMA", mode.tma ? "1" : "0");
      test::ScopedEnv env_rows("DSERVE_INDEXER_CHUNK_ROWS", mode.chunk_rows);
      int64_t tokens = 0, max_len = 0;
      for (auto& s : c.seqs) tokens += s.second, max_len = std::max(max_len, s.first + s.second);
      const int num_pages = static_cast<int>(c.seqs.size() * ((max_len + page_size - 1) / page_size) + 2);
      Batch b = make_batch(c.seqs, page_size, num_pages, rng_);
      AttnMetadata gm = build_attn_metadata(b.seqs, page_size, gpu());
      AttnMetadata cm = build_attn_metadata(b.seqs, page_size, cpu());
      Tensor k = make_cache(b, page_size, num_pages, c.D, rng_);
      Tensor q = randn({tokens, c.Hi, c.D}, rng_), w = randn({tokens, c.Hi}, rng_, 1.0f, 0.5f);
      const float qs = 1.0f / std::sqrt(static_cast<float>(c.D)), ws = 1.0f / std::sqrt(static_cast<float>(c.Hi));
      Tensor got = cuda_download(gpu().indexer_topk(to_device(q), to_device(w), to_device(k), gm, c.topk, qs, ws));
      Tensor want = cpu().indexer_topk(q, w, k, cm, c.topk, qs, ws);
      // Exact scores in double for judging near-ties.
      const int32_t* pos = cm.positions.data_as<int32_t>();
      int64_t differ = 0, t = 0;
      for (size_t s = 0; s < b.seqs.size(); ++s)
        for (int64_t i = 0; i < b.seqs[s].num_new; ++i, ++t) {
          const int64_t n = pos[t] + 1, keep = std::min<int64_t>(c.topk, n);
          std::vector<double> score(n);
          for (int64_t j = 0; j < n; ++j) {
            const int64_t slot = static_cast<int64_t>(b.pages[s][j / page_size]) * page_size + j % page_size;
            double acc = 0;
            for (int64_t h = 0; h < c.Hi; ++h) {
              double d = 0;
              for (int64_t e = 0; e < c.D; ++e)
                d += double(q.f32()[(t * c.Hi + h) * c.D + e]) * k.f32()[slot * c.D + e];
              acc += double(w.f32()[t * c.Hi + h]) * ws * std::max(0.0, d * qs);
            }
            score[j] = acc;
          }
          const int32_t* g = got.data_as<int32_t>() + t * c.topk;
          const int32_t* cw = want.data_as<int32_t>() + t * c.topk;
          std::set<int32_t> chosen;
          for (int64_t j = 0; j < c.topk; ++j) {
            if (j >= keep) {
              ASSERT_EQ(g[j], -1) << "padding at " << j;
              ASSERT_EQ(cw[j], -1) << "cpu padding at " << j;
              continue;
            }
            ASSERT_TRUE(g[j] >= 0 && g[j] < n) << "token " << t << " picked " << g[j] << " of " << n;
            ASSERT_TRUE(j == 0 || g[j] > g[j - 1]) << "token " << t << ": positions not ascending at " << j;
            ASSERT_TRUE(j == 0 || cw[j] > cw[j - 1]) << "token " << t << ": cpu positions not ascending at " << j;
            chosen.insert(g[j]);
          }
          for (int64_t j = 0; j < keep; ++j) differ += chosen.count(cw[j]) == 0;
          double min_in = INFINITY, max_out = -INFINITY;
          for (int64_t j = 0; j < n; ++j) {
            if (chosen.count(static_cast<int32_t>(j)))
              min_in = std::min(min_in, score[j]);
            else
              max_out = std::max(max_out, score[j]);
          }
          EXPECT_GE(min_in, max_out - 1e-4) << "token " << t << ": a better position was left out";
        }
      std::printf("ERR indexer_topk %s Hi %lld D %lld topk %d: cpu picks the gpu left out %lld of %lld\n",
                  mode.name, static_cast<long long>(c.Hi), static_cast<long long>(c.D), c.topk,
                  static_cast<long long>(differ), static_cast<long long>(tokens * c.topk));
      EXPECT_LE(differ, tokens * c.topk / 100) << "more than 1% of the cpu's picks left out";
    }
}

// ---- MoE ----

TEST_F(CudaOpsTest, MoeRoute) {
  struct Case {
    const char* name;
    MoeRouting r;
    bool bias;
  };
  auto routing = [](MoeRouting::Method m, bool sig, int E, int K, int ng, int tg, bool norm, float scale) {
    MoeRouting r;
    r.method = m;
    r.sigmoid = sig;
    r.num_experts = E;
    r.top_k = K;
    r.n_group = ng;
    r.topk_group = tg;
    r.norm_topk_prob = norm;
    r.routed_scaling_factor = scale;
    return r;
  };
  using M = MoeRouting::Method;
  for (const Case& c : std::vector<Case>{
           {"v2-lite greedy softmax", kcases::routing_of(kbench::deepseek_v2_lite()), false},
           {"v2 group-limited softmax", routing(M::kGroupLimitedGreedy, false, 160, 6, 8, 3, false, 16.0f), false},
           {"v3 noaux_tc sigmoid", kcases::routing_of(kbench::deepseek_v3()), true},
           {"fixture noaux_tc", routing(M::kNoauxTc, true, 16, 4, 4, 2, true, 2.5f), true},
           {"fixture group-limited", routing(M::kGroupLimitedGreedy, false, 16, 4, 4, 2, false, 4.0f), false}}) {
    for (int64_t T : {1, 37, 300}) {
      // Continuous fp32 logits (as a GEMM gives): bf16-rounded ones tie exactly, and the CPU's partial_sort
      // leaves the order of ties unspecified.
      Tensor logits = Tensor::empty({T, c.r.num_experts}, DType::kF32);
      std::normal_distribution<float> nd(0.0f, 2.0f);
      for (int64_t i = 0; i < logits.numel(); ++i) logits.f32()[i] = nd(rng_);
      Tensor bias = c.bias ? randn({c.r.num_experts}, rng_, 0.05f) : Tensor();
      Tensor gi, gw, ci, cw;
      gpu().moe_route(cuda_upload(logits), c.bias ? cuda_upload(bias) : Tensor(), c.r, &gi, &gw);
      cpu().moe_route(logits, bias, c.r, &ci, &cw);
      Tensor hi = cuda_download(gi), hw = cuda_download(gw);
      int64_t id_mismatch = 0;
      for (int64_t i = 0; i < ci.numel(); ++i) id_mismatch += hi.data_as<int32_t>()[i] != ci.data_as<int32_t>()[i];
      std::printf("ERR moe_route %-28s T %lld: id mismatches %lld\n", c.name, static_cast<long long>(T),
                  static_cast<long long>(id_mismatch));
      EXPECT_EQ(id_mismatch, 0) << c.name;
      DS_EXPECT_CLOSE(hw, cw, 1e-5, 1e-5, std::string("moe_route weights ") + c.name);
    }
  }
  // Exact ties go to the lower expert index (and the lower group).
  MoeRouting r = routing(M::kNoauxTc, true, 16, 4, 4, 2, true, 1.0f);
  Tensor flat = Tensor::empty({1, 16}, DType::kF32);
  std::fill(flat.f32(), flat.f32() + 16, 0.25f);
  Tensor gi, gw;
  gpu().moe_route(cuda_upload(flat), Tensor(), r, &gi, &gw);
  Tensor hi = cuda_download(gi);
  EXPECT_EQ(std::vector<int32_t>(hi.data_as<int32_t>(), hi.data_as<int32_t>() + 4), (std::vector<int32_t>{0, 1, 2, 3}));
}

// The expert counts (SGLang's expert distribution recorder) against the CPU's, exactly: picks of [0, E) counted,
// other ids (fused shared experts, -1) not, only the first *real_rows rows where given, accumulated over calls.
TEST_F(CudaOpsTest, MoeCountExperts) {
  for (int E : {16, 64, 256}) {
    for (int64_t T : {1, 5, 300, 5000}) {
      const int W = 9;
      Tensor ids = Tensor::empty({T, W}, DType::kI32);
      std::uniform_int_distribution<int32_t> pick(-1, E + 1);
      for (int64_t i = 0; i < ids.numel(); ++i) ids.data_as<int32_t>()[i] = pick(rng_);
      for (int32_t real : {-1, 0, 3, static_cast<int32_t>(T) + 2}) {
        Tensor rows_h = Tensor::empty({1}, DType::kI32);
        rows_h.data_as<int32_t>()[0] = real;
        const Tensor rows_cpu = real >= 0 ? rows_h : Tensor(), rows_gpu = real >= 0 ? cuda_upload(rows_h) : Tensor();
        Tensor cc = Tensor::empty({E}, DType::kI32), gc = gpu().empty({E}, DType::kI32);
        cpu().zero_(cc);
        gpu().zero_(gc);
        const Tensor gids = cuda_upload(ids);
        for (int rep = 0; rep < 2; ++rep) {  // accumulates
          cpu().moe_count_experts(ids, E, rows_cpu, cc);
          gpu().moe_count_experts(gids, E, rows_gpu, gc);
        }
        Tensor hc = cuda_download(gc);
        const std::vector<int32_t> a(cc.data_as<int32_t>(), cc.data_as<int32_t>() + E),
            b(hc.data_as<int32_t>(), hc.data_as<int32_t>() + E);
        EXPECT_EQ(a, b) << "E " << E << " T " << T << " real " << real;
        int64_t total = 0;
        for (int32_t v : a) total += v;
        if (real == 0) EXPECT_EQ(total, 0);
        if (real < 0) EXPECT_GT(total, 0);
      }
    }
  }
}

// return_routed_experts' recording: the first k of each row's W ids into columns [column, column + k) of a wider
// buffer; the other columns and the rows past T keep what they held (random values on both sides, not zeros).
TEST_F(CudaOpsTest, MoeRecordIds) {
  for (int64_t T : {1, 7, 300, 5000}) {
    for (const auto [W, k, width, column] : std::vector<std::tuple<int, int, int64_t, int64_t>>{
             {8, 8, 8 * 61, 8 * 3}, {9, 8, 8 * 3, 8 * 2}, {6, 6, 6 * 27, 0}, {5, 4, 12, 8}}) {
      Tensor ids = Tensor::empty({T, W}, DType::kI32), out = Tensor::empty({T + 3, width}, DType::kI32);
      std::uniform_int_distribution<int32_t> pick(-1000, 1000);
      for (int64_t i = 0; i < ids.numel(); ++i) ids.data_as<int32_t>()[i] = pick(rng_);
      for (int64_t i = 0; i < out.numel(); ++i) out.data_as<int32_t>()[i] = pick(rng_);
      Tensor gout = cuda_upload(out);
      cpu().moe_record_ids(ids, k, column, out);
      gpu().moe_record_ids(cuda_upload(ids), k, column, gout);
      Tensor h = cuda_download(gout);
      const std::vector<int32_t> a(out.data_as<int32_t>(), out.data_as<int32_t>() + out.numel()),
          b(h.data_as<int32_t>(), h.data_as<int32_t>() + h.numel());
      EXPECT_EQ(a, b) << "T " << T << " W " << W << " k " << k << " column " << column;
      EXPECT_EQ(a[static_cast<size_t>(column)], ids.data_as<int32_t>()[0]);
    }
  }
}

TEST_F(CudaOpsTest, MoeExperts) {
  struct Case {
    int64_t T, d, inter;
    int E, K;
  };
  for (const Case& c : std::vector<Case>{{5, 2048, 1408, 16, 6}, {64, 192, 64, 16, 4}, {3, 7168, 256, 16, 8}, {1, 256, 96, 8, 2}, {40, 2048, 64, 64, 6}}) {
    std::vector<PreparedMlp> gexp, cexp;
    for (int e = 0; e < c.E; ++e) {
      LinearWeight g, u, dn;
      g.weight = randn({c.inter, c.d}, rng_, 0.03f);
      u.weight = randn({c.inter, c.d}, rng_, 0.03f);
      dn.weight = randn({c.d, c.inter}, rng_, 0.05f);
      cexp.push_back(cpu().prepare_mlp(g, u, dn));
      gexp.push_back(gpu().prepare_mlp(g, u, dn));
    }
    Tensor x = randn({c.T, c.d}, rng_);
    // Distinct experts per token, skewed towards low ids so some experts get several rows and some none.
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < c.T; ++t) {
      std::vector<int32_t> all(c.E);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end() - c.E / 4, rng_);
      ids.insert(ids.end(), all.begin(), all.begin() + c.K);
    }
    Tensor w = randn({c.T, c.K}, rng_, 0.2f, 0.5f);
    Tensor idt = i32_tensor(ids, {c.T, c.K});
    Tensor got = to_host_f32(gpu().moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), gexp));
    Tensor want = cpu().moe_experts(x, idt, w, cexp);
    DS_EXPECT_CLOSE(got, want, 2e-2, 1e-2, shape_name("moe_experts", {c.T, c.d, c.inter, c.E, c.K}));
  }
}

// ---- weights ----

TEST_F(CudaOpsTest, PrepareWeights) {
  // Block-FP8 with ragged edges ([300, 200] -> scales [3, 2]) dequantised to bf16.
  const int64_t out = 300, in = 200;
  Tensor w8 = Tensor::empty({out, in}, DType::kF8E4M3);
  std::normal_distribution<float> nd(0.0f, 100.0f);
  for (int64_t i = 0; i < w8.numel(); ++i) w8.data_as<uint8_t>()[i] = f32_to_fp8e4m3(nd(rng_));
  Tensor scale = randn({3, 2}, rng_, 1e-3f, 5e-3f);
  LinearWeight lw;
  lw.weight = w8;
  lw.scale_inv = scale;
  Tensor got = to_host_f32(gpu().prepare_linear(lw).weight);
  DS_EXPECT_CLOSE(got, cpu().prepare_linear(lw).weight, 4e-3, 4e-3, "prepare_linear fp8 300x200");
  // prepare_mlp stacks gate over up; prepare_absorbed splits and transposes kv_b_proj.
  LinearWeight g, u, d;
  g.weight = randn({64, 96}, rng_);
  u.weight = randn({64, 96}, rng_);
  d.weight = randn({96, 64}, rng_);
  PreparedMlp gm = gpu().prepare_mlp(g, u, d), cm = cpu().prepare_mlp(g, u, d);
  expect_identical(to_host_f32(gm.gate_up.weight), cm.gate_up.weight, "prepare_mlp gate_up");
  expect_identical(to_host_f32(gm.down.weight), cm.down.weight, "prepare_mlp down");
  LinearWeight kvb;
  kvb.weight = randn({4 * (32 + 48), 64}, rng_);
  Tensor gkc, gvc, ckc, cvc;
  gpu().prepare_absorbed(kvb, 4, 32, 48, &gkc, &gvc);
  cpu().prepare_absorbed(kvb, 4, 32, 48, &ckc, &cvc);
  expect_identical(to_host_f32(gkc), ckc, "prepare_absorbed w_kc");
  expect_identical(to_host_f32(gvc), cvc, "prepare_absorbed w_vc");
  // Params: F32 stays F32, BF16 stays BF16.
  Tensor p32 = randn({7}, rng_);
  EXPECT_EQ(gpu().prepare_param(p32).dtype(), DType::kF32);
  Tensor pb = Tensor::empty({7}, DType::kBF16);
  for (int i = 0; i < 7; ++i) pb.data_as<uint16_t>()[i] = f32_to_bf16(p32.f32()[i]);
  expect_identical(to_host_f32(gpu().prepare_param(pb)), p32, "prepare_param bf16");
}

// ---- output ----

TEST_F(CudaOpsTest, LogSoftmax) {
  for (auto [rows, n, t] : std::vector<std::tuple<int64_t, int64_t, DType>>{
           {3, 129280, DType::kF32}, {7, 1000, DType::kBF16}, {130, 1024, DType::kF32}, {1, 102400, DType::kF32}}) {
    Tensor z = randn({rows, n}, rng_, 3.0f);
    Tensor got = cuda_download(gpu().log_softmax(to_device(z, t)));
    DS_EXPECT_CLOSE(got, cpu().log_softmax(z), 2e-6, 2e-6, shape_name("log_softmax", {rows, n}));
  }
}

TEST_F(CudaOpsTest, Fill) {
  Tensor t = gpu().empty({5, 33}, DType::kBF16);
  gpu().fill(t, 1.5f);
  Tensor h = to_host_f32(t);
  for (int64_t i = 0; i < h.numel(); ++i) ASSERT_EQ(h.f32()[i], 1.5f);
  Tensor f = gpu().empty({9}, DType::kF32);
  gpu().fill(f, NAN);
  Tensor hf = cuda_download(f);
  for (int64_t i = 0; i < hf.numel(); ++i) ASSERT_TRUE(std::isnan(hf.f32()[i]));
}

}  // namespace
}  // namespace ds
