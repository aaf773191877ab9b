// CUDA-vs-CPU consistency of the MLA attention kernels (ops/cuda/attention.h, kernels/mla_*): absorbed
// decode form over a shuffled paged cache and MHA prefill form over gathered context rows, fed the same
// bf16-rounded random inputs as the fp32 CPU oracle. Unused cache pages, page tails past each context and
// the latent columns the MHA form must not read are NaN; outputs written through the kernel API start NaN.
// Error metric: max |gpu - cpu| / max |cpu| and ||gpu - cpu|| / ||cpu|| over the whole output; bound 2e-2
// and 1e-2 (bf16 output and bf16 P give ~2^-9 relative per term; measured values are printed as "ERR").
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/fp8_gemm.h"
#include "kernels/kv_fp8.h"
#include "kernels/mla_decode.h"
#include "kernels/mla_prefill.h"
#include "kernels/pdl_probe.h"
#include "ops/cuda/attention.h"
#include "ops/cuda/cuda_runtime.h"
#include "ops/cuda/gpu_test_util.h"
#include "ops/cuda/kernel_cases.h"
#include "ops/fp8.h"
#include "ops/ops.h"

namespace ds {
namespace {

constexpr double kMaxRelTol = 2e-2;
constexpr double kL2RelTol = 1e-2;

// Host F32 tensor of N(0, scale) values rounded to bf16, never exactly zero.
Tensor randn(Shape shape, std::mt19937& rng, float scale) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  std::normal_distribution<float> nd(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = round_bf16(nd(rng));
    t.f32()[i] = v == 0.0f ? scale * 1e-3f : v;
  }
  return t;
}

Tensor to_device_bf16(const Tensor& f32) {
  Tensor h = Tensor::empty(f32.shape(), DType::kBF16);
  for (int64_t i = 0; i < f32.numel(); ++i) h.data_as<uint16_t>()[i] = f32_to_bf16(f32.f32()[i]);
  return cuda_upload(h);
}

Tensor i32_tensor(const std::vector<int32_t>& v, Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kI32);
  std::copy(v.begin(), v.end(), t.data_as<int32_t>());
  return t;
}

struct Err {
  double max_rel = 0, l2_rel = 0;
  int64_t bad = 0;  // non-finite values in got
};

// got: bf16 device tensor; want: F32 host tensor of the same numel.
Err compare(const Tensor& got_dev, const Tensor& want) {
  Tensor got = to_f32(cuda_download(got_dev));
  EXPECT_EQ(got.numel(), want.numel());
  Err e;
  double max_abs = 0, max_ref = 0, d2 = 0, r2 = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.f32()[i], b = want.f32()[i];
    if (!std::isfinite(a)) {
      ++e.bad;
      continue;
    }
    max_abs = std::max(max_abs, std::fabs(a - b));
    max_ref = std::max(max_ref, std::fabs(b));
    d2 += (a - b) * (a - b);
    r2 += b * b;
  }
  e.max_rel = max_abs / std::max(max_ref, 1e-6);
  e.l2_rel = std::sqrt(d2) / std::max(std::sqrt(r2), 1e-6);
  return e;
}

void expect_close(const Tensor& got_dev, const Tensor& want, const std::string& what) {
  const Err e = compare(got_dev, want);
  std::printf("ERR %-44s max_rel %.3e l2_rel %.3e\n", what.c_str(), e.max_rel, e.l2_rel);
  EXPECT_EQ(e.bad, 0) << what;
  EXPECT_LE(e.max_rel, kMaxRelTol) << what;
  EXPECT_LE(e.l2_rel, kL2RelTol) << what;
}

// Log-sum-exps: -inf exactly where the oracle's is, else within bf16 inputs' reach of it.
void expect_lse_close(const Tensor& got_dev, const Tensor& want, const std::string& what) {
  Tensor got = cuda_download(got_dev);
  ASSERT_EQ(got.numel(), want.numel()) << what;
  double worst = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float a = got.f32()[i], b = want.f32()[i];
    if (std::isinf(b) || std::isinf(a) || std::isnan(a)) {
      bad += !(a == b);
      continue;
    }
    worst = std::max(worst, std::fabs(static_cast<double>(a) - b) / (1.0 + std::fabs(b)));
  }
  std::printf("ERR %-44s lse max_rel %.3e\n", what.c_str(), worst);
  EXPECT_EQ(bad, 0) << what << ": -inf / NaN where the oracle differs";
  EXPECT_LE(worst, 2e-2) << what;
}

// Paged batches over shuffled pages with spare ones (shared with dserve_kernel_bench).
using kcases::Batch;
using kcases::make_batch;

// Per token: min(k, pos + 1) distinct positions in [0, pos], -1 in the other entries, all shuffled.
Tensor make_topk(const Batch& b, int k, std::mt19937& rng) {
  const int T = b.host.num_tokens;
  std::vector<int32_t> v(static_cast<size_t>(T) * k, -1);
  for (int t = 0; t < T; ++t) {
    const int pos = b.host.positions.data_as<int32_t>()[t];
    std::vector<int32_t> cand(pos + 1);
    std::iota(cand.begin(), cand.end(), 0);
    std::shuffle(cand.begin(), cand.end(), rng);
    cand.resize(std::min<size_t>(cand.size(), k));
    cand.resize(k, -1);
    std::shuffle(cand.begin(), cand.end(), rng);
    std::copy(cand.begin(), cand.end(), v.begin() + static_cast<size_t>(t) * k);
  }
  return i32_tensor(v, {T, k});
}

std::vector<int> random_lens(int n, int lo, int hi, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<int> v(n);
  for (int& x : v) x = d(rng);
  return v;
}

// ---------------- absorbed (decode) form ----------------

struct AbsorbedCase {
  std::string name;
  int heads, head_dim, v_dim, page_size;
  std::vector<int> seq_lens, q_lens;  // q_lens empty: one token per sequence
  int topk_k = 0;
  float q_scale = 1.0f;
  int forced_splits = 0;  // > 0: also run the kernel API with exactly this many splits
};

struct AbsorbedInputs {
  Batch batch;
  Tensor q, cache, topk;        // host F32 / I32
  Tensor q_dev, cache_dev, topk_dev;
  float scale;
};

AbsorbedInputs make_absorbed(const AbsorbedCase& c, std::mt19937& rng) {
  AbsorbedInputs in;
  std::vector<int> q_lens = c.q_lens.empty() ? std::vector<int>(c.seq_lens.size(), 1) : c.q_lens;
  in.batch = make_batch(c.seq_lens, q_lens, c.page_size, rng);
  const Batch& b = in.batch;
  const int64_t T = b.host.num_tokens;
  in.q = randn({T, c.heads, c.head_dim}, rng, c.q_scale);
  // NaN everywhere, then random rows at the slots of real context positions.
  in.cache = Tensor::empty({b.slots, c.head_dim}, DType::kF32);
  std::fill(in.cache.f32(), in.cache.f32() + in.cache.numel(), NAN);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (size_t s = 0; s < b.seq_lens.size(); ++s)
    for (int pos = 0; pos < b.seq_lens[s]; ++pos) {
      const int64_t slot = static_cast<int64_t>(b.pages[s][pos / c.page_size]) * c.page_size + pos % c.page_size;
      for (int d = 0; d < c.head_dim; ++d) {
        const float v = round_bf16(nd(rng));
        in.cache.f32()[slot * c.head_dim + d] = v == 0.0f ? 1e-3f : v;
      }
    }
  in.q_dev = to_device_bf16(in.q);
  in.cache_dev = to_device_bf16(in.cache);
  if (c.topk_k > 0) {
    in.topk = make_topk(b, c.topk_k, rng);
    in.topk_dev = cuda_upload(in.topk);
  }
  in.scale = c.head_dim == 576 ? 0.1352338f : 0.125f;
  return in;
}

