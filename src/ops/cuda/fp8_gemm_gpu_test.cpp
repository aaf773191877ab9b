// CUDA-vs-CPU consistency of the native block-FP8 path (ops/cuda/fp8_linear.h, kernels/fp8_gemm.h):
// activation quantization bit-exact against quantize_activations_fp8, both GEMM paths (small-M tensor-core
// kernel, cuBLASLt block-scaled) against linear_w8a8_reference at ragged N/K, ue8m0 included. Every new
// device allocation is NaN-poisoned, so unwritten outputs show up.
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>
#include <tuple>
#include <utility>

#include <gtest/gtest.h>

#include "kernels/basic.h"
#include "kernels/fp8_gemm.h"
#include "ops/cuda/fp8_linear.h"
#include "ops/cuda/gpu_test_util.h"
#include "ops/fp8.h"
#include "ops/ops.h"

namespace ds {
namespace {

// Bound for the GEMM paths vs the reference: both see the same e4m3 operands and scales (quantization is
// bit-exact), so only the fp32 summation order inside a 128-block and the bf16 rounding of the output
// (2^-9 relative) differ. max |diff| / max |y| <= 1e-2 and ||diff|| / ||y|| <= 4e-3.
constexpr double kMaxRel = 1e-2, kL2Rel = 4e-3;

class Fp8GemmGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    init_cuda_device(0);
    set_cuda_alloc_poison(true);
  }
  void TearDown() override { set_cuda_alloc_poison(false); }
};

LinearWeight random_fp8_weight(int64_t n, int64_t k, bool ue8m0, std::mt19937& rng) {
  // Per-row magnitudes differ so the block scales differ.
  Tensor w = test::randn({n, k}, rng, 0.05f);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) w.f32()[i * k + j] *= 1.0f + static_cast<float>((i * 7 + j / 128) % 5);
  return quantize_weight_fp8(w, 128, 128, ue8m0);
}

TEST_F(Fp8GemmGpu, ActivationQuantizationIsBitExact) {
  std::mt19937 rng(11);
  for (bool ue8m0 : {false, true})
    for (int64_t K : {576, 1000, 1536})
      for (bool m_major : {false, true}) {
        const int64_t M = 37, Kp = (K + 127) / 128 * 128, G = Kp / 128, Kg = (K + 127) / 128;
        Tensor xf = test::randn({M, K}, rng, 2.0f);
        for (int64_t j = 0; j < K; ++j) xf.f32()[5 * K + j] = 0.0f;  // an all-zero token hits the 1e-4 floor
        Tensor xd = test::to_device(xf);
        // Rows [M, Mp) are cuBLASLt's pad rows (M_pad): zero tokens over poisoned bytes.
        const int64_t Mp = 48;
        Tensor q = Tensor::empty({Mp, Kp}, DType::kF8E4M3, Device::kCuda);
        const int64_t sld = m_major ? Mp : G;
        Tensor s = Tensor::empty({m_major ? G : Mp, sld}, DType::kF32, Device::kCuda);
        ASSERT_EQ(cudaMemsetAsync(q.data(), 0xff, q.nbytes(), cuda_stream()), cudaSuccess);
        ASSERT_EQ(cudaMemsetAsync(s.data(), 0xff, s.nbytes(), cuda_stream()), cudaSuccess);
        kernels::Fp8QuantParams p;
        p.M_pad = Mp;
        p.x = xd.data();
        p.ldx = K;
        p.M = M;
        p.K = K;
        p.Kp = Kp;
        p.q = q.data_as<uint8_t>();
        p.s = s.data_as<float>();
        p.s_ld = sld;
        p.s_m_major = m_major;
        p.ue8m0 = ue8m0;
        ASSERT_EQ(kernels::launch_fp8_quant_act(p, cuda_stream()), cudaSuccess);
        Tensor qh = cuda_download(q), sh = cuda_download(s);
        Tensor rq, rs;
        quantize_activations_fp8(xf, 128, ue8m0, &rq, &rs);
        int64_t bad_q = 0, bad_pad = 0, bad_s = 0;
        for (int64_t m = 0; m < M; ++m) {
          for (int64_t k = 0; k < Kp; ++k) {
            const uint8_t got = qh.data_as<uint8_t>()[m * Kp + k];
            if (k < K)
              bad_q += fp8e4m3_to_f32(got) != fp8e4m3_to_f32(rq.data_as<uint8_t>()[m * K + k]);  // -0 == +0
            else
              bad_pad += got != 0;
          }
          for (int64_t g = 0; g < Kg; ++g) {
            const float got = sh.f32()[m_major ? g * sld + m : m * sld + g];
            bad_s += got != rs.f32()[m * Kg + g];
          }
        }
        for (int64_t m = M; m < Mp; ++m) {
          for (int64_t k = 0; k < Kp; ++k) bad_pad += qh.data_as<uint8_t>()[m * Kp + k] != 0;
          for (int64_t g = 0; g < G; ++g) bad_pad += !std::isfinite(sh.f32()[m_major ? g * sld + m : m * sld + g]);
        }
        EXPECT_EQ(bad_q, 0) << "K " << K << " ue8m0 " << ue8m0 << " m_major " << m_major;
        EXPECT_EQ(bad_pad, 0) << "K " << K << " m_major " << m_major;
        EXPECT_EQ(bad_s, 0) << "K " << K << " ue8m0 " << ue8m0 << " m_major " << m_major;
      }
}

