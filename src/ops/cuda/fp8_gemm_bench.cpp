// dserve_fp8_gemm_bench: block-FP8 linears at DeepSeek-V3 shapes (issue 7) for M = 1, 8, 16, 32, 64, 256, 4096:
// ours (Fp8Gemm::linear with the per-GPU table dserve loads, configs/fp8_gemm/<GPU>.json or
// DSERVE_FP8_GEMM_CONFIG: quantize + small-M kernel up to the shape's small_m_max, else quantize + cuBLASLt),
// cuBLASLt block-scaled FP8 alone (pre-quantized operands) and cuBLASLt bf16, each as us, TFLOP/s, GB/s and
// fraction of roofline (max(bytes / copy bandwidth, flops / peak), copy bandwidth measured in this run), the calls
// replayed from a CUDA graph as decode steps run them. Weights rotate over enough copies to defeat the 50 MB L2.
// Usage: dserve_fp8_gemm_bench [--csv PATH] [--filter SUBSTR]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/parse.h"
#include "kernels/pdl.cuh"
#include "ops/cuda/copy_bandwidth.h"
#include "ops/cuda/cublaslt_gemm.h"
#include "ops/cuda/cuda_runtime.h"
#include "ops/cuda/fp8_linear.h"
#include "ops/cuda/graph_timing.h"
#include "ops/cuda/tuning_file.h"
#include "ops/fp8_tuning.h"

namespace ds {
namespace {

constexpr double kPeakFp8 = 1302e12;  // block-scaled FP8 8192^3, ../shared/DEVICE.md (re-check per run)
constexpr double kPeakBf16 = 788e12;  // bf16 8192^3

struct BenchShape {
  const char* name;
  int64_t n, k;
};

void fill_bytes(void* dev, size_t n, uint32_t seed, bool e4m3) {
  std::vector<uint8_t> h(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull | 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    uint8_t b = static_cast<uint8_t>(x >> 24);
    if (e4m3) b &= 0xBF;  // exponent <= 7: finite, never NaN, moderate magnitude
    h[i] = b;
  }
  DS_CUDA_CHECK(cudaMemcpy(dev, h.data(), n, cudaMemcpyHostToDevice));
}

void fill_bf16(void* dev, size_t n, uint32_t seed) {
  std::vector<uint16_t> h(n);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull | 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    // bf16 with exponent 120..127 (|v| in [2^-7, 2)), random sign and mantissa.
    h[i] = static_cast<uint16_t>(((x >> 40) & 0x807F) | ((120 + ((x >> 32) & 7)) << 7));
  }
  DS_CUDA_CHECK(cudaMemcpy(dev, h.data(), n * 2, cudaMemcpyHostToDevice));
}

}  // namespace
}  // namespace ds

