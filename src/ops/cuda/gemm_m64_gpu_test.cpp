// The small-weight GEMM for 17-64 rows (kernels/gemm_m64.cu) against a double-precision host product of the same
// bf16 inputs, written into a NaN-filled buffer wider and taller than [M, N] (the padding must stay NaN), and the
// op that dispatches to it (linear_f32 from 17 rows, the default; DSERVE_GEMM_M64=0: cuBLASLt) against the CPU.
#include <cmath>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/gemm_m64.h"
#include "ops/cuda/gpu_test_util.h"

namespace ds {
namespace {

using test::randn;
using test::to_device;
using test::to_host_f32;

class GemmM64Test : public test::CudaVsCpuTest {
 protected:
  std::mt19937 rng_{641};
};

TEST_F(GemmM64Test, MatchesTheHostProduct) {
  // (M, N, K): V2-Lite's router at 17 / 40 / 64 tokens, V3's (256 x 7168: 28 chunks a warp, rounds of 4 with a
  // partial last), ragged N and M, one chunk (most warps idle), one row.
  for (auto [M, N, K] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {17, 64, 2048}, {40, 64, 2048}, {64, 64, 2048}, {64, 256, 7168}, {33, 257, 96}, {5, 13, 32}, {1, 8, 4096},
           {63, 100, 1024}}) {
    // x bf16-exact on the host (the device gets the same values).
    Tensor x = to_host_f32(to_device(randn({M, K}, rng_))), w = to_host_f32(to_device(randn({N, K}, rng_, 0.05f)));
    const int64_t ldd = N + 3, rows = M + 2;
    Tensor pad = Tensor::empty({rows, ldd}, DType::kF32);
    for (int64_t i = 0; i < pad.numel(); ++i) pad.f32()[i] = std::numeric_limits<float>::quiet_NaN();
    Tensor dx = to_device(x), dw = to_device(w), dd = to_device(pad, DType::kF32);
    kernels::GemmM64Params p;
    p.x = dx.data();
    p.ldx = K;
    p.w = dw.data();
    p.ldw = K;
    p.d = dd.data_as<float>();
    p.ldd = ldd;
    p.M = M;
    p.N = N;
    p.K = K;
    ASSERT_TRUE(kernels::gemm_m64_supported(p));
    ASSERT_EQ(kernels::launch_gemm_m64(p, cuda_stream()), cudaSuccess);
    Tensor got = to_host_f32(dd);
    test::PaddedCheck c;
    c.add(got.f32(), rows, ldd, M, N, [&](int64_t m, int64_t n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += static_cast<double>(x.f32()[m * K + k]) * w.f32()[n * K + k];
      return ref;
    });
    const std::string what = test::shape_name("gemm_m64", {M, N, K});
    EXPECT_EQ(c.bad_pad, 0) << what << ": written outside [M, N]";
    EXPECT_EQ(c.nonfinite, 0) << what;
    const double rel = c.rel();
    test::report(what, test::Err{rel, 0, c.nonfinite});
    EXPECT_LE(rel, 1e-5) << what;
  }
}

TEST_F(GemmM64Test, UnsupportedArgumentsAreRefused) {
  alignas(16) static uint16_t buf[64];
  alignas(16) static float out[64];
  kernels::GemmM64Params p;
  p.x = p.w = buf;
  p.d = out;
  p.ldx = p.ldw = 32;
  p.ldd = 8;
  p.M = 4;
  p.N = 8;
  p.K = 32;
  EXPECT_TRUE(kernels::gemm_m64_supported(p));
  auto refused = [&](auto change) {
    kernels::GemmM64Params q = p;
    change(q);
    return !kernels::gemm_m64_supported(q) && kernels::launch_gemm_m64(q, cuda_stream()) == cudaErrorInvalidValue;
  };
  EXPECT_TRUE(refused([](kernels::GemmM64Params& q) { q.M = kernels::kGemmM64Max + 1; }));
  EXPECT_TRUE(refused([](kernels::GemmM64Params& q) { q.M = 0; }));
  EXPECT_TRUE(refused([](kernels::GemmM64Params& q) { q.K = 48; }));  // not a multiple of 32
  EXPECT_TRUE(refused([](kernels::GemmM64Params& q) { q.x = reinterpret_cast<const char*>(q.x) + 2; }));
  EXPECT_TRUE(refused([](kernels::GemmM64Params& q) { q.ldw = 36; }));
  EXPECT_TRUE(refused([](kernels::GemmM64Params& q) { q.ldd = 7; }));
}

// linear_f32 (the router's op) at 17-64 rows with the kernel (DSERVE_GEMM_M64=1, the default) and without (=0), against
// the CPU backend's fp32 product.
TEST_F(GemmM64Test, LinearF32TakesIt) {
  for (const char* on : {"1", "0"}) {
    const test::ScopedEnv env("DSERVE_GEMM_M64", on);
    for (int64_t M : {17, 64}) {
      Tensor x = to_host_f32(to_device(randn({M, 2048}, rng_)));
      Tensor w = to_host_f32(to_device(randn({64, 2048}, rng_, 0.05f)));
      Tensor got = to_host_f32(gpu().linear_f32(to_device(x), to_device(w)));
      Tensor want = cpu().linear_f32(x, w);
      DS_EXPECT_CLOSE(got, want, 1e-4, 1e-5,
                      std::string("linear_f32 M=") + std::to_string(M) + " DSERVE_GEMM_M64=" + on);
    }
  }
}

}  // namespace
}  // namespace ds