// quant_act's SiLU mode: silu_mul's bf16 output and then quant_act of it, to the bit, in one launch; gate|up rows
// with a wider stride than 2 * inter, ue8m0 too; without silu_out only the quantization; unsupported layouts refused.
TEST_F(Fp8GemmGpu, QuantActSiluModeIsSiluMulThenQuantAct) {
  std::mt19937 rng(27);
  for (bool ue8m0 : {false, true})
    for (auto [M, inter, ld] : {std::tuple<int64_t, int64_t, int64_t>{1, 128, 256}, {37, 1408, 2816},
                                {64, 2048, 4096 + 64}}) {
      const std::string what = "M " + std::to_string(M) + " inter " + std::to_string(inter) + " ld " +
                               std::to_string(ld) + (ue8m0 ? " ue8m0" : "");
      Tensor gu = test::to_device(test::randn({M, ld}, rng, 3.0f));  // |gate| up to ~12: both tails of the SiLU
      // The reference: silu_mul over a contiguous copy of the gate|up columns, then quant_act.
      Tensor packed = Tensor::empty({M, 2 * inter}, DType::kBF16, Device::kCuda);
      DS_CUDA_CHECK(cudaMemcpy2DAsync(packed.data(), 2 * inter * 2, gu.data(), ld * 2, 2 * inter * 2, M,
                                      cudaMemcpyDeviceToDevice, cuda_stream()));
      Tensor want_h = Tensor::empty({M, inter}, DType::kBF16, Device::kCuda);
      ASSERT_EQ(kernels::launch_silu_mul(packed.data(), want_h.data(), M, inter, cuda_stream()), cudaSuccess);
      Tensor want_q, want_s;
      ASSERT_EQ(test::quant_act(want_h, ue8m0, cuda_stream(), &want_q, &want_s), cudaSuccess);
      for (bool with_out : {true, false}) {
        Tensor h = Tensor::empty({M, inter}, DType::kBF16, Device::kCuda);  // NaN-poisoned
        Tensor q = Tensor::empty({M, inter}, DType::kF8E4M3, Device::kCuda);
        Tensor sc = Tensor::empty({M, inter / 128}, DType::kF32, Device::kCuda);
        const kernels::Fp8QuantParams p = kernels::fp8_silu_quant_params(
            gu.data(), ld, M, inter, q.data_as<uint8_t>(), sc.data_as<float>(), ue8m0, with_out ? h.data() : nullptr);
        ASSERT_TRUE(kernels::fp8_quant_act_silu_supported(p)) << what;
        ASSERT_EQ(kernels::launch_fp8_quant_act(p, cuda_stream()), cudaSuccess) << what;
        EXPECT_TRUE(test::same_device_bits(q, want_q)) << what << ": e4m3 bytes";
        EXPECT_TRUE(test::same_device_bits(sc, want_s)) << what << ": scales";
        if (with_out) {
          EXPECT_TRUE(test::same_device_bits(h, want_h)) << what << ": silu_mul output";
        }
      }
    }
  kernels::Fp8QuantParams bad;
  bad.silu = true;
  bad.x = reinterpret_cast<const void*>(uintptr_t{256});
  bad.M = 4;
  bad.K = bad.Kp = 200;  // not whole 128-groups
  bad.ldx = 400;
  bad.up_off = 200;
  EXPECT_FALSE(kernels::fp8_quant_act_silu_supported(bad));
  bad.K = bad.Kp = 128;
  bad.up_off = 64;  // up overlapping the gate
  EXPECT_FALSE(kernels::fp8_quant_act_silu_supported(bad));
  bad.up_off = 128;
  bad.ldx = 256;
  EXPECT_TRUE(kernels::fp8_quant_act_silu_supported(bad));
  bad.M_pad = 8;  // pad rows are cuBLASLt's layout, not this mode's
  EXPECT_FALSE(kernels::fp8_quant_act_silu_supported(bad));
  EXPECT_EQ(kernels::launch_fp8_quant_act(bad, cuda_stream()), cudaErrorInvalidValue);
}

struct Shape3 {
  int64_t n, k;
};

void check_gemm(Fp8Gemm& gemm, Fp8Path path, const Shape3& sh, int64_t M, bool ue8m0, std::mt19937& rng) {
  LinearWeight hw = random_fp8_weight(sh.n, sh.k, ue8m0, rng);
  Fp8Weight w = prepare_fp8_weight(hw);
  Tensor xf = test::randn({M, sh.k}, rng, 1.0f);
  if (M > 2)
    for (int64_t j = 0; j < sh.k; ++j) xf.f32()[1 * sh.k + j] *= 32.0f;  // one outlier token (bf16-exact)
  Tensor xd = test::to_device(xf);
  if (path == Fp8Path::kCublasLt) {  // else linear() falls back to chunked small-M and this case proves nothing
    const int64_t Mp = (M + Fp8Gemm::kLtRowMultiple - 1) / Fp8Gemm::kLtRowMultiple * Fp8Gemm::kLtRowMultiple;
    EXPECT_TRUE(gemm.lt_supported(Mp, w.Np, w.Kp)) << "cuBLASLt rejects M " << Mp << " N " << w.Np << " K " << w.Kp;
  }
  Tensor y = gemm.linear(xd, w, ue8m0, path);
  Tensor want = linear_w8a8_reference(xf, hw, ue8m0);
  char what[128];
  std::snprintf(what, sizeof(what), "fp8 %s M=%lld N=%lld K=%lld%s", path == Fp8Path::kSmallM  ? "small_m"
                                                                   : path == Fp8Path::kWgmma ? "wgmma"
                                                                                             : "cublaslt",
                static_cast<long long>(M), static_cast<long long>(sh.n), static_cast<long long>(sh.k),
                ue8m0 ? " ue8m0" : "");
  DS_EXPECT_CLOSE(test::to_host_f32(y), want, kMaxRel, kL2Rel, what);
}

