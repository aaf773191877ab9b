// The bf16 grouped expert GEMM (kernels/moe_gemm.h) called directly at decode batches past the small-M stream:
// its pipelined tile's shapes (MoeGroupedGemmParams::tile) agree to the bit, match a host product, leave the rows
// past the routed ones alone, and are timed (the A/B behind the default); at decode sizes the small-M kernel's
// walk (MoeGroupedGemmParams::walk) gives the one-round kernel's bits; the walk on wgmma bf16 matches them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/moe.h"
#include "kernels/moe_gemm.h"
#include "ops/cuda/gpu_test_util.h"

namespace ds {
namespace {

using test::i32_tensor;
using test::randn;
using test::to_device;
using test::to_host_f32;

// A random bf16 weight [rows, K] (scale 0.05): its device-ready bf16 copy and the same values in f32 (host products).
struct Bf16Weight {
  Tensor f32, bf16;
};
Bf16Weight bf16_weight(int64_t rows, int64_t K, std::mt19937& rng) {
  Bf16Weight w{randn({rows, K}, rng, 0.05f), Tensor()};
  w.bf16 = Tensor::empty(w.f32.shape(), DType::kBF16);
  for (int64_t j = 0; j < w.f32.numel(); ++j) {
    w.bf16.data_as<uint16_t>()[j] = f32_to_bf16(w.f32.f32()[j]);
    w.f32.f32()[j] = bf16_to_f32(w.bf16.data_as<uint16_t>()[j]);
  }
  return w;
}

// `experts` experts cycling through `weights`, each its own device copy (no L2 sharing between experts), and the
// device array of their pointers (MoeGroupedGemmParams::weights).
struct DeviceExperts {
  std::vector<Tensor> w;
  std::vector<const void*> ptrs;
  Tensor ptrs_d;
};
DeviceExperts upload_experts(const std::vector<Bf16Weight>& weights, int experts) {
  DeviceExperts d;
  Tensor ptrs = Tensor::empty({experts}, DType::kI64);
  for (int e = 0; e < experts; ++e) {
    d.w.push_back(cuda_upload(weights[e % weights.size()].bf16));
    d.ptrs.push_back(d.w[e].data());
    ptrs.data_as<int64_t>()[e] = reinterpret_cast<int64_t>(d.w[e].data());
  }
  d.ptrs_d = cuda_upload(ptrs);
  return d;
}

// Expert rows [r0, r0 + n) of a grouped product against an fp64 host product of the same bf16 values: x's rows
// (src[r0 + i] when src is given: gate|up reads through source rows) times w ([N or 2N, K], SiLU'd with silu).
// Returns {want, have}, both [n, N].
std::pair<Tensor, Tensor> host_rows(const Tensor& x, const std::vector<int32_t>* src, const Tensor& w,
                                    const Tensor& got, int64_t r0, int64_t n, int64_t N, bool silu) {
  const int64_t K = x.dim(1);
  Tensor want = Tensor::empty({n, N}, DType::kF32), have = Tensor::empty({n, N}, DType::kF32);
  for (int64_t i = 0; i < n; ++i) {
    const float* xr = x.f32() + (src ? (*src)[r0 + i] : r0 + i) * K;
    for (int64_t c = 0; c < N; ++c) {
      double g = 0, u = 0;
      for (int64_t k = 0; k < K; ++k) g += static_cast<double>(xr[k]) * w.f32()[c * K + k];
      if (silu)
        for (int64_t k = 0; k < K; ++k) u += static_cast<double>(xr[k]) * w.f32()[(N + c) * K + k];
      want.f32()[i * N + c] = static_cast<float>(silu ? g / (1.0 + std::exp(-g)) * u : g);
      have.f32()[i * N + c] = got.f32()[(r0 + i) * N + c];
    }
  }
  return {want, have};
}

// A decode walk's inputs at `rows` rows an active expert (test::decode_routing: the first one a row short): gate|up
// reads its token rows through source rows (a permutation of [0, total)), down its permuted rows; slot records with
// up to two empty ones past the active experts; x random bf16 values; the params as the MoE op sets them (out unset).
struct WalkInputs {
  test::ExpertRouting rt;
  std::vector<int32_t> src;
  int n_active = 0, n_slots = 0;
  Tensor x, x_d, src_d, slots_d;
  test::DeviceRouting rd;
  kernels::MoeGroupedGemmParams p;
};
WalkInputs walk_inputs(const test::MoeDecodeShape& sh, int rows, const DeviceExperts& ex, std::mt19937& rng) {
  WalkInputs in;
  in.rt = test::decode_routing(sh, rows);
  const int64_t total = in.rt.total;
  in.src.resize(total);
  for (int64_t r = 0; r < total; ++r) in.src[r] = static_cast<int32_t>((r * 7 + 3) % total);
  in.n_active = static_cast<int>(sh.active.size());
  in.n_slots = std::min(in.n_active + 2, sh.experts);
  const std::vector<int32_t> rec = test::slot_records(in.rt, in.n_slots, &in.src);
  in.x = randn({total, sh.K}, rng, 1.0f);
  for (int64_t j = 0; j < in.x.numel(); ++j) in.x.f32()[j] = round_bf16(in.x.f32()[j]);
  in.x_d = to_device(in.x);
  in.src_d = cuda_upload(i32_tensor(in.src, {total}));
  in.slots_d = cuda_upload(i32_tensor(rec, {static_cast<int64_t>(rec.size())}));
  in.rd = test::upload_routing(in.rt);
  kernels::MoeGroupedGemmParams& p = in.p;
  p.weights = static_cast<const void* const*>(ex.ptrs_d.data());
  p.x = in.x_d.data();
  p.src_rows = sh.silu ? in.src_d.data_as<int32_t>() : nullptr;
  test::set_routing(p, in.rd);
  p.slots = in.slots_d.data_as<int32_t>();
  p.max_active = in.n_slots;
  p.experts = sh.experts;
  p.max_rows_per_expert = rows;
  p.N = sh.N;
  p.K = sh.K;
  p.silu = sh.silu;
  return in;
}

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
    std::vector<Bf16Weight> host;
    for (int i = 0; i < 4; ++i) host.push_back(bf16_weight(wrows, sh.K, rng));
    const DeviceExperts dev = upload_experts(host, sh.experts);
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
      p.weights = static_cast<const void* const*>(dev.ptrs_d.data());
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
            const auto [want, have] = host_rows(x, nullptr, host[e % 4].f32, got, offsets[e], counts[e], sh.N, sh.silu);
            DS_EXPECT_CLOSE(have, want, 2e-2, 4e-3, what + " expert " + std::to_string(e));
          }
        } else {
          EXPECT_TRUE(test::same_bits(got.rows(0, total), first.rows(0, total)))
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
    const DeviceExperts dev = upload_experts({bf16_weight(wrows, sh.K, rng), bf16_weight(wrows, sh.K, rng)}, sh.experts);
    for (int rows : {1, 5}) {
      WalkInputs in = walk_inputs(sh, rows, dev, rng);
      kernels::MoeGroupedGemmParams& p = in.p;
      const int64_t total = in.rt.total;
      const int n_active = in.n_active;
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
            EXPECT_TRUE(test::same_bits(got.rows(0, total), first.rows(0, total)))
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
    // Two distinct bf16 weights, each expert its own device copy.
    const std::vector<Bf16Weight> host = {bf16_weight(wrows, sh.K, rng), bf16_weight(wrows, sh.K, rng)};
    const DeviceExperts dev = upload_experts(host, sh.experts);
    const Tensor maps_d = test::wgmma_maps(dev.ptrs, sh.experts, wrows, 2 * sh.K);
    const CUtensorMap* md = static_cast<const CUtensorMap*>(maps_d.data());
    for (int rows : {1, 5, 12, 16}) {
      WalkInputs in = walk_inputs(sh, rows, dev, rng);
      kernels::MoeGroupedGemmParams& p = in.p;
      const test::ExpertRouting& rt = in.rt;
      const int64_t total = rt.total;
      const int n_active = in.n_active;
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
          const auto [w64, have] = host_rows(in.x, sh.silu ? &in.src : nullptr, host[e % 2].f32, got, rt.offsets[e],
                                             rt.counts[e], sh.N, sh.silu);
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
