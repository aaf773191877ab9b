// The small-M bf16 GEMM kernels (kernels/gemm_small_m.cu) against a double-precision host product of the same
// bf16 inputs, and through the ops that dispatch to them (linear, linear_f32) against the CPU backend. Outputs are written into NaN-filled buffers wider than N: columns past N and rows past M
// must stay NaN, every written value must be finite.
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gemm_small_m.h"
#include "ops/cuda/gpu_test_util.h"

namespace ds {
namespace {

using test::randn;
using test::to_device;
using test::to_host_f32;

class GemmSmallMTest : public test::CudaVsCpuTest {
 protected:
  std::mt19937 rng_{777};

  // Runs the kernel on [batch][M, K] x [batch][N, K] (w_nk) or [batch][K, N], output [batch][M + 1, N + 5]
  // NaN-filled; checks the padding and returns the max relative error against the host product.
  double run_case(int64_t batch, int64_t M, int64_t N, int64_t K, bool w_nk, bool f32_out) {
    Tensor x = randn({batch, M, K}, rng_), w = randn(w_nk ? Shape{batch, N, K} : Shape{batch, K, N}, rng_, 0.05f);
    const int64_t ldd = N + 5, rows = M + 1;
    Tensor pad = Tensor::empty({batch, rows, ldd}, DType::kF32);
    for (int64_t i = 0; i < pad.numel(); ++i) pad.f32()[i] = std::numeric_limits<float>::quiet_NaN();
    Tensor dx = to_device(x), dw = to_device(w), dd = to_device(pad, f32_out ? DType::kF32 : DType::kBF16);
    kernels::GemmSmallMParams p;
    p.x = dx.data();
    p.ldx = K;
    p.stride_x = M * K;
    p.w = dw.data();
    p.ldw = w_nk ? K : N;
    p.stride_w = N * K;
    p.w_nk = w_nk;
    p.d = dd.data();
    p.ldd = ldd;
    p.stride_d = rows * ldd;
    p.d_f32 = f32_out;
    p.M = M;
    p.N = N;
    p.K = K;
    p.batch = static_cast<int>(batch);
    EXPECT_TRUE(kernels::gemm_small_m_supported(p));
    EXPECT_EQ(kernels::launch_gemm_small_m(p, cuda_stream()), cudaSuccess);
    Tensor got = to_host_f32(dd);
    test::PaddedCheck c;
    for (int64_t b = 0; b < batch; ++b)
      c.add(got.f32() + b * rows * ldd, rows, ldd, M, N, [&](int64_t m, int64_t n) {
        double ref = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double wv = w_nk ? w.f32()[(b * N + n) * K + k] : w.f32()[(b * K + k) * N + n];
          ref += static_cast<double>(x.f32()[(b * M + m) * K + k]) * wv;
        }
        return ref;
      });
    const std::string what = test::shape_name(w_nk ? "gemm_small_m nk" : "gemm_small_m kn", {batch, M, N, K}) +
                             (f32_out ? " f32" : " bf16");
    EXPECT_EQ(c.bad_pad, 0) << what << ": written outside [M, N]";
    EXPECT_EQ(c.nonfinite, 0) << what;
    const double rel = c.rel();
    test::report(what, test::Err{rel, 0, c.nonfinite});
    return rel;
  }
};

TEST_F(GemmSmallMTest, WeightRowsMatchTheHostProduct) {
  // (batch, M, N, K): V2-Lite q_proj / kv_a / o_proj / router / shared expert, V3 q_b, a ragged N, 16 tokens,
  // a batched case, K = 32 (one chunk: most warps idle); M = 1 with a K tail (1408), many K segments (18432) and
  // few rows (13); V3's router (32 CTAs: rounds of 8 chunks a warp, the last one partial; V2-Lite's takes one).
  for (auto [B, M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {1, 1, 3072, 2048}, {1, 1, 576, 2048}, {1, 3, 2048, 2048}, {1, 1, 2048, 2048}, {1, 8, 64, 2048},
           {1, 1, 5632, 2048}, {1, 9, 2048, 2816}, {1, 16, 200, 96}, {1, 2, 24576, 1536}, {3, 5, 40, 64}, {2, 16, 8200, 32},
           {1, 1, 2048, 1408}, {1, 1, 1100, 18432}, {1, 1, 13, 32}, {1, 1, 256, 7168}, {1, 1, 2048, 10944},
           {1, 8, 2048, 10944}, {1, 4, 2000, 4128}, {1, 12, 20000, 64}}) {
    // M = 1 at batch 1 can take the register GEMV (gemv_m1.cuh, opt-in DSERVE_GEMV_M1=1, from 1,024 rows and
    // K >= 1024): both.
    for (const char* gemv : {"1", "0"}) {
      if (gemv[0] == '0' && (M != 1 || B != 1)) continue;
      const test::ScopedEnv env("DSERVE_GEMV_M1", gemv);
      for (bool f32_out : {false, true}) {
        const double rel = run_case(B, M, N, K, /*w_nk=*/true, f32_out);
        EXPECT_LE(rel, f32_out ? 1e-5 : 8e-3) << B << " " << M << " " << N << " " << K << " DSERVE_GEMV_M1=" << gemv;
      }
    }
    // Rounds of 8 for grids of up to three CTAs an SM (DSERVE_SMALL_M_WIDE_PRE=3, read per launch; default 1).
    {
      const test::ScopedEnv env("DSERVE_SMALL_M_WIDE_PRE", "3");
      for (bool f32_out : {false, true}) {
        const double rel = run_case(B, M, N, K, /*w_nk=*/true, f32_out);
        EXPECT_LE(rel, f32_out ? 1e-5 : 8e-3) << B << " " << M << " " << N << " " << K << " DSERVE_SMALL_M_WIDE_PRE=3";
      }
    }
    // Grids of up to two CTAs an SM whose K fits one round of 8 (V2-Lite's o_proj, 1 x 2048 x 2048 and 3 x 2048 x
    // 2048 here) stage it whole by default; DSERVE_SMALL_M_WIDE_ONE=0 (read per launch) keeps rounds of 4.
    {
      const test::ScopedEnv env("DSERVE_SMALL_M_WIDE_ONE", "0");
      const double rel = run_case(B, M, N, K, /*w_nk=*/true, /*f32_out=*/false);
      EXPECT_LE(rel, 8e-3) << B << " " << M << " " << N << " " << K << " DSERVE_SMALL_M_WIDE_ONE=0";
    }
    // Long K (past four rounds of 4 chunks a warp, <= 8 rows, grids of up to two CTAs an SM: V2-Lite's dense down)
    // takes rounds of 12 by default; 8 and 4 (DSERVE_SMALL_M_LONG_K, read per launch) too.
    for (const char* unroll : {"8", "0"}) {
      const test::ScopedEnv env("DSERVE_SMALL_M_LONG_K", unroll);
      const double rel = run_case(B, M, N, K, /*w_nk=*/true, /*f32_out=*/false);
      EXPECT_LE(rel, 8e-3) << B << " " << M << " " << N << " " << K << " DSERVE_SMALL_M_LONG_K=" << unroll;
    }
    // The kernels that prefetch their rows into L2 instead of loading them before the PDL wait
    // (DSERVE_SMALL_M_PREWAIT=0, read per launch).
    const test::ScopedEnv env("DSERVE_SMALL_M_PREWAIT", "0");
    for (bool f32_out : {false, true}) {
      const double rel = run_case(B, M, N, K, /*w_nk=*/true, f32_out);
      EXPECT_LE(rel, f32_out ? 1e-5 : 8e-3) << B << " " << M << " " << N << " " << K << " DSERVE_SMALL_M_PREWAIT=0";
    }
  }
}

TEST_F(GemmSmallMTest, UnsupportedArgumentsAreRefused) {
  kernels::GemmSmallMParams p;
  alignas(16) static uint16_t buf[64];
  p.x = p.w = p.d = buf;
  p.M = 1;
  p.N = 8;
  p.K = 32;
  p.ldx = p.ldw = 32;
  p.ldd = 8;
  EXPECT_TRUE(kernels::gemm_small_m_supported(p));
  p.M = kernels::kGemmSmallMMax + 1;
  EXPECT_FALSE(kernels::gemm_small_m_supported(p)) << "too many rows";
  p.M = 1;
  p.K = 40;
  EXPECT_FALSE(kernels::gemm_small_m_supported(p)) << "K not a multiple of 32";
  p.K = 32;
  p.w = buf + 1;
  EXPECT_FALSE(kernels::gemm_small_m_supported(p)) << "misaligned weights";
  EXPECT_EQ(kernels::launch_gemm_small_m(p, cuda_stream()), cudaErrorInvalidValue);
  p.w = buf;
  p.w_nk = false;
  EXPECT_FALSE(kernels::gemm_small_m_supported(p)) << "[K, N] weights";
}

// Through the ops: decode-sized calls take the small-M kernels; the CPU backend is the reference.
TEST_F(GemmSmallMTest, OpsAtDecodeSizesMatchTheCpu) {
  // T = 1 twice: first on the register GEMV (opt-in DSERVE_GEMV_M1=1, read per launch), then the default kernel;
  // T = 1 and 8 once more with rounds of 8 for grids of up to three CTAs an SM (DSERVE_SMALL_M_WIDE_PRE=3, read
  // per launch: the 3072-row linear's 384 CTAs take it).
  for (const auto& [T, gemv, wide] : std::vector<std::tuple<int64_t, bool, bool>>{{1, true, false},
                                                                                  {1, false, false},
                                                                                  {1, false, true},
                                                                                  {2, false, false},
                                                                                  {5, false, false},
                                                                                  {8, false, false},
                                                                                  {8, false, true},
                                                                                  {12, false, false},
                                                                                  {16, false, false},
                                                                                  {24, false, false}}) {
    const test::ScopedEnv env("DSERVE_GEMV_M1", gemv ? "1" : nullptr);  // 24: past the small-M limit
    const test::ScopedEnv wide_env("DSERVE_SMALL_M_WIDE_PRE", wide ? "3" : nullptr);
    SCOPED_TRACE(wide ? "DSERVE_SMALL_M_WIDE_PRE=3" : "default");
    Tensor x = randn({T, 2048}, rng_), w = randn({3072, 2048}, rng_, 0.05f);
    LinearWeight lw, cw;
    lw.weight = to_device(w);
    cw.weight = w;
    DS_EXPECT_CLOSE(to_host_f32(gpu().linear(to_device(x), lw)), cpu().linear(x, cw), 1e-2, 5e-3,
                    test::shape_name("linear", {T, 2048, 3072}));
    Tensor w2 = randn({576, 2048}, rng_, 0.05f);  // the pair: q_proj and kv_a_proj of one layer, one launch
    LinearWeight lw2, cw2;
    lw2.weight = to_device(w2);
    cw2.weight = w2;
    Tensor y1, y2;
    gpu().linear_pair(to_device(x), lw, lw2, &y1, &y2);
    DS_EXPECT_CLOSE(to_host_f32(y1), cpu().linear(x, cw), 1e-2, 5e-3, test::shape_name("linear_pair q", {T, 2048, 3072}));
    DS_EXPECT_CLOSE(to_host_f32(y2), cpu().linear(x, cw2), 1e-2, 5e-3, test::shape_name("linear_pair kv_a", {T, 2048, 576}));
    Tensor r = randn({64, 2048}, rng_, 0.05f);
    DS_EXPECT_CLOSE(cuda_download(gpu().linear_f32(to_device(x), to_device(r))), cpu().linear_f32(x, r), 1e-4, 1e-5,
                    test::shape_name("linear_f32", {T, 2048, 64}));
  }
}

// The fused MLP halves (ops.h linear_silu, linear_add_): gate|up with the SiLU epilogue (V2-Lite shared expert,
// a ragged I) and down accumulated into the residual branch, against the CPU's unfused chain.
TEST_F(GemmSmallMTest, FusedMlpHalvesMatchTheCpu) {
  // T = 1 twice: on the register GEMV (DSERVE_GEMV_M1=1: SiLU pair and accumulate epilogues), then the default.
  for (const auto& [T, gemv] : std::vector<std::pair<int64_t, bool>>{
           {1, true}, {1, false}, {4, false}, {9, false}, {16, false}, {40, false}}) {
    const test::ScopedEnv env("DSERVE_GEMV_M1", gemv ? "1" : nullptr);  // 40: past the small-M limit (unfused path)
    // 10944: V2-Lite's dense MLP (its down takes the long-K rounds at <= 8 rows).
    for (int64_t I : {2816, 200, 10944}) {
      if (I == 10944 && T > 9) continue;
      Tensor x = randn({T, 2048}, rng_), gu = randn({2 * I, 2048}, rng_, 0.05f);
      LinearWeight lgu, cgu;
      lgu.weight = to_device(gu);
      cgu.weight = gu;
      Tensor act = cpu().linear_silu(x, cgu);  // [T, I]
      DS_EXPECT_CLOSE(to_host_f32(gpu().linear_silu(to_device(x), lgu)), act, 1e-2, 5e-3,
                      test::shape_name("linear_silu", {T, 2048, I}));
      Tensor dn = randn({2048, I}, rng_, 0.05f);
      LinearWeight ldn, cdn;
      ldn.weight = to_device(dn);
      cdn.weight = dn;
      Tensor base = randn({T, 2048}, rng_);
      Tensor got = to_device(base);
      gpu().linear_add_(got, to_device(act), ldn);
      Tensor want = randn({T, 2048}, rng_);  // overwritten with base below (the CPU op adds in place)
      for (int64_t i = 0; i < want.numel(); ++i) want.f32()[i] = base.f32()[i];
      cpu().linear_add_(want, act, cdn);
      DS_EXPECT_CLOSE(to_host_f32(got), want, 1e-2, 5e-3, test::shape_name("linear_add_", {T, I, 2048}));
      // The shared expert's form (deepseek_model.cpp): linear_partial on the side stream, joined, then add_:
      // the same bits as the fused accumulate (one rounding either way), with a step of other work between.
      Tensor got2 = to_device(base);
      Tensor dact = to_device(act);
      gpu().side_begin();
      Tensor part = gpu().linear_partial(dact, ldn);
      gpu().side_end();
      Tensor busy = gpu().linear_silu(to_device(x), lgu);  // main-stream work while the side one runs
      gpu().side_join();
      gpu().add_(got2, part);
      const Tensor h1 = to_host_f32(got2), h2 = to_host_f32(got);
      int64_t differ = 0;
      for (int64_t i = 0; i < h1.numel(); ++i) differ += h1.f32()[i] != h2.f32()[i];
      EXPECT_EQ(differ, 0) << test::shape_name("side linear_partial + add_ vs linear_add_", {T, I, 2048});
      EXPECT_EQ(busy.dim(0), T);
    }
  }
}

}  // namespace
}  // namespace ds