// The transpose behind cuBLASLt's column-major output: exact, ragged tile edges included.
TEST_F(Fp8GemmGpu, TransposeBf16IsExact) {
  std::mt19937 rng(12);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{37, 70}, {1, 300}, {256, 1}, {64, 64}}) {
    Tensor h = test::randn({rows, cols}, rng, 1.0f);
    Tensor src = test::to_device(h);
    Tensor dst = Tensor::empty({cols, rows}, DType::kBF16, Device::kCuda);
    kernels::TransposeBf16Params p;
    p.src = src.data();
    p.dst = dst.data();
    p.rows = rows;
    p.cols = cols;
    ASSERT_EQ(kernels::launch_transpose_bf16(p, cuda_stream()), cudaSuccess);
    Tensor got = test::to_host_f32(dst);
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) bad += got.f32()[c * rows + r] != h.f32()[r * cols + c];
    EXPECT_EQ(bad, 0) << rows << "x" << cols;
  }
}

// Ragged shapes: the fused q_a + kv_a output (2112 = 16.5 blocks) scaled down to 264 rows, K = 1000 (ragged
// last block), kv_b-like 576 x 1536, and a K = 7168 / 4 block-aligned one.
const Shape3 kShapes[] = {{264, 1000}, {576, 1536}, {2112, 448}, {384, 1792}};

// Both kernel families at <= 16 tokens: weights staged through shared memory (the default) and held in registers
// (DSERVE_FP8_STAGED=0, read per launch).
TEST_F(Fp8GemmGpu, SmallMKernelMatchesReference) {
  Fp8Gemm gemm;
  std::mt19937 rng(3);
  for (const char* staged : {"1", "0"}) {
    SCOPED_TRACE(std::string("DSERVE_FP8_STAGED=") + staged);
    const test::ScopedEnv env("DSERVE_FP8_STAGED", staged);
    for (const Shape3& sh : kShapes)
      for (int64_t M : {1, 3, 8, 13, 33, 64}) check_gemm(gemm, Fp8Path::kSmallM, sh, M, false, rng);
    for (int64_t M : {1, 8, 64}) check_gemm(gemm, Fp8Path::kSmallM, kShapes[0], M, true, rng);
  }
}

// Which cuBLASLt scale layout matches (informational: the first device run tells the right one); the default
// layout must be one of them.
TEST_F(Fp8GemmGpu, CublasLtScaleLayoutProbe) {
  std::mt19937 rng(5);
  const int64_t M = 65, N = 256, K = 512;
  LinearWeight hw = random_fp8_weight(N, K, false, rng);
  Fp8Weight w = prepare_fp8_weight(hw);
  Tensor xf = test::randn({M, K}, rng, 1.0f);
  for (int64_t j = 0; j < K; ++j) xf.f32()[3 * K + j] *= 32.0f;  // bf16-exact: the device sees the same x
  Tensor xd = test::to_device(xf);
  Tensor want = linear_w8a8_reference(xf, hw, false);
  Fp8Gemm gemm;
  const int def = gemm.lt_layout();
  ASSERT_TRUE(gemm.lt_supported(80, w.Np, w.Kp));  // linear() pads M = 65 to 80 rows
  bool default_ok = false;
  for (int layout = 0; layout < 8; ++layout) {
    if (!(layout & 1) && (layout & 4)) continue;  // bit 2 only matters K-block-major
    gemm.set_lt_layout(layout);
    test::Err e = test::compare(test::to_host_f32(gemm.linear(xd, w, false, Fp8Path::kCublasLt)), want);
    const bool ok = e.nan == 0 && e.max_rel <= kMaxRel && e.l2_rel <= kL2Rel;
    std::printf("LAYOUT %d %s %s\n", layout, ok ? "MATCH" : "no", e.str().c_str());
    if (layout == def) default_ok = ok;
  }
  EXPECT_TRUE(default_ok) << "default cuBLASLt scale layout " << def << " does not match; see LAYOUT lines";
}

TEST_F(Fp8GemmGpu, CublasLtMatchesReference) {
  Fp8Gemm gemm;
  std::mt19937 rng(4);
  for (const Shape3& sh : kShapes)
    for (int64_t M : {1, 3, 8, 64, 65, 300}) check_gemm(gemm, Fp8Path::kCublasLt, sh, M, false, rng);
  for (int64_t M : {8, 65, 300}) check_gemm(gemm, Fp8Path::kCublasLt, kShapes[0], M, true, rng);
}