// Kernel API with exactly c.forced_splits splits into a NaN-filled output with one extra row: every element of
// the [T, H, v] output is written, nothing past it, and it matches `want`.
// before: enqueued right before the decode launch (a delayed writer of the cache).
// t16_cluster: MlaDecodeParams::t16_cluster (the transposed kernel's in-cluster split merge); t16_rows: its query
// rows a block (0: the launcher's choice).
void check_forced_splits(const AbsorbedCase& c, const AbsorbedInputs& in, const Tensor& cache_dev, int format,
                         const Tensor* topk_d, const Tensor& want, bool tma = false,
                         const std::function<void()>& before = nullptr, int t16_cluster = -1, int t16_rows = 0) {
  const int64_t T = in.batch.host.num_tokens, rows = T * c.heads;
  Tensor poison = Tensor::empty({rows + 1, c.v_dim}, DType::kF32);
  std::fill(poison.f32(), poison.f32() + poison.numel(), NAN);
  Tensor out = to_device_bf16(poison);
  const int splits = c.forced_splits;
  const size_t scratch_bytes = kernels::mla_decode_scratch_bytes(splits, static_cast<int>(T), c.heads);
  Tensor scratch = Tensor::empty({static_cast<int64_t>(std::max<size_t>(scratch_bytes, 1))}, DType::kU8, Device::kCuda);
  kernels::MlaDecodeParams p;
  p.q = in.q_dev.data();
  p.cache = cache_dev.data();
  p.cache_format = format;
  p.out = out.data();
  p.part_o = splits > 1 ? scratch.data_as<float>() : nullptr;
  p.part_lse = splits > 1 ? reinterpret_cast<float*>(scratch.data_as<uint8_t>() +
                                                     kernels::mla_decode_lse_offset(splits, static_cast<int>(T), c.heads))
                          : nullptr;
  const AttnMetadata& m = in.batch.dev;
  p.q_starts = m.q_starts.data_as<int32_t>();
  p.seq_lens = m.seq_lens.data_as<int32_t>();
  p.positions = m.positions.data_as<int32_t>();
  p.block_table = m.block_table.data_as<int32_t>();
  p.topk = topk_d ? topk_d->data_as<int32_t>() : nullptr;
  p.num_seqs = m.num_seqs;
  p.num_tokens = static_cast<int>(T);
  p.num_heads = c.heads;
  p.head_dim = c.head_dim;
  p.v_dim = c.v_dim;
  p.num_slots = in.batch.slots;
  p.max_pages = static_cast<int>(m.block_table.dim(1));
  p.page_size = m.page_size;
  p.topk_k = c.topk_k;
  p.use_tma = tma;
  p.max_q_len = m.max_q_len;
  p.num_splits = splits;
  p.plan_context = 1;  // a short plan: one token per sequence and <= 16 heads take the mma.sync kernel here
  p.scale = in.scale;
  p.t16_cluster = t16_cluster;
  p.t16_rows = t16_rows;
  if (before) before();
  DS_CUDA_CHECK(kernels::launch_mla_decode(p, cuda_stream()));
  Tensor all = to_f32(cuda_download(out));
  for (int64_t i = rows * c.v_dim; i < all.numel(); ++i) ASSERT_TRUE(std::isnan(all.f32()[i])) << "wrote past the output";
  expect_close(out.reshape({rows + 1, c.v_dim}).rows(0, rows).reshape({T, c.heads, c.v_dim}), want,
               "absorbed " + c.name + (format ? " packed" : "") + (tma ? " tma" : " cp.async") +
                   " splits=" + std::to_string(splits) + " cluster=" + std::to_string(t16_cluster) +
                   " rows=" + std::to_string(t16_rows));
}

class MlaAbsorbedGpu : public ::testing::TestWithParam<AbsorbedCase> {};

TEST_P(MlaAbsorbedGpu, MatchesCpu) {
  const AbsorbedCase& c = GetParam();
  init_cuda_device(0);
  std::mt19937 rng(std::hash<std::string>()(c.name) & 0xffffffu);
  AbsorbedInputs in = make_absorbed(c, rng);
  const Tensor* topk_h = c.topk_k > 0 ? &in.topk : nullptr;
  const Tensor* topk_d = c.topk_k > 0 ? &in.topk_dev : nullptr;
  auto cpu = make_cpu_ops();
  Tensor want = cpu->mla_attention_absorbed(in.q, in.cache, c.v_dim, in.batch.host, in.scale, topk_h);

  Tensor got = cuda_mla_attention_absorbed(in.q_dev, in.cache_dev, c.v_dim, in.batch.dev, in.scale, topk_d,
                                           cuda_stream());
  ASSERT_EQ(got.shape(), want.shape());
  expect_close(got, want, "absorbed " + c.name);

  if (c.forced_splits > 0) {
    // Kernel API with a fixed split count, with per-row cp.async loads (<= 16 rows: the mma.sync kernel) and
    // with tensor-map loads (<= 16 rows: the transposed kernel).
    check_forced_splits(c, in, in.cache_dev, kernels::kKvBf16, topk_d, want);
    check_forced_splits(c, in, in.cache_dev, kernels::kKvBf16, topk_d, want, true);
    // The transposed kernel without and with each in-cluster merge that divides the splits (a cluster of every
    // split writes the output itself; smaller ones leave fewer partials to the combine).
    check_forced_splits(c, in, in.cache_dev, kernels::kKvBf16, topk_d, want, true, nullptr, 0);
    // ... and with 8 query rows a block (no cluster merge; where a sequence has more than 8 rows, two blocks).
    check_forced_splits(c, in, in.cache_dev, kernels::kKvBf16, topk_d, want, true, nullptr, 0, 8);
    for (int cl : {2, 4, 8, 16})
      if (c.forced_splits % cl == 0)
        check_forced_splits(c, in, in.cache_dev, kernels::kKvBf16, topk_d, want, true, nullptr, cl);
  }
}

