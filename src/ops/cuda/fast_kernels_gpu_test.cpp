// CUDA-vs-CPU consistency of the decode-sized fast paths of the memory-bound kernels (vectorised RMSNorm and
// SiLU-mul, head-chunked RoPE, multi-warp routing, shared-memory permutation, vectorised MoE combine, the
// vocab-split log-softmax) and their fallbacks, at 1 token, ragged sizes and 4096 tokens. Device allocations
// are NaN-poisoned, so an element a kernel forgets to write fails.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <gtest/gtest.h>

#include "kernels/moe.h"
#include "ops/cuda/gpu_test_util.h"

namespace ds {
namespace {

using test::i32_tensor;
using test::randn;
using test::to_device;
using test::to_host_f32;

class FastKernelsTest : public test::CudaVsCpuTest {
 protected:
  std::mt19937 rng_{20261123};
};

TEST_F(FastKernelsTest, RmsNormVectorAndFallback) {
  // 1..4 chunks per thread, a partial last warp, the scalar fallback (n % 8 != 0), 4096 rows.
  for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 2048}, {1, 32768}, {2, 20000}, {3, 100}, {4096, 2048}, {9, 8}, {1, 1024}}) {
    Tensor x = randn({rows, n}, rng_), res = randn({rows, n}, rng_), w = randn({n}, rng_, 0.1f, 1.0f);
    for (DType wt : {DType::kBF16, DType::kF32}) {
      Tensor got = to_host_f32(gpu().rms_norm(to_device(x), to_device(w, wt), 1e-6f));
      DS_EXPECT_CLOSE(got, cpu().rms_norm(x, w, 1e-6f), 8e-3, 4e-3, test::shape_name("rms_norm", {rows, n}));
      Tensor dres = to_device(res);
      Tensor got_f = to_host_f32(gpu().add_rms_norm(dres, to_device(x), to_device(w, wt), 1e-6f));
      Tensor res_ref = Tensor::empty({rows, n}, DType::kF32);
      for (int64_t i = 0; i < res.numel(); ++i) res_ref.f32()[i] = round_bf16(res.f32()[i] + x.f32()[i]);
      DS_EXPECT_CLOSE(got_f, cpu().rms_norm(res_ref, w, 1e-6f), 8e-3, 4e-3, test::shape_name("add_rms_norm", {rows, n}));
      Tensor got_res = to_host_f32(dres);
      int64_t bad = 0;
      for (int64_t i = 0; i < res_ref.numel(); ++i) bad += got_res.f32()[i] != res_ref.f32()[i];
      EXPECT_EQ(bad, 0) << "add_rms_norm residual " << rows << "x" << n;
    }
  }
}

TEST_F(FastKernelsTest, SiluMulVectorAndFallback) {
  for (auto [rows, inter] : std::vector<std::pair<int64_t, int64_t>>{{1, 1408}, {2, 100}, {4096, 1408}, {3, 9}}) {
    Tensor gu = randn({rows, 2 * inter}, rng_, 2.0f);
    Tensor got = to_host_f32(gpu().silu_mul(to_device(gu)));
    DS_EXPECT_CLOSE(got, cpu().silu_mul(gu), 8e-3, 4e-3, test::shape_name("silu_mul", {rows, inter}));
  }
}

TEST_F(FastKernelsTest, RopeHeadChunks) {
  struct Case {
    int64_t T, H, hd, off, dim;
    RopeStyle style;
  };
  // V3 q heads at 1 token (4 head chunks), 40 heads (a partial chunk), the latent row at 4096 tokens.
  for (const Case& c : std::vector<Case>{{1, 128, 192, 128, 64, RopeStyle::kInterleaved},
                                         {3, 40, 192, 128, 64, RopeStyle::kInterleaved},
                                         {4096, 1, 576, 512, 64, RopeStyle::kInterleaved},
                                         {2, 70, 64, 0, 64, RopeStyle::kNeox},
                                         {5, 3, 300, 10, 256, RopeStyle::kNeox}}) {
    Tensor x = randn({c.T, c.H, c.hd}, rng_);
    std::vector<int32_t> pos(c.T);
    std::uniform_int_distribution<int32_t> pd(0, 160000);
    for (auto& p : pos) p = pd(rng_);
    Tensor inv = Tensor::empty({c.dim / 2}, DType::kF32);
    for (int64_t i = 0; i < c.dim / 2; ++i)
      inv.f32()[i] = static_cast<float>(std::pow(10000.0, -2.0 * i / c.dim) * (i < c.dim / 4 ? 1.0 : 0.25));
    Tensor dx = to_device(x);
    gpu().rope_(dx, c.off, c.dim, cuda_upload(i32_tensor(pos)), cuda_upload(inv), 1.2f, c.style);
    Tensor want = cpu().upload(x);
    cpu().rope_(want, c.off, c.dim, i32_tensor(pos), inv, 1.2f, c.style);
    Tensor got = to_host_f32(dx);
    DS_EXPECT_CLOSE(got, want, 8e-3, 4e-3, test::shape_name("rope", {c.T, c.H, c.hd, c.off, c.dim}));
    int64_t changed = 0;  // dims outside the rotated range stay bit-identical
    for (int64_t k = 0; k < x.numel(); ++k) {
      const int64_t i = k % c.hd;
      if ((i < c.off || i >= c.off + c.dim) && got.f32()[k] != x.f32()[k]) ++changed;
    }
    EXPECT_EQ(changed, 0);
  }
}