// The wgmma GEMM into a NaN-poisoned buffer of M + 3 rows at M tokens: the rows past M stay NaN, the head matches the
// reference, and a second run gives the same bits.
void check_wgmma_poisoned_and_repeatable(Fp8Gemm& gemm, const Shape3& sh, int64_t M, std::mt19937& rng) {
  const int64_t rows = M + 3, ld = sh.n;
  LinearWeight hw = random_fp8_weight(sh.n, sh.k, false, rng);
  Fp8Weight w = prepare_fp8_weight(hw);
  ASSERT_TRUE(w.map.valid);
  Tensor xf = test::randn({M, sh.k}, rng, 1.0f);
  Tensor xd = test::to_device(xf);
  Tensor buf = Tensor::empty({rows, ld}, DType::kBF16, Device::kCuda);
  Tensor first;
  for (int run = 0; run < 2; ++run) {
    DS_CUDA_CHECK(cudaMemset(buf.data(), 0xFF, buf.nbytes()));  // bf16 NaN everywhere
    Tensor y = Tensor::wrap(buf.data(), {M, sh.n}, DType::kBF16, Device::kCuda, nullptr);
    gemm.linear_to(xd, w, false, Fp8Path::kWgmma, y, M);
    Tensor all = test::to_host_f32(buf);
    int64_t poisoned_tail = 0;
    for (int64_t i = M * ld; i < rows * ld; ++i) poisoned_tail += std::isnan(all.f32()[i]);
    EXPECT_EQ(poisoned_tail, (rows - M) * ld) << "rows past M written";
    Tensor head = Tensor::empty({M, sh.n}, DType::kF32);
    std::memcpy(head.data(), all.data(), head.nbytes());
    DS_EXPECT_CLOSE(head, linear_w8a8_reference(xf, hw, false), kMaxRel, kL2Rel, "wgmma poisoned output");
    if (run == 0) first = head;
    else DS_EXPECT_CLOSE(head, first, 0.0, 0.0, "wgmma second run");
  }
}

// The split-K wgmma GEMM: every token-column width (16 / 32 / 64), ragged N and K, ue8m0, one K range and one block a
// range; outputs poisoned around the written rows and columns stay untouched; a second run gives the same bits (the
// tickets are left zero and the partials summed in split order).
TEST_F(Fp8GemmGpu, WgmmaSplitKMatchesReference) {
  Fp8Gemm gemm;
  std::mt19937 rng(21);
  for (auto [ctas, min_blocks] : {std::pair<int64_t, int64_t>{0, 2}, {1, 1}, {100000, 1}}) {
    SCOPED_TRACE("ctas " + std::to_string(ctas) + " min_blocks " + std::to_string(min_blocks));
    gemm.set_wgmma_split_policy(ctas, min_blocks);
    for (const Shape3& sh : kShapes)
      for (int64_t M : {1, 3, 16, 17, 33, 64}) check_gemm(gemm, Fp8Path::kWgmma, sh, M, false, rng);
    for (int64_t M : {5, 40}) check_gemm(gemm, Fp8Path::kWgmma, kShapes[0], M, true, rng);
  }
  gemm.set_wgmma_split_policy(0, 2);
  EXPECT_GT(gemm.wgmma_splits(64, 2048, 2048), 1);
  EXPECT_EQ(gemm.wgmma_splits(64, 2048, 128), 1);
  check_wgmma_poisoned_and_repeatable(gemm, {576, 1536}, 37, rng);
}

// The K split summed inside thread-block clusters (DSERVE_FP8_WGMMA_CLUSTER): every cluster size at every token-column
// width, ragged N and K, ue8m0, ranges of one block; rows past M untouched and a second run the same bits.
TEST_F(Fp8GemmGpu, WgmmaClusterSplitMatchesReference) {
  Fp8Gemm gemm;
  std::mt19937 rng(25);
  gemm.set_wgmma_split_policy(0, 1);
  const Shape3 deep{200, 2048};  // 16 K blocks: a cluster of 8 takes two each
  for (int c : {2, 4, 8}) {
    SCOPED_TRACE("cluster " + std::to_string(c));
    gemm.set_wgmma_cluster(c);
    for (int64_t M : {1, 16, 17, 33, 64}) {
      EXPECT_EQ(gemm.wgmma_cluster(M, 256, 2048), c) << "M " << M;
      EXPECT_EQ(gemm.wgmma_splits(M, 256, 2048), c) << "M " << M;
      check_gemm(gemm, Fp8Path::kWgmma, deep, M, false, rng);
    }
    for (const Shape3& sh : kShapes)
      for (int64_t M : {3, 40}) check_gemm(gemm, Fp8Path::kWgmma, sh, M, false, rng);
    check_gemm(gemm, Fp8Path::kWgmma, deep, 40, true, rng);
    check_wgmma_poisoned_and_repeatable(gemm, deep, 37, rng);
  }
  // Past one range (49 blocks): a cluster covers K (two ranges of 25 blocks).
  gemm.set_wgmma_cluster(8);
  EXPECT_EQ(gemm.wgmma_cluster(64, 8192, 128 * 49), 2);
  check_gemm(gemm, Fp8Path::kWgmma, {320, 128 * 49 - 100}, 48, false, rng);
  EXPECT_EQ(gemm.wgmma_cluster(64, 256, 128), 1);  // one block: nothing to split
  // 16 blocks over a hundred thousand tiles: no cluster inside one wave, or four; one covers K, so none.
  EXPECT_EQ(gemm.wgmma_cluster(64, 64 << 17, 2048), 1);
  gemm.set_wgmma_cluster(8, 1 << 20);
  EXPECT_EQ(gemm.wgmma_cluster(64, 64 << 17, 2048), 8);
}