std::vector<AbsorbedCase> absorbed_cases() {
  std::mt19937 rng(7);
  std::vector<AbsorbedCase> v;
  v.push_back({"lite_decode_b8", 16, 576, 512, 64, {1, 5, 63, 64, 65, 127, 200, 333}, {}, 0, 1.0f, 3});
  v.push_back({"v3_decode_b4", 128, 576, 512, 64, {1, 64, 129, 1000}, {}, 0, 1.0f, 2});
  v.push_back({"v3_long_b1", 128, 576, 512, 64, {5000}, {}, 0, 1.0f, 1});
  v.push_back({"lite_decode_b64", 16, 576, 512, 64, random_lens(64, 1, 600, rng), {}, 0, 1.0f, 0});
  v.push_back({"v3_decode_b64", 128, 576, 512, 64, random_lens(64, 1, 300, rng), {}, 0, 1.0f, 0});
  v.push_back({"lite_multi_token", 16, 576, 512, 64, {70, 130, 400, 3, 64}, {1, 2, 3, 3, 4}, 0, 1.0f, 4});
  v.push_back({"v3_multi_token", 128, 576, 512, 64, {100, 777}, {3, 2}, 0, 1.0f, 3});
  v.push_back({"v3_chunk_absorbed", 128, 576, 512, 64, {300}, {70}, 0, 1.0f, 0});
  v.push_back({"v3_topk", 128, 576, 512, 64, {300, 2000, 50}, {1, 2, 1}, 128, 1.0f, 2});
  v.push_back({"lite_topk_short", 16, 576, 512, 64, {20, 100}, {2, 1}, 64, 1.0f, 0});
  v.push_back({"v3_long_topk", 128, 576, 512, 64, {5000}, {}, 2048, 1.0f, 5});
  v.push_back({"lite_page16", 16, 576, 512, 16, {100, 33, 1}, {1, 2, 1}, 0, 1.0f, 2});
  v.push_back({"v3_page128", 128, 576, 512, 128, {300, 129, 1, 1000}, {1, 2, 1, 1}, 0, 1.0f, 2});
  v.push_back({"v3_sharp", 128, 576, 512, 64, {3000}, {}, 0, 4.0f, 3});
  // One new token and <= 16 heads: the mma.sync kernel (mla_decode_m16.cu) with and without splits.
  v.push_back({"m16_long_b1", 16, 576, 512, 64, {20000}, {}, 0, 1.0f, 7});
  v.push_back({"m16_h8_b5", 8, 576, 512, 64, {1, 31, 32, 33, 300}, {}, 0, 1.0f, 2});
  v.push_back({"m16_h1_page16", 1, 576, 512, 16, {5, 100, 64}, {}, 0, 1.0f, 3});
  v.push_back({"m16_h13_page128", 13, 576, 512, 128, {129, 1000}, {}, 0, 1.0f, 4});
  v.push_back({"m16_sharp", 16, 576, 512, 64, {3000, 17}, {}, 0, 4.0f, 1});
  // Several tokens whose (token, head) rows still fit 16: the transposed kernel's per-column causal ends.
  v.push_back({"t16_h4_multi_token", 4, 576, 512, 64, {70, 130, 400, 3, 64}, {1, 2, 3, 3, 4}, 0, 1.0f, 5});
  v.push_back({"t16_h5_page128", 5, 576, 512, 128, {129, 1000, 2}, {3, 1, 2}, 0, 2.0f, 9});
  v.push_back({"t16_h16_long_sharp", 16, 576, 512, 64, {33000}, {}, 0, 4.0f, 128});
  v.push_back({"t16_h3_multi_cluster", 3, 576, 512, 64, {700, 130, 2000}, {2, 5, 1}, 0, 1.0f, 8});
  v.push_back({"fixture_dims", 4, 80, 64, 64, {1, 17, 90}, {1, 3, 2}, 0, 1.0f, 0});
  v.push_back({"fixture_dims_topk", 4, 80, 64, 64, {1, 17, 90}, {1, 3, 2}, 8, 1.0f, 0});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, MlaAbsorbedGpu, ::testing::ValuesIn(absorbed_cases()),
                         [](const ::testing::TestParamInfo<AbsorbedCase>& i) { return i.param.name; });

// The transposed kernel loads a split's first two tiles before its PDL wait only when they hold no new row (pdl.cuh's
// contract): here the previous kernel (a PDL writer that lets the decode start, spins 30 us, then writes the cache)
// holds back the new rows, whose cache bytes are NaN until then, so a tile with new rows read before the wait would
// turn its split's output into NaN. One token per sequence (the new row in a split's first or second tile, or in a
// later one; with 4 splits the launcher's in-cluster merge), and sequences of 2-3 new tokens over 4 heads (rows
// straddling a tile edge).
TEST(MlaDecodeT16, TilesWithNewRowsWaitForTheirWriter) {
  init_cuda_device(0);
  for (const AbsorbedCase& c : {AbsorbedCase{"t16_new_rows_b3", 16, 576, 512, 64, {288, 70, 129}, {}, 0, 1.0f, 5},
                                AbsorbedCase{"t16_new_rows_one_split", 16, 576, 512, 64, {200, 64}, {}, 0, 1.0f, 1},
                                AbsorbedCase{"t16_new_rows_cluster", 16, 576, 512, 64, {300, 129}, {}, 0, 1.0f, 4},
                                AbsorbedCase{"t16_new_rows_multi", 4, 576, 512, 64, {66, 130, 300}, {3, 2, 3}, 0,
                                             1.0f, 3}}) {
    std::mt19937 rng(std::hash<std::string>()(c.name) & 0xffffffu);
    AbsorbedInputs in = make_absorbed(c, rng);
    auto cpu = make_cpu_ops();
    Tensor want = cpu->mla_attention_absorbed(in.q, in.cache, c.v_dim, in.batch.host, in.scale, nullptr);
    // The cache as the decode finds it: the new tokens' rows NaN.
    Tensor stale = Tensor::empty(in.cache.shape(), DType::kF32);
    std::copy(in.cache.f32(), in.cache.f32() + in.cache.numel(), stale.f32());
    const Batch& b = in.batch;
    std::vector<int> q_lens = c.q_lens.empty() ? std::vector<int>(c.seq_lens.size(), 1) : c.q_lens;
    for (size_t s = 0; s < b.seq_lens.size(); ++s)
      for (int pos = b.seq_lens[s] - q_lens[s]; pos < b.seq_lens[s]; ++pos) {
        const int64_t slot = static_cast<int64_t>(b.pages[s][pos / c.page_size]) * c.page_size + pos % c.page_size;
        std::fill(stale.f32() + slot * c.head_dim, stale.f32() + (slot + 1) * c.head_dim, NAN);
      }
    // 16 query rows a block (the launcher's choice here), then 8 without a cluster merge.
    for (int rows : {0, 8}) {
      Tensor cache_dev = to_device_bf16(stale);
      check_forced_splits(
          c, in, cache_dev, kernels::kKvBf16, nullptr, want, true,
          [&] {
            DS_CUDA_CHECK(kernels::launch_pdl_delayed_copy(cache_dev.data(), in.cache_dev.data(), cache_dev.nbytes(),
                                                           30000, cuda_stream()));
          },
          rows == 8 ? 0 : -1, rows);
    }
  }
}

// The transposed kernel's rows a block: 16 under a cluster merge whatever is asked, the forced 8 / 16 otherwise, and
// by default 8 where the blocks fit one wave (unless DSERVE_MLA_T8=0, read once; not set by the GPU suite).
TEST(MlaDecodeT16, RowsABlock) {
  init_cuda_device(0);
  kernels::MlaDecodeParams p;
  p.num_heads = 16;
  p.max_q_len = 1;
  p.num_seqs = 1;
  p.num_tokens = 1;
  p.num_splits = 5;
  EXPECT_EQ(kernels::mla_decode_t16_rows(p, 4), 16);
  p.t16_rows = 8;
  EXPECT_EQ(kernels::mla_decode_t16_rows(p, 4), 16);
  EXPECT_EQ(kernels::mla_decode_t16_rows(p, 1), 8);
  p.t16_rows = 16;
  EXPECT_EQ(kernels::mla_decode_t16_rows(p, 1), 16);
  p.t16_rows = 0;
  const char* t8 = std::getenv("DSERVE_MLA_T8");
  const bool on = !(t8 && std::string(t8) == "0");
  EXPECT_EQ(kernels::mla_decode_t16_rows(p, 1), on ? 8 : 16);
  p.num_splits = 128;  // 256 blocks of 8 rows: more than one wave on any current GPU
  EXPECT_EQ(kernels::mla_decode_t16_rows(p, 1), 16);
}