TEST_F(FastKernelsTest, MoeRouteManyTokens) {
  // Token counts that are not a multiple of the block's warps, and a prefill-sized batch.
  for (const kbench::ModelDims& m : {kbench::deepseek_v2_lite(), kbench::deepseek_v3()}) {
    const MoeRouting r = kcases::routing_of(m);
    for (int64_t T : {2, 5, 4096}) {
      Tensor logits = Tensor::empty({T, r.num_experts}, DType::kF32);
      std::normal_distribution<float> nd(0.0f, 2.0f);
      for (int64_t i = 0; i < logits.numel(); ++i) logits.f32()[i] = nd(rng_);
      Tensor bias = m.sigmoid ? randn({r.num_experts}, rng_, 0.05f) : Tensor();
      Tensor gi, gw, ci, cw;
      gpu().moe_route(cuda_upload(logits), m.sigmoid ? cuda_upload(bias) : Tensor(), r, &gi, &gw);
      cpu().moe_route(logits, bias, r, &ci, &cw);
      Tensor hi = cuda_download(gi), hw = cuda_download(gw);
      int64_t id_mismatch = 0;
      for (int64_t i = 0; i < ci.numel(); ++i) id_mismatch += hi.data_as<int32_t>()[i] != ci.data_as<int32_t>()[i];
      std::printf("ERR moe_route %-10s T %lld: id mismatches %lld\n", m.name.c_str(), static_cast<long long>(T),
                  static_cast<long long>(id_mismatch));
      EXPECT_EQ(id_mismatch, 0) << m.name << " T " << T;
      DS_EXPECT_CLOSE(hw, cw, 1e-5, 1e-5, "moe_route weights " + m.name);
    }
  }
}

TEST_F(FastKernelsTest, MoePermute) {
  struct Case {
    int64_t T;
    int E, K;
  };
  // More experts than threads (2000: several per thread in the scan), ids outside [0, E).
  for (const Case& c : std::vector<Case>{{1, 64, 6}, {1, 256, 8}, {37, 160, 6}, {4096, 64, 6}, {4096, 256, 8}, {5, 2000, 4}}) {
    const int64_t N = c.T * c.K;
    std::vector<int32_t> ids(N);
    std::uniform_int_distribution<int32_t> ed(0, c.E - 1);
    for (auto& e : ids) e = ed(rng_);
    if (N > 3) {
      ids[1] = -1;
      ids[N - 1] = c.E;
    }
    Tensor dids = cuda_upload(i32_tensor(ids));
    Tensor meta = gpu().empty({test::grouping_len(c.E, N)}, DType::kI32);  // NaN-poisoned
    int32_t* m = meta.data_as<int32_t>();
    kernels::MoePermuteParams p{dids.data_as<int32_t>(), m, m + c.E, m + 2 * c.E, m + 4 * c.E + 1, m + 4 * c.E + 1 + N,
                                N, c.K, c.E, m + 3 * c.E, m + 4 * c.E, m + test::grouping_slots_at(c.E, N)};
    ASSERT_EQ(kernels::launch_moe_permute(p, cuda_stream()), cudaSuccess);
    Tensor h = cuda_download(meta);
    const int64_t bad = test::grouping_mismatches(ids, h.data_as<int32_t>(), c.E, c.K, true);
    std::printf("ERR moe_permute T %lld E %d K %d: mismatches %lld\n", static_cast<long long>(c.T), c.E, c.K,
                static_cast<long long>(bad));
    EXPECT_EQ(bad, 0) << "moe_permute T " << c.T << " E " << c.E;
  }
}