// The cover mode (DSERVE_FP8_WGMMA_COVER): kAuto takes the clustered wgmma GEMM only for weights whose K needs more
// than one range, only inside its token range, whatever their size; there its output is the forced wgmma path's bits
// and matches the reference. One-range weights keep the default dispatch.
TEST_F(Fp8GemmGpu, WgmmaCoverModeTakesOnlyKSplitWeights) {
  Fp8Gemm gemm;
  std::mt19937 rng(31);
  gemm.set_wgmma_cover(8, 17, 32);
  const int64_t kDeep = 128 * 56;  // V3's hidden size: 56 blocks, past one range
  ASSERT_GT(kDeep / 128, kernels::kFp8WgmmaMaxBlocks);
  const LinearWeight deep_host = random_fp8_weight(320, kDeep - 60, false, rng);
  LinearWeight deep = gemm.prepare(deep_host);
  const Fp8Weight deep_w = prepare_fp8_weight(deep_host);
  LinearWeight big = gemm.prepare(random_fp8_weight(2048, kDeep, false, rng));  // 14.7 MB: past the 12 MiB cap
  LinearWeight one = gemm.prepare(random_fp8_weight(576, 1536, false, rng));
  for (int64_t M : {1, 16, 17, 24, 32, 33, 48, 64}) {
    const bool in = M >= 17 && M <= 32;
    EXPECT_EQ(gemm.wgmma_takes(deep, M), in) << "M " << M;
    EXPECT_EQ(gemm.wgmma_takes(big, M), in) << "M " << M;
    EXPECT_EQ(gemm.wgmma_takes(one, M), M >= gemm.wgmma_min_m()) << "M " << M;
    EXPECT_EQ(gemm.wgmma_cluster(M, 384, kDeep) > 1, in) << "M " << M;
    EXPECT_EQ(gemm.wgmma_cluster(M, 640, 1536), 1) << "M " << M;
  }
  for (int64_t M : {17, 24, 32}) {
    Tensor xf = test::randn({M, kDeep - 60}, rng, 1.0f);
    Tensor xd = test::to_device(xf);
    Tensor y_auto = gemm.linear(xd, deep_w, false, Fp8Path::kAuto);
    Tensor y_wgmma = gemm.linear(xd, deep_w, false, Fp8Path::kWgmma);
    DS_EXPECT_CLOSE(test::to_host_f32(y_auto), test::to_host_f32(y_wgmma), 0.0, 0.0,
                    "cover mode auto = wgmma M=" + std::to_string(M));
    check_gemm(gemm, Fp8Path::kAuto, {320, kDeep - 60}, M, false, rng);
  }
  // Off (the default): the K-split weight goes to cuBLASLt / the small-M kernel everywhere.
  gemm.set_wgmma_cover(0);
  for (int64_t M : {17, 24, 32, 48}) EXPECT_FALSE(gemm.wgmma_takes(deep, M)) << "M " << M;
}

// A producer's token-major quantization (the norm's / MLA combine's, here quant_act's: the same bits) read by the wgmma
// GEMM in its token range equals linear() on the bf16 rows; outside the range linear_quantized_small_m declines (the
// caller quantizes again), as wgmma_takes says.
TEST_F(Fp8GemmGpu, WgmmaReadsAProducersQuantization) {
  Fp8Gemm gemm;
  std::mt19937 rng(23);
  const int64_t N = 576, K = 1536;
  LinearWeight pw = gemm.prepare(random_fp8_weight(N, K, false, rng));
  for (int64_t M : {gemm.wgmma_min_m() - 13, gemm.wgmma_min_m(), int64_t{64}}) {
    Tensor x = test::to_device(test::randn({M, K}, rng, 1.0f));
    Tensor q, sx;
    DS_CUDA_CHECK(test::quant_act(x, false, cuda_stream(), &q, &sx));
    const bool in_range = M >= gemm.wgmma_min_m() && M <= 64;
    EXPECT_EQ(gemm.wgmma_takes(pw, M), in_range) << "M " << M;
    Tensor y;
    const bool took = gemm.linear_quantized_small_m(q, sx, false, pw, &y);
    if (M > gemm.small_m_max_for(640, K) && !in_range) {
      EXPECT_FALSE(took) << "M " << M;
      continue;
    }
    ASSERT_TRUE(took) << "M " << M;
    DS_EXPECT_CLOSE(test::to_host_f32(y), test::to_host_f32(gemm.linear(x, pw)), 0.0, 0.0,
                    "wgmma on a producer's quantization M=" + std::to_string(M));
  }
}

// The fallback for shapes cuBLASLt rejects: the small-M kernel over 64-token chunks.
TEST_F(Fp8GemmGpu, SmallMChunkedBeyond64) {
  Fp8Gemm gemm;
  std::mt19937 rng(9);
  for (int64_t M : {65, 150}) check_gemm(gemm, Fp8Path::kSmallM, kShapes[0], M, false, rng);
}

TEST_F(Fp8GemmGpu, AutoDispatchBothSides) {
  Fp8Gemm gemm;
  std::mt19937 rng(6);
  for (int64_t M : {gemm.small_m_max(), gemm.small_m_max() + 1, gemm.wgmma_min_m(), int64_t{64}, int64_t{65}})
    check_gemm(gemm, Fp8Path::kAuto, kShapes[1], M, false, rng);
}

// CudaOps' hooks: prepare() keeps e4m3 + scales on the device and infers ue8m0 activation scales from
// power-of-two weight scales; linear() on the prepared view matches the reference with that flag.
TEST_F(Fp8GemmGpu, PreparedHooksInferUe8m0) {
  Fp8Gemm gemm;
  std::mt19937 rng(8);
  for (bool ue8m0 : {false, true}) {
    LinearWeight hw = random_fp8_weight(264, 1000, ue8m0, rng);
    EXPECT_EQ(fp8_scales_are_pow2(hw.scale_inv), ue8m0);
    LinearWeight pw = gemm.prepare(hw);
    EXPECT_TRUE(gemm.owns(pw));
    EXPECT_EQ(pw.out_features(), 264);
    EXPECT_EQ(pw.in_features(), 1000);
    for (int64_t M : {2, 100}) {
      Tensor xf = test::randn({M, 1000}, rng, 1.0f);
      Tensor y = gemm.linear(test::to_device(xf), pw);
      DS_EXPECT_CLOSE(test::to_host_f32(y), linear_w8a8_reference(xf, hw, ue8m0), kMaxRel, kL2Rel,
                      std::string("fp8 prepared M=") + std::to_string(M) + (ue8m0 ? " ue8m0" : ""));
    }
  }
}