// The split combine fused with the W_UV product (cuda_mla_attention_absorbed_vc): decode-sized split steps come
// back fused and match the CPU's attention followed by bmm_heads; one token over the fused kernel's limit, and a
// context short enough for one split, come back unfused (the attention alone).
TEST(MlaAbsorbedVc, FusedCombineMatchesAttentionThenProduct) {
  struct VcCase {
    AbsorbedCase c;
    bool expect_fused;
  };
  init_cuda_device(0);
  auto cpu = make_cpu_ops();
  std::vector<int> four(4), five(5);
  std::mt19937 lr(11);
  for (int& x : four) x = std::uniform_int_distribution<int>(1, 3000)(lr);
  for (int& x : five) x = std::uniform_int_distribution<int>(1, 3000)(lr);
  for (const VcCase& vcase : {VcCase{{"vc_lite_b1", 16, 576, 512, 64, {3000}, {}}, true},
                              VcCase{{"vc_lite_b1_ctx300", 16, 576, 512, 64, {300}, {}}, true},
                              VcCase{{"vc_v3_b1_ctx300", 128, 576, 512, 64, {300}, {}}, true},
                              VcCase{{"vc_lite_b4", 16, 576, 512, 64, four, {}}, true},
                              VcCase{{"vc_v3_b3", 128, 576, 512, 64, {700, 65, 2000}, {}}, true},
                              VcCase{{"vc_lite_sharp", 16, 576, 512, 64, {5000, 64}, {}, 0, 4.0f}, true},
                              VcCase{{"vc_lite_b5", 16, 576, 512, 64, five, {}}, false},
                              VcCase{{"vc_lite_short", 16, 576, 512, 64, {10}, {}}, false}}) {
    const AbsorbedCase& c = vcase.c;
    std::mt19937 rng(std::hash<std::string>()(c.name) & 0xffffffu);
    AbsorbedInputs in = make_absorbed(c, rng);
    Tensor w_vc = randn({c.heads, c.v_dim, 128}, rng, 0.05f);
    Tensor want_lat = cpu->mla_attention_absorbed(in.q, in.cache, c.v_dim, in.batch.host, in.scale, nullptr);
    bool fused = false;
    Tensor got = cuda_mla_attention_absorbed_vc(in.q_dev, in.cache_dev, c.v_dim, in.batch.dev, in.scale, nullptr,
                                                to_device_bf16(w_vc), &fused, cuda_stream());
    EXPECT_EQ(fused, vcase.expect_fused) << c.name;
    if (fused) {
      Tensor want = cpu->bmm_heads(want_lat, w_vc);
      ASSERT_EQ(got.shape(), want.shape());
      expect_close(got, want, "absorbed+w_vc " + c.name);
    } else {
      ASSERT_EQ(got.shape(), want_lat.shape());
      expect_close(got, want_lat, "absorbed (unfused) " + c.name);
    }
  }
}

// The combine + W_UV oracle in double: row r = t * H + h merges the splits [0, splits_of(r)) of (o, lse) whose
// log-sum-exp is finite, then multiplies by w_vc[h]. -> [T, H, V]
Tensor combine_vc_reference(const Tensor& o, const Tensor& lse, const Tensor& w_vc, int T,
                            const std::function<int(int64_t)>& splits_of) {
  const int64_t H = w_vc.dim(0), D = w_vc.dim(1), V = w_vc.dim(2), rows = T * H;
  Tensor want = Tensor::empty({T, H, V}, DType::kF32);
  for (int64_t r = 0; r < rows; ++r) {
    const int n = splits_of(r);
    double mx = -INFINITY, sum = 0;
    for (int s = 0; s < n; ++s) mx = std::max(mx, double{lse.f32()[s * rows + r]});
    std::vector<double> merged(D, 0.0);
    for (int s = 0; s < n; ++s) {
      const float l = lse.f32()[s * rows + r];
      if (l == -INFINITY) continue;
      const double wt = std::exp2(l - mx);
      sum += wt;
      for (int64_t k = 0; k < D; ++k) merged[k] += wt * o.f32()[(s * rows + r) * D + k];
    }
    const int64_t h = r % H;
    for (int64_t c = 0; c < V; ++c) {
      double acc = 0;
      for (int64_t k = 0; k < D; ++k) acc += merged[k] / sum * w_vc.f32()[(h * D + k) * V + c];
      want.f32()[r * V + c] = static_cast<float>(acc);
    }
  }
  return want;
}

// launch_mla_combine_vc on (o, lse, w_vc) with `c`'s positions / seq_lens (if any) into a NaN-poisoned output one
// row longer than needed, which must stay NaN; compared with the oracle.
void check_combine_vc(const Tensor& o, const Tensor& lse, const Tensor& w_vc, int T, kernels::MlaCombineVcParams c,
                      const Tensor& want, const std::string& name) {
  const int64_t H = w_vc.dim(0), V = w_vc.dim(2), rows = T * H;
  Tensor o_dev = cuda_upload(o), lse_dev = cuda_upload(lse), w_dev = to_device_bf16(w_vc);
  Tensor poison = Tensor::empty({rows + 1, V}, DType::kF32);
  std::fill(poison.f32(), poison.f32() + poison.numel(), NAN);
  Tensor out = to_device_bf16(poison);
  c.part_o = o_dev.data_as<float>();
  c.part_lse = lse_dev.data_as<float>();
  c.w_vc = w_dev.data();
  c.out = out.data();
  c.tokens = T;
  c.heads = static_cast<int>(H);
  c.splits = static_cast<int>(o.dim(0));
  c.v = static_cast<int>(V);
  ASSERT_EQ(kernels::launch_mla_combine_vc(c, cuda_stream()), cudaSuccess) << name;
  Tensor all = to_f32(cuda_download(out));
  for (int64_t i = rows * V; i < all.numel(); ++i) ASSERT_TRUE(std::isnan(all.f32()[i])) << "wrote past " << name;
  expect_close(out.reshape({rows + 1, V}).rows(0, rows).reshape({T, H, V}), want, name);
}

// The fused combine kernel alone over split results made here: random log-sum-exps with one split of every row
// empty (log-sum-exp -inf, O rows NaN: never written), against the merge and W_UV product in double; one to four
// tokens with few splits (the one-round merges: up to 8 splits for 1-2 tokens, 6 for 3-4) and past them (the
// general merge).
TEST(MlaAbsorbedVc, CombineKernelSkipsEmptySplits) {
  init_cuda_device(0);
  constexpr int H = 16, D = kernels::kMlaValueDim, V = 64;
  std::mt19937 rng(23);
  for (int T : {1, 2, 3, 4})
    for (int S : {2, 5, 6, 7, 8, 9, 40}) {
      const int64_t rows = int64_t{T} * H;
      Tensor o = randn({S, rows, D}, rng, 1.0f), lse = randn({S, rows}, rng, 3.0f);
      Tensor w_vc = randn({H, D, V}, rng, 0.05f);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t empty = (r * 7 + 1) % S;
        lse.f32()[empty * rows + r] = -INFINITY;
        std::fill(o.f32() + (empty * rows + r) * D, o.f32() + (empty * rows + r + 1) * D, NAN);
      }
      const Tensor want = combine_vc_reference(o, lse, w_vc, T, [&](int64_t) { return S; });
      check_combine_vc(o, lse, w_vc, T, {}, want, "combine_vc T " + std::to_string(T) + " splits " + std::to_string(S));
    }
}

// With the step's positions the combine counts each token's non-empty splits itself (a CUDA graph's plan is made for
// a longer context than most steps have): splits at or past every token's count hold finite garbage, which must not
// be read; a token's empty splits below another token's count hold what the decode kernels leave (-inf, O never
// written: NaN). Counts past the one-round limit take the general merge. (A plan whose splits all fit one round
// is merged without counting: the {5, ...} step.)
TEST(MlaAbsorbedVc, CombineKernelCountsActiveSplits) {
  init_cuda_device(0);
  constexpr int H = 16, D = kernels::kMlaValueDim, V = 64;
  std::mt19937 rng(29);
  struct Step {
    int splits;
    std::vector<int> context;  // per token: kv_end = min(position + 1, seq_len)
  };
  const std::vector<Step> steps = {{64, {300}},          {64, {64}},          {64, {1}},
                                   {64, {4096}},         {128, {520, 100}},   {64, {2000, 9}},
                                   {5, {288, 257, 200}}, {64, {512, 65, 1, 300}}, {128, {33000, 64, 640, 3}}};
  for (const Step& st : steps) {
    const int T = static_cast<int>(st.context.size()), S = st.splits;
    std::string name = "combine_vc counted, splits " + std::to_string(S) + " contexts";
    for (int c : st.context) {
      name += ' ';
      name += std::to_string(c);
    }
    const int64_t rows = int64_t{T} * H;
    std::vector<int> active(T);
    int lim = 0;
    for (int t = 0; t < T; ++t) lim = std::max(lim, active[t] = kernels::mla_decode_active_splits(st.context[t], S));
    const bool one_round = lim <= (T <= 2 ? 8 : 6);
    Tensor o = randn({S, rows, D}, rng, 1.0f), lse = randn({S, rows}, rng, 3.0f);
    Tensor w_vc = randn({H, D, V}, rng, 0.05f);
    for (int64_t r = 0; r < rows; ++r)
      for (int s = active[r / H]; s < S; ++s) {
        if (one_round && s >= lim) continue;  // garbage the kernel must not read
        lse.f32()[s * rows + r] = -INFINITY;
        std::fill(o.f32() + (s * rows + r) * D, o.f32() + (s * rows + r + 1) * D, NAN);
      }
    const Tensor want = combine_vc_reference(o, lse, w_vc, T, [&](int64_t r) { return active[r / H]; });
    // positions / seq_lens: even tokens end by their position, odd ones by their sequence length.
    Tensor pos = Tensor::empty({T}, DType::kI32), lens = Tensor::empty({T}, DType::kI32);
    for (int t = 0; t < T; ++t) {
      pos.data_as<int32_t>()[t] = t % 2 ? st.context[t] + 40 : st.context[t] - 1;
      lens.data_as<int32_t>()[t] = t % 2 ? st.context[t] : st.context[t] + 7;
    }
    Tensor pos_dev = cuda_upload(pos), lens_dev = cuda_upload(lens);
    kernels::MlaCombineVcParams c;
    c.positions = pos_dev.data_as<int32_t>();
    c.seq_lens = lens_dev.data_as<int32_t>();
    check_combine_vc(o, lse, w_vc, T, c, want, name + (one_round ? " (one round)" : " (general)"));
  }
}