TEST_F(FastKernelsTest, MoeCombine) {
  struct Case {
    int64_t T, d;
    int K;
  };
  // Vector path (d % 8 == 0, top_k <= 9) at 1 and 4096 tokens; fallbacks for top_k 12 and d 100.
  for (const Case& c : std::vector<Case>{{1, 2048, 6}, {1, 7168, 8}, {2, 7168, 9}, {4096, 256, 8}, {7, 2056, 6}, {3, 2048, 12}, {5, 100, 6}}) {
    const int64_t N = c.T * c.K;
    Tensor y = randn({N, c.d}, rng_);
    Tensor w = randn({c.T, c.K}, rng_, 0.2f, 0.5f);
    std::vector<int32_t> row_of(N);
    std::iota(row_of.begin(), row_of.end(), 0);
    std::shuffle(row_of.begin(), row_of.end(), rng_);
    row_of[0] = -1;  // an entry whose expert id was out of range: skipped
    Tensor out = gpu().empty({c.T, c.d}, DType::kBF16);
    Tensor dy = to_device(y), dw = to_device(w, DType::kF32), drow = cuda_upload(i32_tensor(row_of));
    ASSERT_EQ(kernels::launch_moe_combine({dy.data(), drow.data_as<int32_t>(), dw.data_as<float>(), out.data(), c.T, c.d, c.K},
                                          cuda_stream()),
              cudaSuccess);
    Tensor want = Tensor::empty({c.T, c.d}, DType::kF32);
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t j = 0; j < c.d; ++j) {
        float acc = 0.0f;
        for (int k = 0; k < c.K; ++k) {
          const int32_t r = row_of[t * c.K + k];
          if (r >= 0) acc += w.f32()[t * c.K + k] * y.f32()[r * c.d + j];
        }
        want.f32()[t * c.d + j] = acc;
      }
    DS_EXPECT_CLOSE(to_host_f32(out), want, 8e-3, 4e-3, test::shape_name("moe_combine", {c.T, c.d, c.K}));
  }
}

TEST_F(FastKernelsTest, MoeExpertsDecodeAndPrefill) {
  struct Case {
    int64_t T, d, inter;
    int E, K;
  };
  // One token over 256 experts (top 8), and 4096 tokens (the per-expert path: permute + combine at size).
  for (const Case& c : std::vector<Case>{{1, 256, 64, 256, 8}, {4096, 64, 32, 64, 6}}) {
    std::vector<PreparedMlp> gexp, cexp;
    for (int e = 0; e < c.E; ++e) {
      LinearWeight g, u, dn;
      g.weight = randn({c.inter, c.d}, rng_, 0.05f);
      u.weight = randn({c.inter, c.d}, rng_, 0.05f);
      dn.weight = randn({c.d, c.inter}, rng_, 0.08f);
      cexp.push_back(cpu().prepare_mlp(g, u, dn));
      gexp.push_back(gpu().prepare_mlp(g, u, dn));
    }
    Tensor x = randn({c.T, c.d}, rng_);
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < c.T; ++t) {
      std::vector<int32_t> all(c.E);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng_);
      ids.insert(ids.end(), all.begin(), all.begin() + c.K);
    }
    Tensor w = randn({c.T, c.K}, rng_, 0.2f, 0.5f);
    Tensor idt = i32_tensor(ids, {c.T, c.K});
    Tensor got = to_host_f32(gpu().moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), gexp));
    DS_EXPECT_CLOSE(got, cpu().moe_experts(x, idt, w, cexp), 2e-2, 1e-2, test::shape_name("moe_experts", {c.T, c.d, c.E, c.K}));
  }
}

TEST_F(FastKernelsTest, LogSoftmaxSplit) {
  // One chunk, a last chunk of one logit (2049), V2-Lite / V3 vocabularies at 1 token, many rows.
  for (auto [rows, n, t] : std::vector<std::tuple<int64_t, int64_t, DType>>{{1, 5, DType::kF32},
                                                                            {2, 2049, DType::kF32},
                                                                            {1, 102400, DType::kF32},
                                                                            {1, 129280, DType::kBF16},
                                                                            {4096, 300, DType::kF32},
                                                                            {64, 10000, DType::kBF16}}) {
    Tensor z = randn({rows, n}, rng_, 3.0f);
    if (t == DType::kBF16)  // the oracle sees the logits the GPU reads
      for (int64_t i = 0; i < z.numel(); ++i) z.f32()[i] = round_bf16(z.f32()[i]);
    Tensor got = cuda_download(gpu().log_softmax(to_device(z, t)));
    DS_EXPECT_CLOSE(got, cpu().log_softmax(z), 2e-6, 2e-6, test::shape_name("log_softmax split", {rows, n}));
  }
  // Masked logits (-inf), including a whole 2048-logit chunk of them: -inf out there, exact elsewhere.
  const int64_t n = 10000;
  Tensor z = randn({2, n}, rng_, 3.0f);
  for (int64_t i = 0; i < 2048; ++i) z.f32()[i] = -INFINITY;
  for (int64_t i = 0; i < n; i += 7) z.f32()[n + i] = -INFINITY;
  Tensor got = cuda_download(gpu().log_softmax(to_device(z, DType::kF32)));
  Tensor want = cpu().log_softmax(z);
  int64_t wrong_inf = 0;
  for (int64_t i = 0; i < z.numel(); ++i)
    if (z.f32()[i] == -INFINITY) {
      wrong_inf += got.f32()[i] != -INFINITY;
      want.f32()[i] = NAN;  // skipped by compare
    }
  EXPECT_EQ(wrong_inf, 0);
  DS_EXPECT_CLOSE(got, want, 2e-6, 2e-6, "log_softmax masked");
}

}  // namespace
}  // namespace ds
