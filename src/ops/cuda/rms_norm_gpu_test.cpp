// CUDA-vs-CPU consistency of the RMSNorm kernels (plain and fused residual add). Inputs are random
// bf16; padding columns and rows are poisoned with NaN and must neither leak in nor be overwritten. The fused FP8
// quantization of the output must equal quant_act's on that output, byte for byte, and the norm that sums an MoE
// output itself must equal the combine launch + the norm, byte for byte.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/fp8_gemm.h"
#include "kernels/moe.h"
#include "kernels/rms_norm.h"
#include "ops/cuda/cuda_runtime.h"
#include "ops/cuda/gpu_test_util.h"
#include "ops/ops.h"

namespace ds {
namespace {

Tensor random_bf16(Shape shape, std::mt19937& rng, float scale, float offset = 0.0f) {
  Tensor t = Tensor::empty(shape, DType::kBF16);
  std::normal_distribution<float> nd(0.0f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data_as<uint16_t>()[i] = f32_to_bf16(offset + nd(rng));
  return t;
}

// max |a - b| / max(|b|, 1e-2) over the valid [rows, n] window.
double rel_err(const Tensor& got, int64_t got_stride, const Tensor& want, int64_t rows, int64_t n) {
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      const double a = bf16_to_f32(got.data_as<uint16_t>()[r * got_stride + i]);
      const double b = want.f32()[r * n + i];
      worst = std::max(worst, std::fabs(a - b) / std::max(std::fabs(b), 1e-2));
    }
  return worst;
}

class RmsNormGpu : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, bool>> {};

TEST_P(RmsNormGpu, MatchesCpu) {
  auto [rows, n, fused] = GetParam();
  init_cuda_device(0);
  std::mt19937 rng(1234);
  const int64_t stride = n + 16;  // padded rows
  const uint16_t nan_bf16 = f32_to_bf16(NAN);
  Tensor x = random_bf16({rows, stride}, rng, 1.0f);
  Tensor res = random_bf16({rows, stride}, rng, 1.0f);
  Tensor w = random_bf16({n}, rng, 0.1f, 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = n; i < stride; ++i) x.data_as<uint16_t>()[r * stride + i] = res.data_as<uint16_t>()[r * stride + i] = nan_bf16;
  Tensor out = Tensor::empty({rows + 1, stride}, DType::kBF16);  // one extra poisoned row
  for (int64_t i = 0; i < out.numel(); ++i) out.data_as<uint16_t>()[i] = nan_bf16;

  Tensor dx = cuda_upload(x), dres = cuda_upload(res), dw = cuda_upload(w), dout = cuda_upload(out);
  kernels::RmsNormParams p{dx.data(), fused ? dres.data() : nullptr, dw.data(), dout.data(), rows, n, stride,
                           stride, stride, 1e-6f};
  DS_CUDA_CHECK(kernels::launch_rms_norm(p, nullptr));
  DS_CUDA_CHECK(cudaDeviceSynchronize());
  Tensor got = cuda_download(dout);

  // CPU reference on the same bf16 inputs (fused: residual rounded to bf16 after the add, as the kernel).
  auto ops = make_cpu_ops();
  Tensor xf = Tensor::empty({rows, n}, DType::kF32), wf = to_f32(w);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < n; ++i) {
      float v = bf16_to_f32(x.data_as<uint16_t>()[r * stride + i]);
      if (fused) v = round_bf16(v + bf16_to_f32(res.data_as<uint16_t>()[r * stride + i]));
      xf.f32()[r * n + i] = v;
    }
  Tensor want = ops->rms_norm(xf, wf, 1e-6f);
  EXPECT_LE(rel_err(got, stride, want, rows, n), 1.6e-2);  // bf16 output: 2^-7 relative
  for (int64_t r = 0; r <= rows; ++r)
    for (int64_t i = (r < rows ? n : 0); i < stride; ++i)
      ASSERT_TRUE(std::isnan(bf16_to_f32(got.data_as<uint16_t>()[r * stride + i]))) << "wrote padding " << r << "," << i;
  if (fused) {
    Tensor res_after = cuda_download(dres);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(bf16_to_f32(res_after.data_as<uint16_t>()[r * stride + i]), xf.f32()[r * n + i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormGpu,
                         ::testing::Values(std::make_tuple(1, 7168, false), std::make_tuple(37, 2048, true),
                                           std::make_tuple(5, 512, false), std::make_tuple(3, 1536, true),
                                           std::make_tuple(64, 100, false)));

// The norm with q set: its bf16 output is the plain kernel's, and q / q_scales are launch_fp8_quant_act's bytes of
// that output (both scale kinds, with and without the residual add, one to 64 rows, the model widths); rows that
// are not whole 128-groups are refused.
TEST(RmsNormQuantGpu, QuantizesTheOutputAsQuantAct) {
  init_cuda_device(0);
  std::mt19937 rng(99);
  for (int64_t n : {256, 1536, 2048, 7168})
    for (int64_t rows : {1, 5, 64})
      for (bool with_res : {false, true})
        for (bool ue8m0 : {false, true}) {
          const std::string what = "n " + std::to_string(n) + " rows " + std::to_string(rows) +
                                   (with_res ? " residual" : "") + (ue8m0 ? " ue8m0" : "");
          Tensor x = cuda_upload(random_bf16({rows, n}, rng, 2.0f));
          Tensor res_host = random_bf16({rows, n}, rng, 2.0f);
          Tensor res1 = cuda_upload(res_host), res2 = cuda_upload(res_host);
          Tensor w = cuda_upload(random_bf16({n}, rng, 0.3f, 1.0f));
          Tensor out1 = Tensor::empty({rows, n}, DType::kBF16, Device::kCuda);
          Tensor out2 = Tensor::empty({rows, n}, DType::kBF16, Device::kCuda);
          Tensor q1 = Tensor::empty({rows, n}, DType::kF8E4M3, Device::kCuda);
          Tensor s1 = Tensor::empty({rows, n / 128}, DType::kF32, Device::kCuda);
          kernels::RmsNormParams p{x.data(), with_res ? res1.data() : nullptr, w.data(), out1.data(), rows, n, n, n, n,
                                   1e-6f};
          p.q = q1.data_as<uint8_t>();
          p.q_scales = s1.data_as<float>();
          p.q_ue8m0 = ue8m0;
          ASSERT_TRUE(kernels::rms_norm_quant_supported(p)) << what;
          DS_CUDA_CHECK(kernels::launch_rms_norm(p, nullptr));
          kernels::RmsNormParams plain{x.data(), with_res ? res2.data() : nullptr, w.data(), out2.data(), rows, n, n, n,
                                       n, 1e-6f};
          DS_CUDA_CHECK(kernels::launch_rms_norm(plain, nullptr));
          Tensor q2, s2;
          DS_CUDA_CHECK(test::quant_act(out2, ue8m0, nullptr, &q2, &s2));
          DS_CUDA_CHECK(cudaDeviceSynchronize());
          EXPECT_TRUE(test::same_device_bits(out1, out2)) << what << ": bf16 output";
          EXPECT_TRUE(test::same_device_bits(res1, res2)) << what << ": residual";
          EXPECT_TRUE(test::same_device_bits(q1, q2)) << what << ": e4m3 bytes";
          EXPECT_TRUE(test::same_device_bits(s1, s2)) << what << ": scales";
        }
  Tensor x = Tensor::empty({2, 192}, DType::kBF16, Device::kCuda);
  kernels::RmsNormParams p{x.data(), nullptr, x.data(), x.data(), 2, 192, 192, 192, 192, 1e-6f};
  p.q = static_cast<uint8_t*>(x.data());
  p.q_scales = static_cast<float*>(x.data());
  EXPECT_FALSE(kernels::rms_norm_quant_supported(p));
  EXPECT_EQ(kernels::launch_rms_norm(p, nullptr), cudaErrorInvalidValue);
}

// The norm with moe set (the MoE output summed in the norm's kernel, then the residual add and the norm) against
// launch_moe_combine + the norm with a residual: the same bf16 output and residual bytes (and FP8 quantization),
// for the V2-Lite / V3 widths (one and two chunks per thread), top-6 / top-8 with skipped (-1) rows, no / bf16 /
// fp32 addend, ids read before or after the wait. The routed rows nobody references are NaN; the refused shapes
// are refused.
TEST(RmsNormMoeGpu, SumsTheMoeOutputAsTheCombine) {
  init_cuda_device(0);
  std::mt19937 rng(4242);
  const uint16_t nan_bf16 = f32_to_bf16(NAN);
  int cases = 0;
  for (int64_t n : {2048, 7168})
    for (int64_t rows : {1, 3, 40})
      for (int top_k : {6, 9})  // 9: V3's picks and its fused shared expert
        for (int addend_kind : {0, 1, 2})  // none, bf16, fp32
          for (bool quant : {false, true}) {
            if (quant && (rows != 3 || addend_kind != 1)) continue;
            const bool settled = (cases++ % 2) == 0;
            const std::string what = "n " + std::to_string(n) + " rows " + std::to_string(rows) + " top " +
                                     std::to_string(top_k) + " addend " + std::to_string(addend_kind) +
                                     (quant ? " quant" : "") + (settled ? " settled" : "");
            // Routed rows: every (token, k) a distinct row, some skipped (-1); two spare rows stay NaN.
            const int64_t routed = rows * top_k + 2;
            Tensor y = random_bf16({routed, n}, rng, 1.0f);
            std::vector<int32_t> row_of(rows * top_k);
            std::vector<int32_t> perm(routed - 2);
            for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int32_t>(i);
            std::shuffle(perm.begin(), perm.end(), rng);
            for (int64_t i = 0; i < rows * top_k; ++i) row_of[i] = (i % 5 == 3) ? -1 : perm[i];
            for (int64_t r = 0; r < routed; ++r) {
              const bool used = std::find(row_of.begin(), row_of.end(), static_cast<int32_t>(r)) != row_of.end();
              if (!used)
                for (int64_t i = 0; i < n; ++i) y.data_as<uint16_t>()[r * n + i] = nan_bf16;
            }
            Tensor wts = Tensor::empty({rows, top_k}, DType::kF32);
            std::uniform_real_distribution<float> ud(0.05f, 0.5f);
            for (int64_t i = 0; i < wts.numel(); ++i) wts.f32()[i] = ud(rng);
            Tensor ids = Tensor::empty({rows, top_k}, DType::kI32);
            std::memcpy(ids.data(), row_of.data(), row_of.size() * sizeof(int32_t));
            Tensor add;
            if (addend_kind == 1) add = random_bf16({rows, n}, rng, 1.0f);
            if (addend_kind == 2) {
              add = Tensor::empty({rows, n}, DType::kF32);
              std::normal_distribution<float> nd(0.0f, 1.0f);
              for (int64_t i = 0; i < add.numel(); ++i) add.f32()[i] = nd(rng);
            }
            Tensor dy = cuda_upload(y), dids = cuda_upload(ids), dw = cuda_upload(wts);
            Tensor dadd = add.defined() ? cuda_upload(add) : Tensor();
            Tensor res_host = random_bf16({rows, n}, rng, 2.0f);
            Tensor res1 = cuda_upload(res_host), res2 = cuda_upload(res_host);
            Tensor w = cuda_upload(random_bf16({n}, rng, 0.3f, 1.0f));
            Tensor out1 = Tensor::empty({rows, n}, DType::kBF16, Device::kCuda);
            Tensor out2 = Tensor::empty({rows, n}, DType::kBF16, Device::kCuda);
            Tensor summed = Tensor::empty({rows, n}, DType::kBF16, Device::kCuda);
            Tensor q1 = Tensor::empty({rows, n}, DType::kF8E4M3, Device::kCuda);
            Tensor s1 = Tensor::empty({rows, n / 128}, DType::kF32, Device::kCuda);
            Tensor q2 = Tensor::empty({rows, n}, DType::kF8E4M3, Device::kCuda);
            Tensor s2 = Tensor::empty({rows, n / 128}, DType::kF32, Device::kCuda);
            kernels::MoeCombineParams c{dy.data(), dids.data_as<int32_t>(), dw.data_as<float>(), summed.data(), rows, n,
                                        top_k};
            if (dadd.defined()) {
              c.addend = dadd.data();
              c.addend_f32 = addend_kind == 2;
            }
            c.ids_settled = settled;
            kernels::RmsNormParams fused{nullptr, res1.data(), w.data(), out1.data(), rows, n, n, n, n, 1e-6f};
            fused.moe = c;
            fused.moe.out = nullptr;
            kernels::RmsNormParams plain{summed.data(), res2.data(), w.data(), out2.data(), rows, n, n, n, n, 1e-6f};
            if (quant) {
              fused.q = q1.data_as<uint8_t>();
              fused.q_scales = s1.data_as<float>();
              plain.q = q2.data_as<uint8_t>();
              plain.q_scales = s2.data_as<float>();
            }
            ASSERT_TRUE(kernels::rms_norm_moe_supported(fused)) << what;
            DS_CUDA_CHECK(kernels::launch_rms_norm(fused, nullptr));
            DS_CUDA_CHECK(kernels::launch_moe_combine(c, nullptr));
            DS_CUDA_CHECK(kernels::launch_rms_norm(plain, nullptr));
            DS_CUDA_CHECK(cudaDeviceSynchronize());
            EXPECT_TRUE(test::same_device_bits(out1, out2)) << what << ": bf16 output";
            EXPECT_TRUE(test::same_device_bits(res1, res2)) << what << ": residual";
            if (quant) {
              EXPECT_TRUE(test::same_device_bits(q1, q2)) << what << ": e4m3 bytes";
              EXPECT_TRUE(test::same_device_bits(s1, s2)) << what << ": scales";
            }
            // Finite: no NaN row leaked in.
            Tensor h = cuda_download(out1);
            for (int64_t i = 0; i < h.numel(); ++i)
              ASSERT_TRUE(std::isfinite(bf16_to_f32(h.data_as<uint16_t>()[i]))) << what << " element " << i;
          }
  // Refused: no residual, top_k 10, a width past two chunks per thread, rows that differ from the combine's.
  Tensor buf = Tensor::empty({4, 16384}, DType::kBF16, Device::kCuda);
  Tensor idx = Tensor::zeros({4, 10}, DType::kI32);
  Tensor didx = cuda_upload(idx);
  auto params = [&](int64_t n, int top_k, bool residual, int64_t combine_rows) {
    kernels::RmsNormParams p{nullptr, residual ? buf.data() : nullptr, buf.data(), buf.data(), 2, n, n, n, n, 1e-6f};
    p.moe = kernels::MoeCombineParams{buf.data(), didx.data_as<int32_t>(), static_cast<const float*>(buf.data()),
                                      nullptr, combine_rows, n, top_k};
    return p;
  };
  EXPECT_TRUE(kernels::rms_norm_moe_supported(params(2048, 6, true, 2)));
  for (const kernels::RmsNormParams& p :
       {params(2048, 6, false, 2), params(2048, 10, true, 2), params(16384, 6, true, 2), params(2048, 6, true, 3)}) {
    EXPECT_FALSE(kernels::rms_norm_moe_supported(p));
    EXPECT_EQ(kernels::launch_rms_norm(p, nullptr), cudaErrorInvalidValue);
  }
}

}  // namespace
}  // namespace ds