// The combine + W_UV kernel making its output's block-FP8 quantization for an FP8 o_proj (MlaCombineVcParams::q, a
// cluster launch): the bf16 output bit for bit the plain launch's, the e4m3 bytes and scales bit for bit what
// launch_fp8_quant_act makes from that output (plain and ue8m0 scales), nothing written past T rows (0xff-poisoned
// buffers one row longer). V = 128 (DeepSeek's v_head_dim): four blocks of 32 columns a 128-group; 16 and 128 heads
// (the op takes it at 16 only, the kernel serves both), 1-4 tokens, one-round and general merges.
TEST(MlaAbsorbedVc, CombineKernelQuantizesForFp8) {
  init_cuda_device(0);
  constexpr int D = kernels::kMlaValueDim, V = 128;
  std::mt19937 rng(31);
  cudaStream_t s = cuda_stream();
  for (int H : {16, 128})
    for (int T : {1, 2, 3, 4})
      for (int S : {5, 40})
        for (bool ue8m0 : {false, true}) {
          const int64_t K = int64_t{H} * V, G = K / 128;
          const std::string name = "combine_vc quantized H " + std::to_string(H) + " T " + std::to_string(T) +
                                   " splits " + std::to_string(S) + (ue8m0 ? " ue8m0" : "");
          const int64_t rows = int64_t{T} * H;
          Tensor o = randn({S, rows, D}, rng, 1.0f), lse = randn({S, rows}, rng, 3.0f);
          Tensor w_vc = randn({H, D, V}, rng, 0.05f);
          Tensor o_dev = cuda_upload(o), lse_dev = cuda_upload(lse), w_dev = to_device_bf16(w_vc);
          kernels::MlaCombineVcParams c;
          c.part_o = o_dev.data_as<float>();
          c.part_lse = lse_dev.data_as<float>();
          c.w_vc = w_dev.data();
          c.tokens = T;
          c.heads = H;
          c.splits = S;
          c.v = V;
          Tensor plain = Tensor::empty({T, K}, DType::kBF16, Device::kCuda);
          c.out = plain.data();
          ASSERT_EQ(kernels::launch_mla_combine_vc(c, s), cudaSuccess) << name;
          Tensor out = Tensor::empty({T, K}, DType::kBF16, Device::kCuda);
          Tensor q = Tensor::empty({T + 1, K}, DType::kF8E4M3, Device::kCuda);
          Tensor sc = Tensor::empty({T + 1, G}, DType::kF32, Device::kCuda);
          ASSERT_EQ(cudaMemsetAsync(q.data(), 0xff, q.nbytes(), s), cudaSuccess);
          ASSERT_EQ(cudaMemsetAsync(sc.data(), 0xff, sc.nbytes(), s), cudaSuccess);
          c.out = out.data();
          c.q = q.data_as<uint8_t>();
          c.q_scales = sc.data_as<float>();
          c.q_ue8m0 = ue8m0;
          ASSERT_EQ(kernels::launch_mla_combine_vc(c, s), cudaSuccess) << name;
          // The reference quantization of the plain launch's output.
          Tensor q_ref, s_ref;
          ASSERT_EQ(test::quant_act(plain, ue8m0, s, &q_ref, &s_ref), cudaSuccess) << name;
          const Tensor h_plain = cuda_download(plain), h_out = cuda_download(out);
          const Tensor h_q = cuda_download(q), h_s = cuda_download(sc);
          const Tensor h_qref = cuda_download(q_ref), h_sref = cuda_download(s_ref);
          EXPECT_TRUE(test::same_bits(h_out, h_plain)) << name << ": bf16 output differs";
          EXPECT_TRUE(test::same_bits(h_q.rows(0, T), h_qref)) << name << ": e4m3 bytes differ";
          EXPECT_TRUE(test::same_bits(h_s.rows(0, T), h_sref)) << name << ": scales differ";
          const uint8_t* qb = static_cast<const uint8_t*>(h_q.data());
          for (int64_t i = T * K; i < (T + 1) * K; ++i) ASSERT_EQ(qb[i], 0xff) << "wrote past " << name;
          const uint8_t* sb = static_cast<const uint8_t*>(h_s.data());
          for (int64_t i = T * G * 4; i < (T + 1) * G * 4; ++i) ASSERT_EQ(sb[i], 0xff) << "scale past " << name;
          // Not all zero: the test would pass on a kernel that writes the reference's zeros of an empty output.
          int nonzero = 0;
          for (int64_t i = 0; i < T * K; ++i) nonzero += (qb[i] & 0x7f) != 0;
          EXPECT_GT(nonzero, T * K / 2) << name;
        }
  // A launch that cannot quantize (v not a multiple of 128) is refused, not run half-way.
  kernels::MlaCombineVcParams bad;
  bad.part_o = bad.part_lse = reinterpret_cast<const float*>(16);
  bad.w_vc = reinterpret_cast<const void*>(16);
  bad.out = reinterpret_cast<void*>(16);
  bad.tokens = 1;
  bad.heads = 16;
  bad.splits = 5;
  bad.v = 64;
  bad.q = reinterpret_cast<uint8_t*>(16);
  bad.q_scales = reinterpret_cast<float*>(16);
  EXPECT_EQ(kernels::launch_mla_combine_vc(bad, s), cudaErrorInvalidValue);
}