int main(int argc, char** argv) {
  using namespace ds;
  std::string csv_path, filter, m_list;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--csv") && i + 1 < argc) {
      csv_path = argv[++i];
    } else if (!std::strcmp(argv[i], "--filter") && i + 1 < argc) {
      filter = argv[++i];
    } else if (!std::strcmp(argv[i], "--ms") && i + 1 < argc) {
      m_list = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--csv PATH] [--filter SUBSTR] [--ms M1,M2,...]\n", argv[0]);
      return 2;
    }
  }
  // The arguments checked before the device is touched: a bad list is reported as such on any machine.
  std::vector<int64_t> ms = {1, 8, 16, 32, 64, 256, 4096};
  if (!m_list.empty()) {
    Result<std::vector<int64_t>> parsed = parse_int_list(m_list, "--ms");
    if (!parsed.is_ok() || std::any_of(parsed->begin(), parsed->end(), [](int64_t m) { return m < 1; })) {
      std::fprintf(stderr, "--ms: bad list %s%s%s\n", m_list.c_str(), parsed.is_ok() ? "" : ": ",
                   parsed.is_ok() ? "" : parsed.status().message().c_str());
      return 2;
    }
    ms = *parsed;
  }
  init_cuda_device(0);
  cudaDeviceProp prop;
  DS_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  const double bw = measure_copy_bandwidth(cuda_stream());
  std::printf("device %s, %d SMs; d2d copy %.0f GB/s (read + write); peaks assumed fp8 %.0f / bf16 %.0f TFLOP/s\n",
              prop.name, prop.multiProcessorCount, bw / 1e9, kPeakFp8 / 1e12, kPeakBf16 / 1e12);
  FILE* csv = csv_path.empty() ? nullptr : std::fopen(csv_path.c_str(), "w");
  if (!csv_path.empty() && !csv) std::fprintf(stderr, "cannot write %s\n", csv_path.c_str());
  if (csv) {
    std::fprintf(csv, "kernel,shape,M,N,K,impl,us,TFLOPs,GBps,frac_roofline,copy_GBps\n");
    std::fprintf(csv, "fp8_gemm,copy,0,0,0,d2d_copy,0,0,%.1f,1,%.1f\n", bw / 1e9, bw / 1e9);
  }

  const BenchShape shapes[] = {{"q_a_kv_a", 2112, 7168},   {"q_b", 24576, 1536},        {"o_proj", 7168, 16384},
                          {"dense_gate_up", 36864, 7168}, {"dense_down", 7168, 18432}, {"expert_gate_up", 4096, 7168},
                          {"expert_down", 7168, 2048},
                          // DeepSeek-V2-Lite's dense decode GEMMs (--quantization fp8): --filter lite_
                          {"lite_q", 3072, 2048}, {"lite_kv_a", 576, 2048}, {"lite_o", 2048, 2048},
                          {"lite_shared_gate_up", 5632, 2048}, {"lite_shared_down", 2048, 2816}};
  Fp8Gemm fp8;
  if (const std::string path = tuning_path("DSERVE_FP8_GEMM_CONFIG", "fp8_gemm", 0); !path.empty()) {
    fp8.set_tuning(load_tuning(path, parse_fp8_gemm_tuning, "FP8 GEMM"));
    std::printf("dispatch table %s\n", path.c_str());
  } else {
    std::printf("no dispatch table for this GPU: small-M kernel up to M = %lld\n",
                static_cast<long long>(fp8.small_m_max()));
  }
  // The wgmma GEMM's residency at each token-column count: CTAs an SM x SMs, and CTAs in whole clusters of 2 / 4 / 8
  // at once (cudaOccupancyMaxActiveClusters: what the cluster policy fills).
  for (int64_t m : {16, 32, 64})
    std::printf("wgmma resident M=%lld: %d CTAs (%d an SM); in clusters of 2 / 4 / 8: %d / %d / %d\n",
                static_cast<long long>(m), kernels::fp8_gemm_wgmma_ctas_per_sm(m) * kernels::device_sm_count(),
                kernels::fp8_gemm_wgmma_ctas_per_sm(m), kernels::fp8_gemm_wgmma_cluster_ctas(2, m),
                kernels::fp8_gemm_wgmma_cluster_ctas(4, m), kernels::fp8_gemm_wgmma_cluster_ctas(8, m));
  CublasLtGemm bf16;
  for (const BenchShape& sh : shapes) {
    if (!filter.empty() && std::string(sh.name).find(filter) == std::string::npos) continue;
    const int64_t Np = (sh.n + 127) / 128 * 128, Kp = (sh.k + 127) / 128 * 128;
    const size_t wbytes = static_cast<size_t>(Np) * Kp;
    const int copies = static_cast<int>(std::clamp<size_t>((size_t{200} << 20) / wbytes + 1, 1, 16));
    std::vector<Fp8Weight> ws(copies);
    for (int c = 0; c < copies; ++c) {
      Fp8Weight& w = ws[c];
      w.N = sh.n;
      w.K = sh.k;
      w.Np = Np;
      w.Kp = Kp;
      w.w = Tensor::empty({Np, Kp}, DType::kF8E4M3, Device::kCuda);
      fill_bytes(w.w.data(), wbytes, 17 + c, true);
      std::vector<float> s(static_cast<size_t>(Np / 128 * Kp / 128));
      for (size_t i = 0; i < s.size(); ++i) s[i] = 1e-3f * (1 + i % 7);
      w.sw = Tensor::empty({Np / 128, Kp / 128}, DType::kF32, Device::kCuda);
      DS_CUDA_CHECK(cudaMemcpy(w.sw.data(), s.data(), s.size() * 4, cudaMemcpyHostToDevice));
      w.sw_t = w.sw;  // same grid values suffice for timing
      const int64_t kb4 = (Kp / 128 + 3) / 4 * 4;  // cuBLASLt's grid: K-block rows padded to 4 (fp8_linear.h)
      w.sw_lt = Tensor::empty({Np / 128, kb4}, DType::kF32, Device::kCuda);
      std::vector<float> sl(static_cast<size_t>(Np / 128 * kb4), 1e-3f);
      DS_CUDA_CHECK(cudaMemcpy(w.sw_lt.data(), sl.data(), sl.size() * 4, cudaMemcpyHostToDevice));
      attach_fp8_weight_map(w);
    }
    const int bcopies = static_cast<int>(std::clamp<size_t>((size_t{200} << 20) / (wbytes * 2) + 1, 1, 8));
    std::vector<Tensor> wb(bcopies);
    for (int c = 0; c < bcopies; ++c) {
      wb[c] = Tensor::empty({sh.n, sh.k}, DType::kBF16, Device::kCuda);
      fill_bf16(wb[c].data(), static_cast<size_t>(sh.n) * sh.k, 31 + c);
    }
    for (int64_t M : ms) {
      Tensor x = Tensor::empty({M, sh.k}, DType::kBF16, Device::kCuda);
      fill_bf16(x.data(), static_cast<size_t>(M) * sh.k, 5);
      const double flops = 2.0 * M * sh.n * sh.k;
      const int iters = flops > 1e12 ? 5 : 20;
      // Pre-quantized operands for cuBLASLt alone.
      // cuBLASLt alone runs on M rounded up to its row multiple, as linear() does.
      const int64_t Mp = (M + Fp8Gemm::kLtRowMultiple - 1) / Fp8Gemm::kLtRowMultiple * Fp8Gemm::kLtRowMultiple;
      Tensor q = Tensor::empty({Mp, Kp}, DType::kF8E4M3, Device::kCuda);
      fill_bytes(q.data(), static_cast<size_t>(Mp) * Kp, 9, true);
      const int64_t sld = std::max(fp8.lt_scale_ld(Mp), Mp);  // also big enough token-major
      Tensor sx = Tensor::empty({Kp / 128, sld}, DType::kF32, Device::kCuda);
      {
        std::vector<float> s(static_cast<size_t>(sx.numel()), 1e-2f);
        DS_CUDA_CHECK(cudaMemcpy(sx.data(), s.data(), s.size() * 4, cudaMemcpyHostToDevice));
      }
      Tensor dpad = Tensor::empty({Mp, Np}, DType::kBF16, Device::kCuda);
      Tensor dbf = Tensor::empty({M, sh.n}, DType::kBF16, Device::kCuda);

      struct Row {
        const char* impl;
        double us, bytes, peak;
      };
      std::vector<Row> rows;
      const double act_out = static_cast<double>(M) * sh.k + static_cast<double>(M) * sh.n * 2;
      const double fp8_bytes = static_cast<double>(wbytes) + wbytes / 16384.0 * 4 + act_out + M * sh.k * 2;
      try {
        rows.push_back({"ours", graph_time_us([&](int i) { fp8.linear(x, ws[i % copies], false); }, iters), fp8_bytes, kPeakFp8});
      } catch (const std::exception& e) {
        std::printf("%s M=%lld ours FAILED: %s\n", sh.name, static_cast<long long>(M), e.what());
      }
      if (M <= kernels::kFp8WgmmaMaxM) {  // the split-K wgmma path alone (quantization included)
        try {
          rows.push_back({"wgmma", graph_time_us([&](int i) { fp8.linear(x, ws[i % copies], false, Fp8Path::kWgmma); }, iters),
                          fp8_bytes, kPeakFp8});
        } catch (const std::exception& e) {
          std::printf("%s M=%lld wgmma FAILED: %s\n", sh.name, static_cast<long long>(M), e.what());
        }
        std::printf("%s M=%lld wgmma splits %d cluster %d\n", sh.name, static_cast<long long>(M),
                    fp8.wgmma_splits(M, Np, Kp), fp8.wgmma_cluster(M, Np, Kp));
      }
      if (!fp8.lt_supported(Mp, Np, Kp)) {
        std::printf("%s M=%lld cublaslt_fp8 unsupported\n", sh.name, static_cast<long long>(M));
      } else try {
        rows.push_back({"cublaslt_fp8",
                        graph_time_us([&](int i) { fp8.run_cublaslt(q.data(), sx.data_as<float>(), ws[i % copies], Mp, dpad.data(), cuda_stream()); },
                                iters),
                        static_cast<double>(wbytes) + wbytes / 16384.0 * 4 + act_out, kPeakFp8});
      } catch (const std::exception& e) {
        std::printf("%s M=%lld cublaslt_fp8 FAILED: %s\n", sh.name, static_cast<long long>(M), e.what());
      }
      try {
        rows.push_back({"cublaslt_bf16",
                        graph_time_us(
                            [&](int i) {
                              GemmArgs g;
                              g.x = x.data();
                              g.ldx = sh.k;
                              g.w = wb[i % bcopies].data();
                              g.ldw = sh.k;
                              g.d = dbf.data();
                              g.ldd = sh.n;
                              g.M = M;
                              g.N = sh.n;
                              g.K = sh.k;
                              bf16.run(g, cuda_stream());
                            },
                            iters),
                        2.0 * sh.n * sh.k + 2.0 * M * sh.k + 2.0 * M * sh.n, kPeakBf16});
      } catch (const std::exception& e) {
        std::printf("%s M=%lld cublaslt_bf16 FAILED: %s\n", sh.name, static_cast<long long>(M), e.what());
      }
      for (const Row& r : rows) {
        const double roof_us = std::max(r.bytes / bw, flops / r.peak) * 1e6;
        const double tf = flops / (r.us * 1e-6) / 1e12, gbs = r.bytes / (r.us * 1e-6) / 1e9;
        std::printf("fp8_gemm %-15s M=%-5lld N=%-6lld K=%-6lld %-14s %9.2f us %8.1f TFLOP/s %7.0f GB/s %5.1f%% roofline\n",
                    sh.name, static_cast<long long>(M), static_cast<long long>(sh.n), static_cast<long long>(sh.k), r.impl,
                    r.us, tf, gbs, 100.0 * roof_us / r.us);
        if (csv)
          std::fprintf(csv, "fp8_gemm,%s,%lld,%lld,%lld,%s,%.2f,%.2f,%.1f,%.3f,%.1f\n", sh.name, static_cast<long long>(M),
                       static_cast<long long>(sh.n), static_cast<long long>(sh.k), r.impl, r.us, tf, gbs, roof_us / r.us,
                       bw / 1e9);
      }
      std::fflush(stdout);
      if (csv) std::fflush(csv);
    }
  }
  if (csv) std::fclose(csv);
  DS_CUDA_CHECK(cudaDeviceSynchronize());
  return 0;
}
