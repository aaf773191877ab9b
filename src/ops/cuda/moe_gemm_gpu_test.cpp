// The bf16 grouped expert GEMM (kernels/moe_gemm.h) called directly at decode batches past the small-M stream:
// its pipelined tile's shapes (MoeGroupedGemmParams::tile) agree to the bit, match a host product, leave the rows
// past the routed ones alone, and are timed (the A/B behind the default); at decode sizes the small-M kernel's
// walk (MoeGroupedGemmParams::walk) gives the one-round kernel's bits; the walk on wgmma bf16 matches them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/moe.h"
#include "kernels/moe_fp8.h"  // make_moe_wgmma_maps
#include "kernels/moe_gemm.h"
#include "ops/cuda/gpu_test_util.h"

namespace ds {
namespace {

using test::i32_tensor;
using test::randn;
using test::to_device;
using test::to_host_f32;

// V2-Lite (64 experts, top-6) and V3 (256 experts, top-8) expert shapes, uniform random routing of 64, 128 and 256
// tokens, the op's bounds (max rows = tokens, rows_hint = twice the mean load). Experts cycle through 4 distinct
// random weights, each expert its own device copy (no L2 sharing between experts). MOETILE lines: weight bytes of
// the experts with rows per second. DSERVE_TEST_NO_TIMING=1 skips timing.
TEST(MoeGemmGpu, GroupedTileShapesAgree) {
  init_cuda_device(0);
  set_cuda_alloc_poison(true);
  std::unique_ptr<Ops> ops = make_cuda_ops(0);
  struct Shape {
    const char* name;
    int64_t N, K;
    bool silu;
    int experts, top_k;
  };
  const std::vector<Shape> shapes = {
      {"v2-lite gate_up", 1408, 2048, true, 64, 6},
      {"v2-lite down", 2048, 1408, false, 64, 6},
      {"v3 gate_up", 2048, 7168, true, 256, 8},
      {"v3 down", 7168, 2048, false, 256, 8},
  };
  std::mt19937 rng(515);
  cudaStream_t s = cuda_stream();
  for (const Shape& sh : shapes) {
    const int64_t wrows = sh.silu ? 2 * sh.N : sh.N;
    std::vector<Tensor> host, host_bf16;  // f32 holding bf16-representable values; the same as bf16
    for (int i = 0; i < 4; ++i) {
      Tensor w = randn({wrows, sh.K}, rng, 0.05f);
      Tensor b = Tensor::empty(w.shape(), DType::kBF16);
      for (int64_t j = 0; j < w.numel(); ++j) {
        b.data_as<uint16_t>()[j] = f32_to_bf16(w.f32()[j]);
        w.f32()[j] = bf16_to_f32(b.data_as<uint16_t>()[j]);
      }
      host.push_back(w);
      host_bf16.push_back(b);
    }
    std::vector<Tensor> dev_w;
    Tensor wptr = Tensor::empty({sh.experts}, DType::kI64);
    for (int e = 0; e < sh.experts; ++e) {
      dev_w.push_back(cuda_upload(host_bf16[e % 4]));
      wptr.data_as<int64_t>()[e] = reinterpret_cast<int64_t>(dev_w[e].data());
    }
    Tensor wptr_d = cuda_upload(wptr);
    for (int64_t T : {64, 128, 256}) {
      std::vector<int32_t> ids;
      for (int64_t t = 0; t < T; ++t) {  // top_k distinct experts per token
        std::vector<int32_t> all(sh.experts);
        for (int e = 0; e < sh.experts; ++e) all[e] = e;
        std::shuffle(all.begin(), all.end(), rng);
        ids.insert(ids.end(), all.begin(), all.begin() + sh.top_k);
      }
      const test::ExpertRouting rt = test::expert_routing(ids, sh.experts);
      const std::vector<int32_t>&counts = rt.counts, &offsets = rt.offsets, &active = rt.active;
      const int64_t total = rt.total;
      Tensor x = randn({total, sh.K}, rng, 1.0f);
      for (int64_t j = 0; j < x.numel(); ++j) x.f32()[j] = round_bf16(x.f32()[j]);
      Tensor x_d = to_device(x);
      const test::DeviceRouting rd = test::upload_routing(rt);
      const int n_active = static_cast<int>(active.size());
      kernels::MoeGroupedGemmParams p;
      p.weights = static_cast<const void* const*>(wptr_d.data());
      p.x = x_d.data();
      test::set_routing(p, rd);
      kernels::set_moe_bounds(p, total, sh.experts, T);  // the op's bounds
      p.N = sh.N;
      p.K = sh.K;
      p.silu = sh.silu;
      const int max_rows = rt.max_rows;
      Tensor first;
      for (int tile : {0, 1, 2, 3, 4, 5}) {
        const std::string what = std::string(sh.name) + " T " + std::to_string(T) + " tile " + std::to_string(tile);
        Tensor out = ops->empty({total + 1, sh.N}, DType::kBF16);  // NaN-poisoned
        p.out = out.data();
        p.tile = tile;
        ASSERT_EQ(kernels::launch_moe_grouped_gemm(p, s), cudaSuccess) << what;
        Tensor got = to_host_f32(out);
        test::expect_rows_written(got, total, sh.N, what);
        if (!first.defined()) {
          first = got;
          for (int a = 0; a < 2 && T == 64; ++a) {  // the busiest expert and the first one, against fp32 products
            const int e = a == 0 ? static_cast<int>(std::max_element(counts.begin(), counts.end()) - counts.begin())
                                 : active[0];
            const int64_t r0 = offsets[e], n = counts[e];
            const float* w = host[e % 4].f32();
            Tensor want = Tensor::empty({n, sh.N}, DType::kF32), have = Tensor::empty({n, sh.N}, DType::kF32);
            for (int64_t i = 0; i < n; ++i) {
              const float* xr = x.f32() + (r0 + i) * sh.K;
              for (int64_t c = 0; c < sh.N; ++c) {
                double g = 0, u = 0;
                for (int64_t k = 0; k < sh.K; ++k) g += static_cast<double>(xr[k]) * w[c * sh.K + k];
                if (sh.silu)
                  for (int64_t k = 0; k < sh.K; ++k) u += static_cast<double>(xr[k]) * w[(sh.N + c) * sh.K + k];
                want.f32()[i * sh.N + c] = static_cast<float>(sh.silu ? g / (1.0 + std::exp(-g)) * u : g);
                have.f32()[i * sh.N + c] = got.f32()[(r0 + i) * sh.N + c];
              }
            }
            DS_EXPECT_CLOSE(have, want, 2e-2, 4e-3, what + " expert " + std::to_string(e));
          }
        } else {
          EXPECT_EQ(std::memcmp(got.data(), first.data(), static_cast<size_t>(total * sh.N) * sizeof(float)), 0)
              << what << ": differs from the default";
        }
        if (std::getenv("DSERVE_TEST_NO_TIMING")) continue;
        const double us = test::graph_time_us([&] { kernels::launch_moe_grouped_gemm(p, s); }, s);
        const double bytes = static_cast<double>(n_active) * wrows * sh.K * 2.0;
        std::printf("MOETILE bf16 %s T %lld (%d experts, max %d rows) tile %d: %.2f us, %.0f GB/s of expert weights\n",
                    sh.name, static_cast<long long>(T), n_active, max_rows, tile, us, bytes / (us * 1e3));
      }
    }
  }
}

// The small-M kernel's two-stage walk of resident CTAs (MoeGroupedGemmParams::walk) against its one-round CTAs at
// V2-Lite's and V3's expert shapes, 1 and 5 rows an expert (the first active expert one fewer: ragged), from slot
// records (gate|up through source rows, down on permuted rows, as the MoE op calls them; empty records past the
// active ones), read before and after the PDL wait: the same bits, every routed row written and nothing past them.
// Both timed alone (MOEWALK lines: 20 launches in a CUDA graph; weight bytes of the active experts per second).
// DSERVE_TEST_NO_TIMING=1 skips timing.
TEST(MoeGemmGpu, SmallMWalkMatchesOneRound) {
  init_cuda_device(0);
  set_cuda_alloc_poison(true);
  std::unique_ptr<Ops> ops = make_cuda_ops(0);
  std::mt19937 rng(933);
  cudaStream_t s = cuda_stream();
  for (const test::MoeDecodeShape& sh : test::moe_decode_shapes()) {
    const int64_t wrows = sh.silu ? 2 * sh.N : sh.N;
    // Two distinct random weights, each expert its own device copy (no L2 sharing between experts).
    const Tensor w0 = randn({wrows, sh.K}, rng, 0.05f), w1 = randn({wrows, sh.K}, rng, 0.05f);
    std::vector<Tensor> dev_w;
    Tensor wptr = Tensor::empty({sh.experts}, DType::kI64);
    for (int e = 0; e < sh.experts; ++e) {
      dev_w.push_back(to_device(e % 2 ? w1 : w0));
      wptr.data_as<int64_t>()[e] = reinterpret_cast<int64_t>(dev_w[e].data());
    }
    Tensor wptr_d = cuda_upload(wptr);
    for (int rows : {1, 5}) {
      const test::ExpertRouting rt = test::decode_routing(sh, rows);
      const int64_t total = rt.total;
      // gate|up reads token rows through src_rows (a permutation of [0, total)), down its permuted rows.
      std::vector<int32_t> src(total);
      for (int64_t r = 0; r < total; ++r) src[r] = static_cast<int32_t>((r * 7 + 3) % total);
      const int n_active = static_cast<int>(sh.active.size());
      const int n_slots = std::min(n_active + 2, sh.experts);  // up to two empty records
      const std::vector<int32_t> rec = test::slot_records(rt, n_slots, &src);
      Tensor x_d = to_device(randn({total, sh.K}, rng, 1.0f));
      Tensor src_d = cuda_upload(i32_tensor(src, {total})),
             slots_d = cuda_upload(i32_tensor(rec, {static_cast<int64_t>(rec.size())}));
      const test::DeviceRouting rd = test::upload_routing(rt);
      kernels::MoeGroupedGemmParams p;
      p.weights = static_cast<const void* const*>(wptr_d.data());
      p.x = x_d.data();
      p.src_rows = sh.silu ? src_d.data_as<int32_t>() : nullptr;
      test::set_routing(p, rd);
      p.slots = slots_d.data_as<int32_t>();
      p.max_active = n_slots;
      p.experts = sh.experts;
      p.max_rows_per_expert = rows;
      p.N = sh.N;
      p.K = sh.K;
      p.silu = sh.silu;
      Tensor first;
      for (int walk : {0, 2})
        for (bool settled : {false, true}) {
          const std::string what = std::string(sh.name) + " rows " + std::to_string(rows) +
                                   (walk ? " walk" : " one-round") + (settled ? " settled" : "");
          Tensor out = ops->empty({total + 1, sh.N}, DType::kBF16);  // NaN-poisoned
          p.out = out.data();
          p.walk = walk;
          p.slots_settled = settled;
          ASSERT_EQ(kernels::launch_moe_grouped_gemm(p, s), cudaSuccess) << what;
          Tensor got = to_host_f32(out);
          test::expect_rows_written(got, total, sh.N, what);
          if (!first.defined())
            first = got;
          else
            EXPECT_EQ(std::memcmp(got.data(), first.data(), static_cast<size_t>(total * sh.N) * sizeof(float)), 0)
                << what << ": differs from the one-round kernel";
          if (std::getenv("DSERVE_TEST_NO_TIMING") || settled) continue;
          const double us = test::graph_time_us([&] { kernels::launch_moe_grouped_gemm(p, s); }, s);
          const double bytes = static_cast<double>(n_active) * wrows * sh.K * 2.0;
          std::printf("MOEWALK bf16 %s rows %d %s: %.2f us per launch, %.0f GB/s of expert weights\n", sh.name, rows,
                      walk ? "walk" : "one-round", us, bytes / (us * 1e3));
        }
    }
  }
}

// The walk on wgmma bf16 (launch_moe_bf16_wgmma_walk, session 39) against the mma.sync grouped kernel on the decode
// shapes (V2-Lite and V3 gate|up and down) at 1, 5 (8 token columns), 12 and 16 rows an expert (16 columns; V3's
// gate|up only up to 8: its token rows would not fit shared memory at 16), the first active expert one row short
// (ragged), two empty slot records past the active ones, gate|up through source rows, read before and after the PDL
// wait: every routed row written and nothing past them (NaN-poisoned output), the grouped kernel's values within
// bf16 rounding (another summation order), and one expert against an fp64 host product of the same bf16 values.
// Timed alone (MOEBF16WGMMA lines, next to the grouped kernel's). DSERVE_TEST_NO_TIMING=1 skips timing.
TEST(MoeGemmGpu, Bf16WgmmaWalkMatchesTheKernels) {
  init_cuda_device(0);
  set_cuda_alloc_poison(true);
  std::unique_ptr<Ops> ops = make_cuda_ops(0);
  std::mt19937 rng(4242);
  cudaStream_t s = cuda_stream();
  int checked = 0;
  for (const test::MoeDecodeShape& sh : test::moe_decode_shapes()) {
    const int64_t wrows = sh.silu ? 2 * sh.N : sh.N;
    // Two distinct bf16 weights (host copies hold the same values in f32), each expert its own device copy.
    std::vector<Tensor> host, host_bf16;
    for (int i = 0; i < 2; ++i) {
      Tensor w = randn({wrows, sh.K}, rng, 0.05f);
      Tensor b = Tensor::empty(w.shape(), DType::kBF16);
      for (int64_t j = 0; j < w.numel(); ++j) {
        b.data_as<uint16_t>()[j] = f32_to_bf16(w.f32()[j]);
        w.f32()[j] = bf16_to_f32(b.data_as<uint16_t>()[j]);
      }
      host.push_back(w);
      host_bf16.push_back(b);
    }
    std::vector<Tensor> dev_w;
    std::vector<const void*> wptrs;
    Tensor wptr = Tensor::empty({sh.experts}, DType::kI64);
    for (int e = 0; e < sh.experts; ++e) {
      dev_w.push_back(cuda_upload(host_bf16[e % 2]));
      wptrs.push_back(dev_w[e].data());
      wptr.data_as<int64_t>()[e] = reinterpret_cast<int64_t>(dev_w[e].data());
    }
    Tensor wptr_d = cuda_upload(wptr);
    Tensor maps = Tensor::empty({static_cast<int64_t>(sh.experts * sizeof(CUtensorMap))}, DType::kU8);
    ASSERT_TRUE(kernels::make_moe_wgmma_maps(wptrs.data(), sh.experts, wrows, 2 * sh.K,
                                             static_cast<CUtensorMap*>(maps.data())))
        << sh.name;
    const Tensor maps_d = cuda_upload(maps);
    const CUtensorMap* md = static_cast<const CUtensorMap*>(maps_d.data());
    ASSERT_EQ(reinterpret_cast<uintptr_t>(md) & 63, 0u) << "tensor maps need 64-byte alignment";
    for (int rows : {1, 5, 12, 16}) {
      const test::ExpertRouting rt = test::decode_routing(sh, rows);
      const int64_t total = rt.total;
      std::vector<int32_t> src(total);
      for (int64_t r = 0; r < total; ++r) src[r] = static_cast<int32_t>((r * 7 + 3) % total);
      const int n_active = static_cast<int>(sh.active.size());
      const int n_slots = std::min(n_active + 2, sh.experts);  // up to two empty records
      const std::vector<int32_t> rec = test::slot_records(rt, n_slots, &src);
      Tensor x = randn({total, sh.K}, rng, 1.0f);
      for (int64_t j = 0; j < x.numel(); ++j) x.f32()[j] = round_bf16(x.f32()[j]);
      Tensor x_d = to_device(x);
      Tensor src_d = cuda_upload(i32_tensor(src, {total})),
             slots_d = cuda_upload(i32_tensor(rec, {static_cast<int64_t>(rec.size())}));
      const test::DeviceRouting rd = test::upload_routing(rt);
      kernels::MoeGroupedGemmParams p;
      p.weights = static_cast<const void* const*>(wptr_d.data());
      p.x = x_d.data();
      p.src_rows = sh.silu ? src_d.data_as<int32_t>() : nullptr;
      test::set_routing(p, rd);
      p.slots = slots_d.data_as<int32_t>();
      p.max_active = n_slots;
      p.experts = sh.experts;
      p.max_rows_per_expert = rows;
      p.N = sh.N;
      p.K = sh.K;
      p.silu = sh.silu;
      const std::string base = std::string(sh.name) + " rows " + std::to_string(rows);
      Tensor ref = ops->empty({total + 1, sh.N}, DType::kBF16);
      p.out = ref.data();
      if (sh.K * 2 * 16 > 128 * 1024 && rows > 8) {  // 16 token columns of all of K: past shared memory
        EXPECT_FALSE(kernels::moe_bf16_wgmma_walk_supported(p)) << base;
        continue;
      }
      ASSERT_TRUE(kernels::moe_bf16_wgmma_walk_supported(p)) << base;
      ASSERT_EQ(kernels::launch_moe_grouped_gemm(p, s), cudaSuccess) << base;
      Tensor want = to_host_f32(ref);
      for (bool settled : {false, true}) {
        const std::string what = base + (settled ? " settled" : "");
        Tensor out = ops->empty({total + 1, sh.N}, DType::kBF16);  // NaN-poisoned
        p.out = out.data();
        p.slots_settled = settled;
        ASSERT_EQ(kernels::launch_moe_bf16_wgmma_walk(p, md, s), cudaSuccess) << what;
        ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess) << what;
        Tensor got = to_host_f32(out);
        test::expect_rows_written(got, total, sh.N, what);
        DS_EXPECT_CLOSE(got.rows(0, total), want.rows(0, total), 2e-2, 4e-3, what + " vs the grouped kernel");
        if (!settled && rows == 5) {  // the first active expert against an fp64 product of the same values
          const int e = sh.active[0];
          const int64_t r0 = rt.offsets[e], n = rt.counts[e];
          const float* w = host[e % 2].f32();
          Tensor w64 = Tensor::empty({n, sh.N}, DType::kF32), have = Tensor::empty({n, sh.N}, DType::kF32);
          for (int64_t i = 0; i < n; ++i) {
            const float* xr = x.f32() + (sh.silu ? src[r0 + i] : r0 + i) * sh.K;
            for (int64_t c = 0; c < sh.N; ++c) {
              double g = 0, u = 0;
              for (int64_t k = 0; k < sh.K; ++k) g += static_cast<double>(xr[k]) * w[c * sh.K + k];
              if (sh.silu)
                for (int64_t k = 0; k < sh.K; ++k) u += static_cast<double>(xr[k]) * w[(sh.N + c) * sh.K + k];
              w64.f32()[i * sh.N + c] = static_cast<float>(sh.silu ? g / (1.0 + std::exp(-g)) * u : g);
              have.f32()[i * sh.N + c] = got.f32()[(r0 + i) * sh.N + c];
            }
          }
          DS_EXPECT_CLOSE(have, w64, 2e-2, 4e-3, what + " expert " + std::to_string(e));
        }
        ++checked;
      }
      if (std::getenv("DSERVE_TEST_NO_TIMING")) continue;
      p.slots_settled = false;
      Tensor out = ops->empty({total + 1, sh.N}, DType::kBF16);
      p.out = out.data();
      const double us = test::graph_time_us([&] { kernels::launch_moe_bf16_wgmma_walk(p, md, s); }, s);
      const double us_ref = test::graph_time_us([&] { kernels::launch_moe_grouped_gemm(p, s); }, s);
      const double bytes = static_cast<double>(n_active) * wrows * sh.K * 2.0;
      std::printf("MOEBF16WGMMA %s: %.2f us per launch (%.0f GB/s), the grouped kernel %.2f us\n", base.c_str(), us,
                  bytes / (us * 1e3), us_ref);
    }
  }
  EXPECT_EQ(checked, (4 * 4 - 2) * 2);  // V3 gate|up at 12 and 16 rows: not this kernel's
}

}  // namespace
}  // namespace ds