// The op the model calls before o_proj (Ops::mla_attention_absorbed_v_q) in native FP8 mode: where the combine and
// W_UV run fused (decode sizes) it also hands back o's quantization for a block-FP8 o_proj, and o plus
// linear_q(o, xq, o_proj) are bit for bit the plain ops' (mla_attention_absorbed_v, linear); unfused sizes, more
// combine blocks than SMs (V3's 128 heads: 512), a bf16 o_proj and DSERVE_MLA_VC_QUANT=0 make none. V2-Lite's 16
// heads, 1-4 tokens and an unfused 5; V3's 128.
TEST(MlaAbsorbedVc, QuantizedOutputFeedsFp8OProj) {
  init_cuda_device(0);
  std::unique_ptr<Ops> ops, off;
  {
    const test::ScopedEnv native("DSERVE_FP8_NATIVE", "1");  // read when a backend is made
    ops = make_cuda_ops(0);
    const test::ScopedEnv no("DSERVE_MLA_VC_QUANT", "0");
    off = make_cuda_ops(0);
  }
  std::mt19937 lr(13);
  std::vector<int> four(4), five(5);
  for (int& x : four) x = std::uniform_int_distribution<int>(1, 3000)(lr);
  for (int& x : five) x = std::uniform_int_distribution<int>(1, 3000)(lr);
  const int64_t d = 256, V = 128;  // o_proj [d, H * V]
  struct OCase {
    AbsorbedCase c;
    bool made;
  };
  for (const OCase& oc : {OCase{{"o_lite_b1", 16, 576, 512, 64, {3000}, {}}, true},
                          OCase{{"o_lite_b4", 16, 576, 512, 64, four, {}}, true},
                          OCase{{"o_v3_b3", 128, 576, 512, 64, {700, 65, 2000}, {}}, false},
                          OCase{{"o_lite_b5", 16, 576, 512, 64, five, {}}, false}}) {
    const AbsorbedCase& c = oc.c;
    std::mt19937 rng(std::hash<std::string>()(c.name) & 0xffffffu);
    AbsorbedInputs in = make_absorbed(c, rng);
    const Tensor w_vc = to_device_bf16(randn({c.heads, c.v_dim, V}, rng, 0.05f));
    const Tensor wo_host = randn({d, c.heads * V}, rng, 0.05f);
    const LinearWeight wo = ops->prepare_linear(quantize_weight_fp8(wo_host, 128, 128, false));
    ASSERT_EQ(wo.weight.dtype(), DType::kF8E4M3) << c.name;
    const int64_t T = in.batch.host.num_tokens;
    Fp8Act xq;
    const Tensor o = ops->mla_attention_absorbed_v_q(in.q_dev, in.cache_dev, c.v_dim, in.batch.dev, in.scale,
                                                     nullptr, w_vc, wo, &xq);
    const Tensor o_plain =
        ops->mla_attention_absorbed_v(in.q_dev, in.cache_dev, c.v_dim, in.batch.dev, in.scale, nullptr, w_vc);
    EXPECT_EQ(xq.defined(), oc.made) << c.name;
    EXPECT_TRUE(test::same_device_bits(o, o_plain)) << c.name << ": attention output";
    const int64_t K = c.heads * V;
    EXPECT_TRUE(test::same_device_bits(ops->linear_q(o.reshape({T, K}), xq, wo),
                                       ops->linear(o_plain.reshape({T, K}), wo)))
        << c.name << ": o_proj";
    // A bf16 o_proj, and the switch off: no quantization made.
    LinearWeight bf16_host;
    bf16_host.weight = Tensor::empty(wo_host.shape(), DType::kBF16);
    uint16_t* hb = bf16_host.weight.data_as<uint16_t>();
    for (int64_t i = 0; i < wo_host.numel(); ++i) hb[i] = f32_to_bf16(wo_host.f32()[i]);
    const LinearWeight wo_bf16 = ops->prepare_linear(bf16_host);
    Fp8Act none;
    ops->mla_attention_absorbed_v_q(in.q_dev, in.cache_dev, c.v_dim, in.batch.dev, in.scale, nullptr, w_vc, wo_bf16,
                                    &none);
    EXPECT_FALSE(none.defined()) << c.name << " bf16 o_proj";
    const LinearWeight wo_off = off->prepare_linear(quantize_weight_fp8(wo_host, 128, 128, false));
    off->mla_attention_absorbed_v_q(in.q_dev, in.cache_dev, c.v_dim, in.batch.dev, in.scale, nullptr, w_vc, wo_off,
                                    &none);
    EXPECT_FALSE(none.defined()) << c.name << " DSERVE_MLA_VC_QUANT=0";
  }
}

// ---------------- absorbed form over packed FP8 caches ----------------
// The context rows of each case packed by the CUDA store op into empty_latent_cache's rows (e4m3 with block
// scales + bf16 rope, or e5m2; unwritten rows stay 0xff = NaN) against the CPU oracle, whose fp32 cache holds
// the same rows rounded by store_latent_rows: the kernels' dequantised values are those rounded once more to
// bf16, so the bf16 error budget holds. Also the dequantising context gather (prefill's input) and, where the
// case forces splits, the kernel API with that many splits.
struct Fp8Case {
  AbsorbedCase c;
  KvCacheDtype dtype;
};

class MlaAbsorbedFp8Gpu : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(MlaAbsorbedFp8Gpu, MatchesCpu) {
  const AbsorbedCase& c = GetParam().c;
  const KvCacheDtype dt = GetParam().dtype;
  init_cuda_device(0);
  std::mt19937 rng(std::hash<std::string>()(c.name) & 0xffffffu);
  AbsorbedInputs in = make_absorbed(c, rng);
  auto cpu = make_cpu_ops();
  auto gpu = make_cuda_ops(0);
  const int64_t D = c.head_dim, nope = c.v_dim, rope = D - nope;
  // The written rows of the random cache (the others are NaN) and their slots.
  std::vector<int32_t> slots;
  for (int64_t r = 0; r < in.batch.slots; ++r)
    if (!std::isnan(in.cache.f32()[r * D])) slots.push_back(static_cast<int32_t>(r));
  const int64_t n = static_cast<int64_t>(slots.size());
  Tensor rows = Tensor::empty({n, D}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) std::copy_n(in.cache.f32() + slots[i] * D, D, rows.f32() + i * D);
  for (int64_t i = 0; i < n; i += 7)  // outlier blocks: scales far from 1 (bf16-exact scaling)
    for (int64_t k = 0; k < std::min<int64_t>(nope, 128); ++k) rows.f32()[i * D + k] *= 64.0f;
  Tensor slot_h = i32_tensor(slots, {n});

  Tensor cpu_cache = Tensor::empty({in.batch.slots, D}, DType::kF32);
  std::fill(cpu_cache.f32(), cpu_cache.f32() + cpu_cache.numel(), NAN);
  cpu->store_latent_rows(cpu_cache, rows, slot_h, nope, dt);
  Tensor cache = gpu->empty_latent_cache(in.batch.slots, nope, rope, dt);
  ASSERT_EQ(cache.dtype(), dt == KvCacheDtype::kFp8E4M3 ? DType::kF8E4M3 : DType::kF8E5M2);
  ASSERT_EQ(cache.nbytes(), static_cast<size_t>(in.batch.slots * kernels::kv_row_layout(
                                                    dt == KvCacheDtype::kFp8E4M3 ? kernels::kKvE4M3 : kernels::kKvE5M2,
                                                    nope, rope).row_bytes));
  gpu->store_latent_rows(cache, to_device_bf16(rows), cuda_upload(slot_h), nope, dt);
  const std::string name = c.name + (dt == KvCacheDtype::kFp8E4M3 ? " e4m3" : " e5m2");

  // The gather dequantises to exactly bf16(stored value).
  Tensor ctx_want = cpu->gather_context(cpu_cache, in.batch.host);
  Tensor ctx_got = to_f32(cuda_download(gpu->gather_latent_context(cache, in.batch.dev, nope, dt)));
  ASSERT_EQ(ctx_got.shape(), ctx_want.shape());
  int64_t mismatched = 0;
  for (int64_t i = 0; i < ctx_want.numel(); ++i) mismatched += ctx_got.f32()[i] != round_bf16(ctx_want.f32()[i]);
  EXPECT_EQ(mismatched, 0) << "gather " << name;