// linear_pair: one quantization for two weights of the same K at small M gives each weight's linear() bit for bit;
// it declines (false) where either weight would leave the small-M kernel or the pair disagrees on K or ue8m0.
// pair.linear_pair(x, a, b) at each M equals, to the bit, ref.linear(x, ra) and ref.linear(x, rb) (the same host
// weights as a, b, prepared by `ref`).
void expect_pair_matches(Fp8Gemm& pair, const LinearWeight& a, const LinearWeight& b, Fp8Gemm& ref,
                         const LinearWeight& ra, const LinearWeight& rb, std::initializer_list<int64_t> rows,
                         std::mt19937& rng, const std::string& name) {
  const int64_t K = a.in_features();
  for (int64_t M : rows) {
    Tensor x = test::to_device(test::randn({M, K}, rng, 1.0f));
    Tensor y1, y2;
    ASSERT_TRUE(pair.linear_pair(x, a, b, &y1, &y2)) << name << " M " << M;
    const std::string what = name + " M=" + std::to_string(M);
    DS_EXPECT_CLOSE(test::to_host_f32(y1), test::to_host_f32(ref.linear(x, ra)), 0.0, 0.0, what + " first");
    DS_EXPECT_CLOSE(test::to_host_f32(y2), test::to_host_f32(ref.linear(x, rb)), 0.0, 0.0, what + " second");
  }
}

TEST_F(Fp8GemmGpu, LinearPairSharesTheQuantization) {
  Fp8Gemm gemm;
  gemm.set_fused_small_m(false);  // the two-launch pair (the one-launch pair: FusedPairMatchesTwoLinears)
  std::mt19937 rng(10);
  const int64_t K = 1000;
  LinearWeight a = gemm.prepare(random_fp8_weight(264, K, false, rng));
  LinearWeight b = gemm.prepare(random_fp8_weight(576, K, false, rng));
  expect_pair_matches(gemm, a, b, gemm, a, b, {1, 5, 16}, rng, "fp8 linear_pair");
  // In the wgmma GEMM's token range (33-64 by default): both on it from one quantization; between the small-M
  // kernel's M and that range, and past 64, the pair declines.
  ASSERT_GT(gemm.wgmma_min_m(), gemm.small_m_max_for(384, 1024) + 1);
  expect_pair_matches(gemm, a, b, gemm, a, b, {gemm.wgmma_min_m(), 64}, rng, "fp8 linear_pair wgmma");
  // Both products in one launch (set_wgmma_pair, DSERVE_FP8_WGMMA_PAIR): the two launches' bits (ragged N on both).
  gemm.set_wgmma_pair(true);
  expect_pair_matches(gemm, a, b, gemm, a, b, {gemm.wgmma_min_m(), 64}, rng, "fp8 linear_pair wgmma one launch");
  gemm.set_wgmma_pair(false);
  Tensor y1, y2;
  Tensor big = test::to_device(test::randn({65, K}, rng, 1.0f));
  EXPECT_FALSE(gemm.linear_pair(big, a, b, &y1, &y2));
  Tensor mid = test::to_device(test::randn({gemm.small_m_max_for(384, 1024) + 1, K}, rng, 1.0f));
  EXPECT_FALSE(gemm.linear_pair(mid, a, b, &y1, &y2));
  gemm.set_wgmma_range(1, 64);  // ahead of the small-M kernel too
  expect_pair_matches(gemm, a, b, gemm, a, b, {5, 17}, rng, "fp8 linear_pair wgmma from 1");
  gemm.set_wgmma_pair(true);  // 16 and 32 token columns
  expect_pair_matches(gemm, a, b, gemm, a, b, {5, 17}, rng, "fp8 linear_pair wgmma one launch from 1");
  gemm.set_wgmma_pair(false);
  gemm.set_wgmma_enabled(false);
  Tensor in_range = test::to_device(test::randn({40, K}, rng, 1.0f));
  EXPECT_FALSE(gemm.linear_pair(in_range, a, b, &y1, &y2));
  gemm.set_wgmma_enabled(true);
  gemm.set_wgmma_range(33, 64);
  LinearWeight other_k = gemm.prepare(random_fp8_weight(128, 512, false, rng));
  EXPECT_FALSE(gemm.linear_pair(test::to_device(test::randn({2, K}, rng, 1.0f)), a, other_k, &y1, &y2));
  LinearWeight pow2 = gemm.prepare(random_fp8_weight(128, K, true, rng));
  EXPECT_FALSE(gemm.linear_pair(test::to_device(test::randn({2, K}, rng, 1.0f)), a, pow2, &y1, &y2));
}