  const Tensor* topk_h = c.topk_k > 0 ? &in.topk : nullptr;
  const Tensor* topk_d = c.topk_k > 0 ? &in.topk_dev : nullptr;
  // The kernels compute with bf16(stored value), as the gather hands prefill: the oracle gets the same values.
  // (Against the fp32 values themselves the outlier rows' huge logits turn the bf16 rounding of their keys into
  // errors of several percent: printed, not bounded.)
  Tensor cache_bf16 = Tensor::empty(cpu_cache.shape(), DType::kF32);
  for (int64_t i = 0; i < cpu_cache.numel(); ++i) cache_bf16.f32()[i] = round_bf16(cpu_cache.f32()[i]);
  Tensor want = cpu->mla_attention_absorbed(in.q, cache_bf16, nope, in.batch.host, in.scale, topk_h);
  Tensor got = gpu->mla_attention_absorbed(in.q_dev, cache, nope, in.batch.dev, in.scale, topk_d);
  ASSERT_EQ(got.shape(), want.shape());
  expect_close(got, want, "absorbed " + name);
  const Err e32 = compare(got, cpu->mla_attention_absorbed(in.q, cpu_cache, nope, in.batch.host, in.scale, topk_h));
  std::printf("INFO %-43s vs fp32 values: max_rel %.3e l2_rel %.3e\n", name.c_str(), e32.max_rel, e32.l2_rel);
  if (c.forced_splits > 0 && D == kernels::kMlaHeadDim)
    check_forced_splits(c, in, cache, dt == KvCacheDtype::kFp8E4M3 ? kernels::kKvE4M3 : kernels::kKvE5M2, topk_d,
                        want);
}

std::vector<Fp8Case> fp8_cases() {
  std::vector<Fp8Case> v;
  for (const AbsorbedCase& c : absorbed_cases()) {
    static const char* kNames[] = {"lite_decode_b8", "v3_decode_b4", "v3_long_b1", "lite_decode_b64",
                                   "lite_multi_token", "v3_multi_token", "v3_chunk_absorbed", "lite_topk_short",
                                   "lite_page16", "v3_page128", "m16_long_b1", "m16_h13_page128", "m16_sharp",
                                   "fixture_dims", "fixture_dims_topk", "v3_topk", "v3_long_topk"};
    if (std::find(std::begin(kNames), std::end(kNames), c.name) == std::end(kNames)) continue;
    v.push_back({c, KvCacheDtype::kFp8E4M3});
    if (c.name == "lite_decode_b8" || c.name == "v3_multi_token" || c.name == "fixture_dims" ||
        c.name == "m16_long_b1" || c.name == "v3_long_topk")
      v.push_back({c, KvCacheDtype::kFp8E5M2});
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, MlaAbsorbedFp8Gpu, ::testing::ValuesIn(fp8_cases()),
                         [](const ::testing::TestParamInfo<Fp8Case>& i) {
                           return i.param.c.name + (i.param.dtype == KvCacheDtype::kFp8E4M3 ? "_e4m3" : "_e5m2");
                         });

// ---------------- MHA (prefill) form ----------------

struct MhaCase {
  std::string name;
  int heads, nope, rope, v;
  int64_t ctx_dim, rope_offset;
  std::vector<int> seq_lens, q_lens;
  int topk_k = 0;
};

class MlaMhaGpu : public ::testing::TestWithParam<MhaCase> {};

TEST_P(MlaMhaGpu, MatchesCpu) {
  const MhaCase& c = GetParam();
  init_cuda_device(0);
  std::mt19937 rng(std::hash<std::string>()(c.name) & 0xffffffu);
  Batch b = make_batch(c.seq_lens, c.q_lens, 64, rng);
  const int64_t T = b.host.num_tokens, H = c.heads;
  int64_t S = 0;
  for (int len : c.seq_lens) S += len;
  Tensor q = randn({T, H, c.nope + c.rope}, rng, 1.0f);
  Tensor kv = randn({S, H, c.nope + c.v}, rng, 1.0f);
  Tensor ctx = randn({S, c.ctx_dim}, rng, 1.0f);
  // Columns outside the rope key (the latent) must not be read.
  for (int64_t r = 0; r < S; ++r)
    for (int64_t d = 0; d < c.ctx_dim; ++d)
      if (d < c.rope_offset || d >= c.rope_offset + c.rope) ctx.f32()[r * c.ctx_dim + d] = NAN;
  Tensor topk;
  if (c.topk_k > 0) topk = make_topk(b, c.topk_k, rng);
  const float scale = 0.1147214f;

  auto cpu = make_cpu_ops();
  Tensor want_lse;
  Tensor want = cpu->mla_attention_mha(q, kv, ctx, c.rope_offset, b.host, scale, c.topk_k > 0 ? &topk : nullptr,
                                       &want_lse);
  Tensor topk_dev = c.topk_k > 0 ? cuda_upload(topk) : Tensor();
  Tensor q_dev = to_device_bf16(q), kv_dev = to_device_bf16(kv), ctx_dev = to_device_bf16(ctx);
  // Every form of the tensor-core prefill (keys 0: the mma.sync kernel; the reference kernel for other dims), through the
  // op (its switches) and through the kernel API.
  struct Form {
    const char* name;
    int keys;
    bool tma = false;
  };
  const Form forms[] = {{"wgmma64", 64},
                        {"wgmma128", 128},
                        {"mma.sync", 0},
                        {"wgmma64 tma", 64, true},
                        {"wgmma128 tma", 128, true}};
  for (const Form& f : forms) {
    test::ScopedEnv env("DSERVE_MLA_PREFILL_WGMMA", f.keys > 0 ? "1" : "0");
    test::ScopedEnv env_keys("DSERVE_MLA_PREFILL_KEYS", f.keys == 128 ? "128" : "64");
    test::ScopedEnv env_tma("DSERVE_MLA_PREFILL_TMA", f.tma ? "1" : "0");
    Tensor got_lse;
    Tensor got = cuda_mla_attention_mha(q_dev, kv_dev, ctx_dev, c.rope_offset, b.dev, scale,
                                        c.topk_k > 0 ? &topk_dev : nullptr, cuda_stream(), &got_lse);
    ASSERT_EQ(got.shape(), want.shape());
    expect_close(got, want, std::string("mha ") + f.name + " " + c.name);
    expect_lse_close(got_lse, want_lse, std::string("mha lse ") + f.name + " " + c.name);
  }

  // Kernel API into a NaN-filled output with one extra row (no DSA: the op already covered it), each kernel.
  const bool fast = kernels::mla_prefill_fast_supported(c.nope, c.rope, c.v, c.ctx_dim, c.rope_offset);
  for (size_t i = 0; i < (fast ? std::size(forms) : 1) && c.topk_k == 0; ++i) {
    const Form& f = forms[i];
    Tensor poison = Tensor::empty({T * H + 1, c.v}, DType::kF32);
    std::fill(poison.f32(), poison.f32() + poison.numel(), NAN);
    Tensor out = to_device_bf16(poison);
    Tensor lse_poison = Tensor::empty({T * H + 1}, DType::kF32);
    std::fill(lse_poison.f32(), lse_poison.f32() + lse_poison.numel(), NAN);
    Tensor lse = cuda_upload(lse_poison);
    kernels::MlaPrefillParams p;
    p.lse = lse.data_as<float>();
    p.q = q_dev.data();
    p.kv = kv_dev.data();
    p.ctx = ctx_dev.data();
    p.out = out.data();
    p.q_starts = b.dev.q_starts.data_as<int32_t>();
    p.seq_lens = b.dev.seq_lens.data_as<int32_t>();
    p.positions = b.dev.positions.data_as<int32_t>();
    p.num_seqs = b.dev.num_seqs;
    p.num_tokens = static_cast<int>(T);
    p.num_heads = c.heads;
    p.max_q_len = b.dev.max_q_len;
    p.nope = c.nope;
    p.rope = c.rope;
    p.v = c.v;
    p.ctx_dim = c.ctx_dim;
    p.rope_offset = c.rope_offset;
    p.ctx_rows = kv_dev.dim(0);
    p.scale = scale;
    const std::string name = fast ? f.name : "reference";
    DS_CUDA_CHECK(!fast         ? kernels::launch_mla_prefill_reference(p, cuda_stream())
                  : f.keys == 0 ? kernels::launch_mla_prefill(p, cuda_stream())
                                : kernels::launch_mla_prefill_wgmma(p, cuda_stream(), f.keys, f.tma));
    Tensor all = to_f32(cuda_download(out));
    for (int64_t i = T * H * c.v; i < all.numel(); ++i)
      ASSERT_TRUE(std::isnan(all.f32()[i])) << name << " wrote past the output";
    expect_close(out.reshape({T * H + 1, c.v}).rows(0, T * H).reshape({T, H, c.v}), want,
                 "mha kernel " + name + " " + c.name);
    Tensor lse_all = cuda_download(lse);
    ASSERT_TRUE(std::isnan(lse_all.f32()[T * H])) << name << " wrote past the lse";
    expect_lse_close(lse.rows(0, T * H).reshape({T, H}), want_lse, "mha kernel lse " + name + " " + c.name);
  }
}

// The context cut into parts as DeepseekModel's chunked MHA prefill cuts it (model/mha_chunks.h): each sequence's
// positions from its first query on, then the earlier ones in two halves (empty runs for a sequence without them;
// its queries attend nothing there: zeros and a -inf lse); each part's attention with its lse on every kernel,
// merged with merge_attention_parts_, must give the whole context's.
// (Cases without top-k masks: DeepseekModel never cuts those.)
class MlaMhaPartsGpu : public ::testing::TestWithParam<MhaCase> {};

TEST_P(MlaMhaPartsGpu, ContextPartsMergeToTheWhole) {
  const MhaCase& c = GetParam();
  init_cuda_device(0);
  std::mt19937 rng(std::hash<std::string>()(c.name + "parts") & 0xffffffu);
  Batch b = make_batch(c.seq_lens, c.q_lens, 64, rng);
  const int64_t T = b.host.num_tokens, H = c.heads, ns = b.host.num_seqs;
  int64_t S = 0;
  for (int len : c.seq_lens) S += len;
  Tensor q = randn({T, H, c.nope + c.rope}, rng, 1.0f);
  Tensor kv = randn({S, H, c.nope + c.v}, rng, 1.0f);
  Tensor ctx = randn({S, c.ctx_dim}, rng, 1.0f);
  const float scale = 0.1147214f;
  auto cpu = make_cpu_ops();
  Tensor want_lse;
  Tensor want = cpu->mla_attention_mha(q, kv, ctx, c.rope_offset, b.host, scale, nullptr, &want_lse);
  Tensor q_dev = to_device_bf16(q);

  // Part k of sequence s: positions [lo, hi).
  std::vector<std::array<int, 2>> ranges[3];
  for (int64_t s = 0; s < ns; ++s) {
    const int len = c.seq_lens[s], first = len - c.q_lens[s];
    ranges[0].push_back({first, len});
    ranges[1].push_back({0, first / 2});
    ranges[2].push_back({first / 2, first});
  }
  for (const char* mode : {"wgmma64", "wgmma128", "mma.sync"}) {
    const std::string m(mode);
    test::ScopedEnv env("DSERVE_MLA_PREFILL_WGMMA", m[0] == 'w' ? "1" : "0");
    test::ScopedEnv env_keys("DSERVE_MLA_PREFILL_KEYS", m == "wgmma128" ? "128" : "64");
    Tensor o, lse;
    for (int k = 0; k < 3; ++k) {
      std::vector<int32_t> rows, lens, pos;
      int64_t base = 0;
      for (int64_t s = 0; s < ns; ++s) {
        const auto [lo, hi] = ranges[k][s];
        for (int p = lo; p < hi; ++p) rows.push_back(static_cast<int32_t>(base + p));
        lens.push_back(hi - lo);
        for (int32_t t = b.host.q_starts.data_as<int32_t>()[s]; t < b.host.q_starts.data_as<int32_t>()[s + 1]; ++t)
          pos.push_back(b.host.positions.data_as<int32_t>()[t] - lo);
        base += c.seq_lens[s];
      }
      const int64_t R = static_cast<int64_t>(rows.size());
      Tensor kv_part = Tensor::empty({R, H, c.nope + c.v}, DType::kF32), ctx_part = Tensor::empty({R, c.ctx_dim}, DType::kF32);
      for (int64_t r = 0; r < R; ++r) {
        std::copy_n(kv.f32() + rows[r] * H * (c.nope + c.v), H * (c.nope + c.v), kv_part.f32() + r * H * (c.nope + c.v));
        std::copy_n(ctx.f32() + rows[r] * c.ctx_dim, c.ctx_dim, ctx_part.f32() + r * c.ctx_dim);
      }
      AttnMetadata meta = b.dev;
      meta.positions = cuda_upload(i32_tensor(pos, {T}));
      meta.seq_lens = cuda_upload(i32_tensor(lens, {ns}));
      meta.max_seq_len = *std::max_element(lens.begin(), lens.end());
      meta.total_context = R;
      Tensor part_lse;
      Tensor part = cuda_mla_attention_mha(q_dev, to_device_bf16(kv_part), to_device_bf16(ctx_part), c.rope_offset,
                                           meta, scale, nullptr, cuda_stream(), &part_lse);
      if (k == 0) {
        o = part;
        lse = part_lse;
      } else {
        cuda_merge_attention_parts(o, lse, part, part_lse, cuda_stream());
      }
    }
    expect_close(o, want, "mha parts " + m + " " + c.name);
    expect_lse_close(lse, want_lse, "mha parts lse " + m + " " + c.name);
  }
}

std::vector<MhaCase> mha_cases() {
  std::vector<MhaCase> v;
  v.push_back({"lite_prefill", 16, 128, 64, 128, 576, 512, {100, 300, 1, 257}, {100, 37, 1, 257}, 0});
  v.push_back({"v3_chunked", 128, 128, 64, 128, 576, 512, {700, 64}, {128, 64}, 0});
  v.push_back({"lite_prefill_topk", 16, 128, 64, 128, 576, 512, {300, 129}, {50, 129}, 64});
  // Many 64-key tiles, row counts around the wgmma kernel's 128-row blocks, a long cached prefix.
  v.push_back({"lite_long", 16, 128, 64, 128, 576, 512, {1200, 1100, 130}, {77, 1100, 129}, 0});
  v.push_back({"lite_long_topk", 16, 128, 64, 128, 576, 512, {900}, {300}, 200});
  v.push_back({"fixture_dims", 4, 32, 16, 32, 80, 64, {5, 40}, {5, 7}, 0});
  v.push_back({"fixture_dims_topk", 4, 32, 16, 32, 80, 64, {5, 40}, {5, 7}, 8});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, MlaMhaGpu, ::testing::ValuesIn(mha_cases()),
                         [](const ::testing::TestParamInfo<MhaCase>& i) { return i.param.name; });

std::vector<MhaCase> mha_cases_without_topk() {
  std::vector<MhaCase> v;
  for (const MhaCase& c : mha_cases())
    if (c.topk_k == 0) v.push_back(c);
  return v;
}
INSTANTIATE_TEST_SUITE_P(Cases, MlaMhaPartsGpu, ::testing::ValuesIn(mha_cases_without_topk()),
                         [](const ::testing::TestParamInfo<MhaCase>& i) { return i.param.name; });

// The split planner fills the machine for small batches and does not split a full batch.
TEST(MlaDecodePlan, SplitsForSmallBatchesOnly) {
  EXPECT_EQ(kernels::mla_decode_num_splits(64, 64, 1, 128, 4096, false, 132), 1);
  const int s = kernels::mla_decode_num_splits(1, 1, 1, 128, 32768, false, 132);
  EXPECT_GE(s, 32);
  EXPECT_LE(2 * s, 132);  // one wave: two head blocks per split
  EXPECT_GE(kernels::mla_decode_num_splits(64, 64, 1, 16, 4096, false, 132), 2);
  EXPECT_EQ(kernels::mla_decode_num_splits(1, 1, 1, 128, 10, false, 132), 1);
}

}  // namespace
}  // namespace ds