// The fused small-M paths (Fp8Gemm::set_fused_small_m, DSERVE_FP8_FUSED_SMALL_M): at M <= 8 the small-M kernel quantizes x itself, which
// must give exactly quant_act's bytes, so the output equals the two-launch path's to the bit; ragged N / K, ue8m0,
// K % 4 != 0 (not fused: the same path as before) and M past 8 (quantized first) included.
TEST_F(Fp8GemmGpu, FusedSmallMQuantizesAsQuantAct) {
  Fp8Gemm plain, fused;
  plain.set_fused_small_m(false);
  fused.set_fused_small_m(true);
  std::mt19937 rng(21);
  for (const char* staged : {"1", "0"}) {  // DSERVE_FP8_STAGED: both kernel families
    SCOPED_TRACE(std::string("DSERVE_FP8_STAGED=") + staged);
    const test::ScopedEnv env("DSERVE_FP8_STAGED", staged);
    for (const Shape3& sh : {Shape3{264, 1000}, Shape3{576, 2048}, Shape3{136, 1002}, Shape3{2048, 7168}})
      for (bool ue8m0 : {false, true}) {
        const LinearWeight hw = random_fp8_weight(sh.n, sh.k, ue8m0, rng);
        const LinearWeight wp = plain.prepare(hw), wf = fused.prepare(hw);
        for (int64_t M : {1, 3, 8, 9, 40}) {
          Tensor x = test::to_device(test::randn({M, sh.k}, rng, 1.0f));
          const std::string what = "fp8 fused quant M=" + std::to_string(M) + " N=" + std::to_string(sh.n) +
                                   " K=" + std::to_string(sh.k) + (ue8m0 ? " ue8m0" : "");
          DS_EXPECT_CLOSE(test::to_host_f32(fused.linear(x, wf)), test::to_host_f32(plain.linear(x, wp)), 0.0, 0.0,
                          what);
        }
      }
  }
}

// The fused path's linear_pair: both GEMMs in one launch (quantizing in the kernel at M <= 8), each output equal to
// linear()'s of the plain path.
TEST_F(Fp8GemmGpu, FusedPairMatchesTwoLinears) {
  Fp8Gemm plain, fused;
  plain.set_fused_small_m(false);
  fused.set_fused_small_m(true);
  std::mt19937 rng(22);
  const int64_t K = 1000;
  const LinearWeight ha = random_fp8_weight(264, K, false, rng), hb = random_fp8_weight(576, K, false, rng);
  const LinearWeight pa = plain.prepare(ha), pb = plain.prepare(hb), fa = fused.prepare(ha), fb = fused.prepare(hb);
  expect_pair_matches(fused, fa, fb, plain, pa, pb, {1, 5, 8, 12, 16}, rng, "fp8 fused linear_pair");
}

// The fused path's linear_silu: [gate; up] (intermediate padded to 128 as prepare_mlp does) with the SiLU in the
// GEMM's epilogue, against the W8A8 reference of the stacked weight with the SiLU in fp32 (one rounding, as the
// kernel does); off, linear_silu declines.
TEST_F(Fp8GemmGpu, FusedSiluMatchesTheReference) {
  Fp8Gemm plain, fused;
  plain.set_fused_small_m(false);
  fused.set_fused_small_m(true);
  std::mt19937 rng(23);
  for (int64_t inter : {256, 200})
    for (bool ue8m0 : {false, true}) {
      const int64_t K = 1024;
      const LinearWeight g = random_fp8_weight(inter, K, ue8m0, rng), u = random_fp8_weight(inter, K, ue8m0, rng),
                         d = random_fp8_weight(K, inter, ue8m0, rng);
      const Fp8Mlp mlp = stack_mlp_fp8(g, u, d);
      const int64_t ip = mlp.gate_up.out_features() / 2;
      const LinearWeight gu = fused.prepare(mlp.gate_up), gu_plain = plain.prepare(mlp.gate_up);
      for (int64_t M : {1, 4, 8, 13, 16}) {
        Tensor xf = test::randn({M, K}, rng, 1.0f);
        Tensor x = test::to_device(xf);
        Tensor y;
        ASSERT_TRUE(fused.linear_silu(x, gu, &y)) << "M " << M;
        EXPECT_FALSE(plain.linear_silu(x, gu_plain, &y)) << "M " << M;
        ASSERT_TRUE(fused.linear_silu(x, gu, &y)) << "M " << M;
        ASSERT_EQ(y.dim(1), ip);
        Tensor both = linear_w8a8_reference(xf, mlp.gate_up, ue8m0);  // [M, 2 ip]
        Tensor want = Tensor::empty({M, ip}, DType::kF32);
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < ip; ++n) {
            const float gv = both.f32()[m * 2 * ip + n], uv = both.f32()[m * 2 * ip + ip + n];
            want.f32()[m * ip + n] = gv / (1.0f + std::exp(-gv)) * uv;
          }
        DS_EXPECT_CLOSE(test::to_host_f32(y), want, kMaxRel, kL2Rel,
                        "fp8 fused silu M=" + std::to_string(M) + " inter " + std::to_string(inter) +
                            (ue8m0 ? " ue8m0" : ""));
      }
    }
}

// Absorbed MLA's W8A8 per-head products on CUDA (Ops::bmm_heads_fp8 and mla_absorb_q_fp8: one quantization of
// every (token, head) row, then the batched small-M kernel over 64-token chunks) against the CPU's exact
// emulation on the same bf16-representable inputs: V2-Lite's heads (16, nope 128, v 128, kv_lora 512), ue8m0 too,
// token counts across the chunking; without DSERVE_FP8_BMM=1 (the default) prepare declines.
TEST_F(Fp8GemmGpu, AbsorbedHeadProductsMatchTheCpu) {
  test::ScopedEnv bmm("DSERVE_FP8_BMM", "1");  // read per call
  std::unique_ptr<Ops> gpu, cpu;
  {
    const test::ScopedEnv native("DSERVE_FP8_NATIVE", "1");  // read when a backend is made
    gpu = make_cuda_ops(0);
    cpu = make_cpu_ops();
  }
  std::mt19937 rng(31);
  const int64_t H = 16, nope = 128, v = 128, lora = 512, rope = 64;
  auto bf16_randn = [&](Shape shape) {
    Tensor t = test::randn(shape, rng, 1.0f);
    for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = round_bf16(t.f32()[i]);
    return t;
  };
  Tensor inv_freq = Tensor::empty({rope / 2}, DType::kF32);
  for (int64_t i = 0; i < rope / 2; ++i) inv_freq.f32()[i] = std::pow(10000.0f, -2.0f * i / rope);
  for (bool ue8m0 : {false, true}) {
    const LinearWeight kv_b = random_fp8_weight(H * (nope + v), lora, ue8m0, rng);
    HeadsFp8 gkc, gvc, ckc, cvc;
    ASSERT_TRUE(gpu->prepare_absorbed_fp8(kv_b, H, nope, v, &gkc, &gvc));
    ASSERT_TRUE(cpu->prepare_absorbed_fp8(kv_b, H, nope, v, &ckc, &cvc));
    EXPECT_EQ(gkc.ue8m0, ue8m0);
    for (int64_t T : {1, 7, 70}) {
      const std::string what = std::string(ue8m0 ? "ue8m0 " : "") + "T " + std::to_string(T);
      Tensor o_lat = bf16_randn({T, H, lora});
      DS_EXPECT_CLOSE(test::to_host_f32(gpu->bmm_heads_fp8(test::to_device(o_lat), gvc)), cpu->bmm_heads_fp8(o_lat, cvc),
                      kMaxRel, kL2Rel, "bmm_heads_fp8 w_vc " + what);
      Tensor q = bf16_randn({T, H, nope + rope});
      Tensor pos = Tensor::empty({T}, DType::kI32);
      for (int64_t t = 0; t < T; ++t) pos.data_as<int32_t>()[t] = static_cast<int32_t>(3 * t + 1);
      Tensor want = cpu->mla_absorb_q_fp8(q, ckc, pos, inv_freq, 1.0f);  // [T, H, lora + rope]
      Tensor got = test::to_host_f32(gpu->mla_absorb_q_fp8(test::to_device(q), gkc, cuda_upload(pos),
                                                           cuda_upload(inv_freq), 1.0f));
      DS_EXPECT_CLOSE(got, want, kMaxRel, kL2Rel, "mla_absorb_q_fp8 " + what);
    }
  }
  bmm.set(nullptr);
  HeadsFp8 a, b;
  EXPECT_FALSE(gpu->prepare_absorbed_fp8(random_fp8_weight(H * (nope + v), lora, false, rng), H, nope, v, &a, &b));
  EXPECT_FALSE(a.defined());
}

// linear_into: segments laid back to back (the per-expert prefill GEMMs) in one NaN-poisoned buffer with spare
// rows. Each segment's cuBLASLt padding may spill into the next segment's rows before that segment is written,
// so after all of them every row equals linear()'s; the spare rows hold nothing but finite pad results.
TEST_F(Fp8GemmGpu, LinearIntoBackToBackSegments) {
  Fp8Gemm gemm;
  std::mt19937 rng(9);
  const int64_t N = 384, K = 1024;
  LinearWeight pw = gemm.prepare(random_fp8_weight(N, K, false, rng));
  const std::vector<int64_t> counts = {37, 1, 0, 16, 100, 5, 64};  // small-M and cuBLASLt sizes, ragged
  int64_t rows = 0;
  for (int64_t c : counts) rows += c;
  Tensor x = test::to_device(test::randn({rows, K}, rng, 1.0f));
  const int64_t spare = Fp8Gemm::kLtRowMultiple;
  Tensor buf = Tensor::empty({rows + spare, N}, DType::kBF16, Device::kCuda);  // poisoned
  int64_t off = 0;
  for (int64_t c : counts) {
    if (c > 0) gemm.linear_into(x.rows(off, off + c), pw, buf.rows(off, off + c).data(), rows + spare - off);
    off += c;
  }
  Tensor got = test::to_host_f32(buf.rows(0, rows));
  Tensor want = test::to_host_f32(gemm.linear(x, pw));
  off = 0;
  for (int64_t c : counts) {
    if (c > 0) {  // each segment on its own, as the experts run
      Tensor seg = test::to_host_f32(gemm.linear(x.rows(off, off + c), pw));
      int64_t bad = 0;
      for (int64_t i = 0; i < c * N; ++i) bad += got.f32()[off * N + i] != seg.f32()[i];
      EXPECT_EQ(bad, 0) << "segment at " << off << " of " << c << " rows";
    }
    off += c;
  }
  DS_EXPECT_CLOSE(got, want, kMaxRel, kL2Rel, "fp8 linear_into segments vs one linear");
  // Exactly M rows when the buffer has no spare row (the temporary path).
  Tensor tight = Tensor::empty({37, N}, DType::kBF16, Device::kCuda);
  gemm.linear_into(x.rows(0, 37), pw, tight.data(), 37);
  DS_EXPECT_CLOSE(test::to_host_f32(tight), test::to_host_f32(gemm.linear(x.rows(0, 37), pw)), 0.0, 0.0,
                  "fp8 linear_into without spare rows");
}

}  // namespace
}  // namespace ds
