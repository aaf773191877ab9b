// CUDA-vs-CPU consistency of the device-driven MoE path (permutation + grouped expert GEMMs + combine):
// token counts that leave experts empty, overload one expert past the kernel's token tiles, top-k 6 and 8,
// V2-Lite expert dims and small ones; and the same op captured once in a CUDA graph and replayed on new
// routing (the per-expert counts must be read on the device); the fused router + routing + grouping
// (moe_gate_route) against the CPU router and routing, and the experts op fed by its grouping against the same
// op grouping the same ids itself; the wgmma bf16 walk through the op. New device allocations are NaN-poisoned.
#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "kernels/moe.h"
#include "ops/cuda/gpu_test_util.h"

namespace ds {
namespace {

using test::i32_tensor;
using test::randn;
using test::to_device;
using test::to_host_f32;

// A moe_experts case: dims, experts, top-k, token counts, the experts that can be chosen, -1 or the one every
// token takes first.
struct MoeCase {
  const char* name;
  int64_t d, inter;
  int E, K;
  std::vector<int64_t> tokens;
  int used;  // experts that can be chosen
  int hot;   // -1: none
};

class MoeGroupedTest : public test::CudaVsCpuTest {
 protected:
  std::mt19937 rng_{61122};

  struct Experts {
    std::vector<PreparedMlp> gpu, cpu;
  };
  Experts make_experts(int E, int64_t d, int64_t inter) {
    Experts x;
    for (int e = 0; e < E; ++e) {
      LinearWeight g, u, dn;
      g.weight = randn({inter, d}, rng_, 0.03f);
      u.weight = randn({inter, d}, rng_, 0.03f);
      dn.weight = randn({d, inter}, rng_, 0.05f);
      x.cpu.push_back(cpu().prepare_mlp(g, u, dn));
      x.gpu.push_back(gpu().prepare_mlp(g, u, dn));
    }
    return x;
  }
  // The experts op on ids that carry a fused grouping (gi, from a routing launch) against the same op grouping a
  // copy of them itself (hi: gi downloaded): the output elements that differ (the two must agree bit for bit).
  int64_t fused_grouping_mismatches(const Tensor& x_dev, const Tensor& gi, const Tensor& gw, const Tensor& hi,
                                    const Experts& ex, Tensor* got_out = nullptr) {
    Tensor got = to_host_f32(gpu().moe_experts(x_dev, gi, gw, ex.gpu));
    Tensor want = to_host_f32(gpu().moe_experts(x_dev, cuda_upload(hi), gw, ex.gpu));
    int64_t diff = 0;
    for (int64_t i = 0; i < got.numel(); ++i) diff += !(got.f32()[i] == want.f32()[i]);
    if (got_out) *got_out = got;
    return diff;
  }
  // A backend whose bf16 experts' decode products run on the mma.sync kernels (the wgmma walk off).
  static std::unique_ptr<Ops> mma_sync_backend() {
    const test::ScopedEnv off("DSERVE_MOE_BF16_WGMMA", "0");
    return make_cuda_ops(0);
  }
  // A case's inputs at T tokens: x [T, d], its ids [T, K] (route) and routing weights [T, K].
  std::tuple<Tensor, Tensor, Tensor> case_inputs(const MoeCase& c, int64_t T) {
    Tensor x = randn({T, c.d}, rng_);
    Tensor idt = i32_tensor(route(T, c.E, c.K, c.used, c.hot), {T, c.K});
    Tensor w = randn({T, c.K}, rng_, 0.2f, 0.5f);
    return {x, idt, w};
  }
  // K distinct experts per token. hot >= 0: every token takes expert `hot` first (one expert gets all T
  // rows); only the first `used` experts are ever chosen (the rest get 0 rows).
  std::vector<int32_t> route(int64_t T, int E, int K, int used, int hot) {
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int32_t> all(used);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng_);
      if (hot >= 0) {
        auto it = std::find(all.begin(), all.end(), hot);
        std::iter_swap(all.begin(), it);
      }
      ids.insert(ids.end(), all.begin(), all.begin() + K);
    }
    (void)E;
    return ids;
  }
};

// The decode kernels: the mma.sync ones, on a backend with the bf16 wgmma walk off (DSERVE_MOE_BF16_WGMMA=0, read when
// a backend is made): the small-M weight stream or the pipelined one (DSERVE_MOE_SMALL_M=0, read at each launch); and
// the default backend (the walk at <= 16 rows an expert where the dims allow, the small-M kernels elsewhere).
class MoeGroupedDecodeKernels : public MoeGroupedTest, public ::testing::WithParamInterface<int> {
 protected:
  test::ScopedEnv small_m_{"DSERVE_MOE_SMALL_M", GetParam() == 0 ? "0" : nullptr};
  Ops& backend() {
    if (GetParam() == 2) return gpu();
    if (!mma_) mma_ = mma_sync_backend();
    return *mma_;
  }
  std::unique_ptr<Ops> mma_;
};
INSTANTIATE_TEST_SUITE_P(DecodeKernel, MoeGroupedDecodeKernels, ::testing::Values(0, 1, 2), [](const auto& info) {
  return info.param == 0 ? "Pipelined" : info.param == 1 ? "SmallM" : "Default";
});

TEST_P(MoeGroupedDecodeKernels, MatchesCpu) {
  const std::vector<MoeCase> cases = {
      {"v2-lite dims, top-6", 2048, 1408, 8, 6, {1, 3, 9}, 8, -1},
      {"small, top-8, empty experts", 192, 64, 64, 8, {1, 2, 5, 8, 33}, 20, -1},
      {"small, top-6, 64 experts", 256, 96, 64, 6, {4, 16, 100}, 64, -1},
      {"one expert takes every token", 128, 48, 16, 6, {7, 40, 600}, 12, 3},
      {"ragged dims", 200, 72, 10, 8, {3, 17}, 10, -1},
      {"prefill-sized (cuBLASLt path)", 128, 48, 16, 6, {1500}, 16, -1},
  };
  for (const MoeCase& c : cases) {
    Experts ex = make_experts(c.E, c.d, c.inter);
    for (int64_t T : c.tokens) {
      const auto [x, idt, w] = case_inputs(c, T);
      Tensor got = to_host_f32(backend().moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), ex.gpu));
      Tensor want = cpu().moe_experts(x, idt, w, ex.cpu);
      DS_EXPECT_CLOSE(got, want, 2e-2, 1e-2,
                      std::string("moe grouped ") + c.name + " T " + std::to_string(T));
    }
  }
}

// The bf16 experts' decode products on the wgmma walk (the default since session 40; DSERVE_MOE_BF16_WGMMA=n: from n
// tokens on, 0: off, read when a backend is made) through moe_experts at 1 to 16 tokens (the walk takes <= 16 rows an
// expert): V2-Lite's dims, small dims with empty experts and an expert that every token takes, against the CPU and
// the mma.sync kernels (another summation order, so within bf16 rounding), and not bit for bit the latter's at
// V2-Lite's dims (which shows the walk ran); the default backend's bits are the walk's. With the switch at 8 tokens,
// the mma.sync kernels' bits below 8 and not at 9. The cases go from V2-Lite's K to smaller ones and back (a launch
// after a smaller one's set-up must still get its shared memory: s40a's failure).
TEST_F(MoeGroupedTest, Bf16WgmmaWalkThroughTheOps) {
  std::unique_ptr<Ops> wg, mma = mma_sync_backend();
  {
    const test::ScopedEnv on("DSERVE_MOE_BF16_WGMMA", "1");
    wg = make_cuda_ops(0);
  }
  const std::vector<MoeCase> cases = {
      {"v2-lite dims, top-6", 2048, 1408, 8, 6, {1, 4, 9, 16}, 8, -1},
      {"small, top-8, empty experts", 192, 64, 64, 8, {1, 5, 8}, 20, -1},
      {"one expert takes every token", 128, 64, 16, 6, {7, 16}, 12, 3},
  };
  for (const MoeCase& c : cases) {
    Experts ex = make_experts(c.E, c.d, c.inter);
    for (int64_t T : c.tokens) {
      const auto [x, idt, w] = case_inputs(c, T);
      const std::string what = std::string("moe bf16 wgmma walk ") + c.name + " T " + std::to_string(T);
      Tensor got = to_host_f32(wg->moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), ex.gpu));
      Tensor ref = to_host_f32(mma->moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), ex.gpu));
      Tensor def = to_host_f32(gpu().moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), ex.gpu));
      DS_EXPECT_CLOSE(got, cpu().moe_experts(x, idt, w, ex.cpu), 2e-2, 1e-2, what + " (cpu)");
      DS_EXPECT_CLOSE(got, ref, 2e-2, 4e-3, what + " (mma.sync kernels)");
      EXPECT_TRUE(test::same_bits(got, def)) << what << ": the default backend is not the walk";
      if (c.d == 2048) {
        EXPECT_FALSE(test::same_bits(got, ref)) << what << ": the mma.sync kernels' bits (did the walk run?)";
      }
    }
  }
  // DSERVE_MOE_BF16_WGMMA=8: the walk from 8 tokens on, the mma.sync kernels below (their bits exactly).
  std::unique_ptr<Ops> from8;
  {
    const test::ScopedEnv on("DSERVE_MOE_BF16_WGMMA", "8");
    from8 = make_cuda_ops(0);
  }
  Experts ex = make_experts(8, 2048, 1408);
  for (int64_t T : {4, 9}) {
    Tensor x = randn({T, 2048}, rng_);
    Tensor idt = i32_tensor(route(T, 8, 6, 8, -1), {T, 6});
    Tensor w = randn({T, 6}, rng_, 0.2f, 0.5f);
    Tensor got = to_host_f32(from8->moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), ex.gpu));
    Tensor ref = to_host_f32(mma->moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), ex.gpu));
    EXPECT_EQ(test::same_bits(got, ref), T < 8) << "DSERVE_MOE_BF16_WGMMA=8 at " << T << " tokens";
  }
}

// The bf16 walk past 16 tokens (the default since session 40, DSERVE_MOE_WALK_MAX_TOKENS: an expert past 16 rows
// takes a pass over its weights per 16): 64 experts, an expert that every token takes (24 / 40 rows: 2-3 passes),
// against the CPU and a backend with the switch at 16 (the mma.sync kernels past 16 tokens: within bf16 rounding, not
// their bits); at 16 tokens that backend's walk bit for bit.
TEST_F(MoeGroupedTest, Bf16WgmmaWalkPassesThroughTheOps) {
  std::unique_ptr<Ops> at16;
  {
    const test::ScopedEnv env("DSERVE_MOE_WALK_MAX_TOKENS", "16");
    at16 = make_cuda_ops(0);
  }
  const MoeCase c{"64 experts, one takes every token", 512, 256, 64, 6, {24, 40, 16}, 64, 3};
  Experts ex = make_experts(c.E, c.d, c.inter);
  for (int64_t T : c.tokens) {
    const auto [x, idt, w] = case_inputs(c, T);
    const std::string what = std::string("moe bf16 wgmma walk passes, T ") + std::to_string(T);
    Tensor got = to_host_f32(gpu().moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), ex.gpu));
    Tensor def = to_host_f32(at16->moe_experts(to_device(x), cuda_upload(idt), cuda_upload(w), ex.gpu));
    DS_EXPECT_CLOSE(got, cpu().moe_experts(x, idt, w, ex.cpu), 2e-2, 1e-2, what + " (cpu)");
    DS_EXPECT_CLOSE(got, def, 2e-2, 4e-3, what + " (the switch at 16)");
    EXPECT_EQ(test::same_bits(got, def), T <= 16) << what;
  }
}

// V2-Lite's MoE layer at decode sizes (64 experts, d 2048, inter 1408, top-6): correct against the CPU and
// timed. At these sizes each routed expert's weights are read once per step, so the figure printed
// ("MOEBW") is the weight bandwidth the grouped GEMMs reach (compare with the device copy bandwidth).
TEST_F(MoeGroupedTest, V2LiteDecodeBandwidth) {
  const int64_t d = 2048, inter = 1408;
  const int E = 64, K = 6, real = 8;  // only experts [0, 8) are routed: the CPU keeps just those
  Experts ex = make_experts(real, d, inter);
  for (int e = real; e < E; ++e) {
    PreparedMlp m;
    m.gate_up.weight = gpu().empty({2 * inter, d}, DType::kBF16);
    m.down.weight = gpu().empty({d, inter}, DType::kBF16);
    gpu().fill(m.gate_up.weight, 0.01f);
    gpu().fill(m.down.weight, 0.01f);
    ex.gpu.push_back(m);
  }
  cudaStream_t s = cuda_stream();
  cudaEvent_t t0, t1;
  ASSERT_EQ(cudaEventCreate(&t0), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&t1), cudaSuccess);
  for (int64_t T : {1, 4, 8}) {
    Tensor x = randn({T, d}, rng_);
    Tensor idt = i32_tensor(route(T, E, K, real, -1), {T, K});
    Tensor w = randn({T, K}, rng_, 0.2f, 0.5f);
    Tensor xd = to_device(x), idd = cuda_upload(idt), wd = cuda_upload(w);
    Tensor got = to_host_f32(gpu().moe_experts(xd, idd, wd, ex.gpu));
    Tensor want = cpu().moe_experts(x, idt, w, ex.cpu);
    DS_EXPECT_CLOSE(got, want, 2e-2, 1e-2, "moe grouped v2-lite decode T " + std::to_string(T));
    std::vector<char> active(E, 0);
    for (int64_t i = 0; i < idt.numel(); ++i) active[idt.data_as<int32_t>()[i]] = 1;
    const int n_active = static_cast<int>(std::count(active.begin(), active.end(), 1));
    const int iters = 50;
    set_cuda_alloc_poison(false);  // no fill kernels in the timed loop
    ASSERT_EQ(cudaEventRecord(t0, s), cudaSuccess);
    for (int i = 0; i < iters; ++i) Tensor y = gpu().moe_experts(xd, idd, wd, ex.gpu);
    ASSERT_EQ(cudaEventRecord(t1, s), cudaSuccess);
    ASSERT_EQ(cudaEventSynchronize(t1), cudaSuccess);
    set_cuda_alloc_poison(true);
    float ms = 0;
    ASSERT_EQ(cudaEventElapsedTime(&ms, t0, t1), cudaSuccess);
    const double us = 1000.0 * ms / iters;
    const double bytes = static_cast<double>(n_active) * 3 * inter * d * 2;
    std::printf("MOEBW v2-lite moe_experts T %lld: %d experts, %.1f us per layer, %.0f GB/s of expert weights\n",
                static_cast<long long>(T), n_active, us, bytes / (us * 1e3));
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
}

// The whole MoE op captured in a CUDA graph over static inputs, replayed with new tokens and routing: the
// replayed output must follow the new per-expert counts (a host-read count would be frozen at capture).
TEST_F(MoeGroupedTest, CapturedInGraph) {
  const int64_t T = 6, d = 256, inter = 128;
  const int E = 32, K = 6;
  Experts ex = make_experts(E, d, inter);
  Tensor x_dev = to_device(randn({T, d}, rng_));
  Tensor ids_dev = cuda_upload(i32_tensor(route(T, E, K, E, -1), {T, K}));
  Tensor w_dev = cuda_upload(randn({T, K}, rng_, 0.2f, 0.5f));
  Tensor out_dev = gpu().empty({T, d}, DType::kBF16);
  cudaStream_t s = cuda_stream();
  // Eager warm-up (builds the expert pointer table outside the capture).
  { Tensor y = gpu().moe_experts(x_dev, ids_dev, w_dev, ex.gpu); }
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  {
    Tensor y = gpu().moe_experts(x_dev, ids_dev, w_dev, ex.gpu);
    ASSERT_EQ(cudaMemcpyAsync(out_dev.data(), y.data(), y.nbytes(), cudaMemcpyDeviceToDevice, s), cudaSuccess);
  }
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int round = 0; round < 3; ++round) {
    // Round 1 sends every token to the same few experts; others spread them.
    Tensor x = randn({T, d}, rng_);
    Tensor idt = i32_tensor(route(T, E, K, round == 1 ? K + 1 : E, round == 1 ? 0 : -1), {T, K});
    Tensor w = randn({T, K}, rng_, 0.2f, 0.5f);
    Tensor xb = to_device(x);
    ASSERT_EQ(cudaMemcpyAsync(x_dev.data(), xb.data(), xb.nbytes(), cudaMemcpyDeviceToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(ids_dev.data(), idt.data(), idt.nbytes(), cudaMemcpyHostToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(w_dev.data(), w.data(), w.nbytes(), cudaMemcpyHostToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    Tensor got = to_host_f32(out_dev);
    Tensor want = cpu().moe_experts(x, idt, w, ex.cpu);
    DS_EXPECT_CLOSE(got, want, 2e-2, 1e-2, "moe grouped graph replay " + std::to_string(round));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// Kernel parameters over a test's own device buffers: the routing of logits lg [T, E] into ids / wts [T, K] (bias
// [E] or undefined), and the grouping of ids into meta (test::grouping_len int32, the op's layout: counts, offsets,
// cursor, active, num_active, row_of, src_token, slot records).
kernels::MoeRouteParams route_params_of(const MoeRouting& r, const Tensor& lg, const Tensor& bias, const Tensor& ids,
                                        const Tensor& wts) {
  kernels::RouteMethod method = kernels::RouteMethod::kNoauxTc;
  if (r.method == MoeRouting::Method::kGreedy) method = kernels::RouteMethod::kGreedy;
  if (r.method == MoeRouting::Method::kGroupLimitedGreedy) method = kernels::RouteMethod::kGroupLimitedGreedy;
  return {lg.data_as<float>(), bias.defined() ? bias.data_as<float>() : nullptr, ids.data_as<int32_t>(),
          wts.data_as<float>(), ids.dim(0), r.num_experts, r.top_k, r.n_group, r.topk_group, method, r.sigmoid,
          r.norm_topk_prob, r.routed_scaling_factor, r.shared_experts};
}
kernels::MoePermuteParams permute_params_of(const Tensor& ids, const Tensor& meta, int E) {
  const int64_t N = ids.numel();
  int32_t* mp = meta.data_as<int32_t>();
  return {ids.data_as<int32_t>(), mp, mp + E, mp + 2 * E, mp + 4 * E + 1, mp + 4 * E + 1 + N, N,
          static_cast<int>(ids.dim(1)), E, mp + 3 * E, mp + 4 * E, mp + test::grouping_slots_at(E, N)};
}

// A direct launch of the one-launch routing and grouping over host logits [T, E]: its own device copy of them, ids
// and weights [T, r.width()] and grouping (over E + r.shared_experts experts), NaN-poisoned by poison().
struct RoutePermuteLaunch {
  Tensor lg, ids, wts, meta;
  kernels::MoeRouteParams rp{};
  kernels::MoePermuteParams pp{};
  RoutePermuteLaunch(Ops& ops, const Tensor& logits, const Tensor& bias_dev, const MoeRouting& r) {
    const int64_t T = logits.dim(0), K = r.width();
    const int EG = r.grouped_experts();
    lg = cuda_upload(logits);
    ids = ops.empty({T, K}, DType::kI32);
    wts = ops.empty({T, K}, DType::kF32);
    meta = ops.empty({test::grouping_len(EG, T * K)}, DType::kI32);
    rp = route_params_of(r, lg, bias_dev, ids, wts);
    pp = permute_params_of(ids, meta, EG);
  }
  void poison(cudaStream_t s) {  // all-ones bytes: NaN weights, -1 ids and grouping entries
    for (Tensor* t : {&ids, &wts, &meta}) ASSERT_EQ(cudaMemsetAsync(t->data(), 0xff, t->nbytes(), s), cudaSuccess);
  }
};

// A direct launch of the fused router kernel over x [T, d] and its own NaN-poisoned buffers (logits, ids, weights,
// grouping, a zeroed ticket).
struct GateRouteLaunch {
  Tensor x, lg, ids, wts, meta, ticket;
  kernels::MoeGateRouteParams p{};
  GateRouteLaunch(Ops& ops, Tensor x_dev, const Tensor& router, const Tensor& bias, const MoeRouting& r)
      : x(std::move(x_dev)) {
    // K: entries a token (picks and fused shared experts); EG: the grouping's experts.
    const int64_t T = x.dim(0), E = r.num_experts, K = r.width(), N = T * K, EG = r.grouped_experts();
    lg = ops.empty({T, E}, DType::kF32);
    ids = ops.empty({T, K}, DType::kI32);
    wts = ops.empty({T, K}, DType::kF32);
    meta = ops.empty({test::grouping_len(static_cast<int>(EG), N)}, DType::kI32);
    ticket = ops.empty({1}, DType::kI32);
    EXPECT_EQ(cudaMemsetAsync(ticket.data(), 0, 4, cuda_stream()), cudaSuccess);
    p.x = x.data();
    p.w = router.data();
    p.logits = lg.data_as<float>();
    p.ticket = static_cast<uint32_t*>(ticket.data());
    p.dim = x.dim(1);
    p.route = route_params_of(r, lg, bias, ids, wts);
    p.permute = permute_params_of(ids, meta, static_cast<int>(EG));
  }
  void poison(cudaStream_t s) {  // all-ones bytes: NaN logits and weights, -1 ids and grouping entries
    for (Tensor* t : {&lg, &ids, &wts, &meta}) ASSERT_EQ(cudaMemsetAsync(t->data(), 0xff, t->nbytes(), s), cudaSuccess);
  }
};

// moe_gate_route at decode sizes (the fused kernel: V2-Lite's softmax greedy router, V3's sigmoid noaux_tc with
// bias over 256 experts and 7168 channels, an odd token count), eager and replayed from a graph: the logits
// match the CPU router, the ids / weights match the CPU routing of those logits exactly, the kernel's grouping
// (NaN-poisoned) is the grouping of those ids, and the experts op fed by the fused grouping matches, bit for
// bit, the experts op grouping a copy of the ids itself (also after a fused grouping nobody used). Prints the
// fused launch's time next to the three launches it replaces (graph replays, in isolation).
TEST_F(MoeGroupedTest, FusedGateRouteMatchesCpu) {
  cudaStream_t s = cuda_stream();
  const test::ScopedEnv gate_route("DSERVE_MOE_GATE_ROUTE", "1");  // opt-in, read per call
  for (const kbench::ModelDims& m : {kbench::deepseek_v2_lite(), kbench::deepseek_v3()}) {
    const MoeRouting r = kcases::routing_of(m);
    const int64_t d = m.hidden;
    const int E = r.num_experts, K = r.top_k;
    Tensor router_bf = to_device(randn({E, d}, rng_, 0.05f));  // bf16 on the device
    Tensor router_ref = to_host_f32(router_bf);
    Tensor bias = m.sigmoid ? randn({E}, rng_, 0.05f) : Tensor();
    Tensor bias_dev = m.sigmoid ? cuda_upload(bias) : Tensor();
    // Small experts (inner size 16) of the model's count and hidden size: they take the fused grouping, in the
    // capture too, as a forward does.
    Experts ex = make_experts(E, d, 16);
    for (int64_t T : {int64_t{1}, int64_t{3}, int64_t{8}}) {
      for (bool graph : {false, true}) {
        const std::string name = m.name + " T " + std::to_string(T) + (graph ? " graph" : " eager");
        Tensor x_dev = to_device(randn({T, d}, rng_));
        Tensor x_ref = to_host_f32(x_dev);
        Tensor logits, gi, gw, y;
        cudaGraphExec_t exec = nullptr;
        cudaGraph_t g = nullptr;
        if (!graph) {
          logits = gpu().moe_gate_route(x_dev, router_bf, bias_dev, r, &gi, &gw);
          y = gpu().moe_experts(x_dev, gi, gw, ex.gpu);  // takes the fused grouping
        } else {
          // Outputs copied out of the capture into buffers made outside it (what a capture allocates dies in it).
          logits = gpu().empty({T, E}, DType::kF32);
          gi = gpu().empty({T, K}, DType::kI32);
          gw = gpu().empty({T, K}, DType::kF32);
          y = gpu().empty({T, d}, DType::kBF16);
          { Tensor a, b; gpu().moe_gate_route(x_dev, router_bf, bias_dev, r, &a, &b); }  // warm-up outside
          ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
          ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
          {
            Tensor a, b;
            Tensor l = gpu().moe_gate_route(x_dev, router_bf, bias_dev, r, &a, &b);
            Tensor o = gpu().moe_experts(x_dev, a, b, ex.gpu);
            for (auto [dst, src] : {std::pair<Tensor*, Tensor*>{&logits, &l}, {&gi, &a}, {&gw, &b}, {&y, &o}})
              ASSERT_EQ(cudaMemcpyAsync(dst->data(), src->data(), src->nbytes(), cudaMemcpyDeviceToDevice, s),
                        cudaSuccess);
          }
          ASSERT_EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
          ASSERT_EQ(cudaGraphInstantiate(&exec, g, 0), cudaSuccess);
          for (int rep = 0; rep < 3; ++rep) ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);  // ticket reset
        }
        Tensor hl = to_host_f32(logits);
        DS_EXPECT_CLOSE(hl, cpu().linear_f32(x_ref, router_ref), 1e-4, 1e-5, "gate_route logits " + name);
        Tensor ci, cw;
        cpu().moe_route(hl, bias, r, &ci, &cw);
        Tensor hi = cuda_download(gi), hw = cuda_download(gw);
        int64_t id_mismatch = 0;
        for (int64_t i = 0; i < ci.numel(); ++i) id_mismatch += hi.data_as<int32_t>()[i] != ci.data_as<int32_t>()[i];
        EXPECT_EQ(id_mismatch, 0) << name;
        DS_EXPECT_CLOSE(hw, cw, 1e-6, 1e-6, "gate_route weights " + name);
        {
          // The same ids in a new tensor: the experts op groups them itself (moe_permute).
          Tensor want = to_host_f32(gpu().moe_experts(x_dev, cuda_upload(hi), gw, ex.gpu));
          Tensor got = to_host_f32(y);
          int64_t diff = 0;
          for (int64_t i = 0; i < got.numel(); ++i) diff += !(got.f32()[i] == want.f32()[i]);
          EXPECT_EQ(diff, 0) << "experts on the fused grouping " << name;
          if (!graph) {
            // The mark of a fused grouping never outlives the next experts op: route again, run the experts op on
            // other ids (a copy), then on the marked ids (the mark is gone: it groups them itself).
            Tensor a, b;
            gpu().moe_gate_route(x_dev, router_bf, bias_dev, r, &a, &b);
            Tensor other = to_host_f32(gpu().moe_experts(x_dev, cuda_upload(cuda_download(a)), b, ex.gpu));
            Tensor again = to_host_f32(gpu().moe_experts(x_dev, a, b, ex.gpu));
            int64_t d2 = 0;
            for (int64_t i = 0; i < got.numel(); ++i)
              d2 += !(other.f32()[i] == want.f32()[i]) + !(again.f32()[i] == want.f32()[i]);
            EXPECT_EQ(d2, 0) << "experts after an unused fused grouping " << name;
          }
        }
        if (graph) {
          cudaGraphExecDestroy(exec);
          cudaGraphDestroy(g);
        }
      }
      // The kernel's own grouping, NaN-poisoned, against the ids it wrote.
      const int64_t N = T * K;
      GateRouteLaunch l(gpu(), to_device(randn({T, d}, rng_)), router_bf, bias_dev, r);
      ASSERT_TRUE(kernels::moe_gate_route_supported(l.p));
      for (int rep = 0; rep < 2; ++rep) ASSERT_EQ(kernels::launch_moe_gate_route(l.p, s), cudaSuccess);
      Tensor hids = cuda_download(l.ids), hmeta = cuda_download(l.meta);
      std::vector<int32_t> idv(hids.data_as<int32_t>(), hids.data_as<int32_t>() + N);
      EXPECT_EQ(test::grouping_mismatches(idv, hmeta.data_as<int32_t>(), E, K, true), 0) << m.name << " T " << T;
      EXPECT_EQ(cuda_download(l.ticket).data_as<int32_t>()[0], 0) << "the last CTA resets the ticket";
    }
    // Isolated time (graph replays, kernels only): the fused launch vs router GEMM + routing + grouping.
    GateRouteLaunch l(gpu(), to_device(randn({1, d}, rng_)), router_bf, bias_dev, r);
    const double fused_us =
        test::graph_time_us([&] { ASSERT_EQ(kernels::launch_moe_gate_route(l.p, s), cudaSuccess); }, s);
    const double route_us = test::graph_time_us([&] {
      ASSERT_EQ(kernels::launch_moe_route(l.p.route, s), cudaSuccess);
      ASSERT_EQ(kernels::launch_moe_permute(l.p.permute, s), cudaSuccess);
    }, s);
    const double gemm_us = test::graph_time_us([&] { Tensor a = gpu().linear_f32(l.x, router_bf); }, s);
    std::printf("moe_gate_route %s T 1: fused %.2f us; router GEMM %.2f us + route + permute %.2f us\n",
                m.name.c_str(), fused_us, gemm_us, route_us);
  }
}

// moe_route at decode sizes with the routing and the grouping in one launch (the default; DSERVE_MOE_ROUTE_PERMUTE
// is read per call; V2-Lite's softmax greedy and V3's sigmoid noaux_tc with bias, token counts up to 16): ids and
// weights equal the CPU routing of the same logits, the experts op fed by the fused grouping equals, bit for bit,
// the op grouping a copy of the ids itself; the kernel's own ids, weights and grouping (poisoned) are those of the
// CPU routing, with the register routing (default) and the shared-memory one (DSERVE_MOE_ROUTE_FAST=0). Prints both
// launches' times next to the two launches they replace (graph replays, in isolation).
TEST_F(MoeGroupedTest, RoutePermuteMatchesCpu) {
  const test::ScopedEnv route_permute("DSERVE_MOE_ROUTE_PERMUTE", nullptr);  // unset: the default
  cudaStream_t s = cuda_stream();
  for (const kbench::ModelDims& m : {kbench::deepseek_v2_lite(), kbench::deepseek_v3()}) {
    const MoeRouting r = kcases::routing_of(m);
    const int64_t d = 64;
    const int E = r.num_experts, K = r.top_k;
    Tensor bias = m.sigmoid ? randn({E}, rng_, 0.05f) : Tensor();
    Tensor bias_dev = m.sigmoid ? cuda_upload(bias) : Tensor();
    Experts ex = make_experts(E, d, 16);
    for (int64_t T : {int64_t{1}, int64_t{5}, int64_t{16}}) {
      const std::string name = m.name + " T " + std::to_string(T);
      Tensor logits = randn({T, E}, rng_, 2.0f);
      Tensor gi, gw;
      gpu().moe_route(cuda_upload(logits), bias_dev, r, &gi, &gw);
      Tensor ci, cw;
      cpu().moe_route(logits, bias, r, &ci, &cw);
      Tensor hi = cuda_download(gi);
      int64_t id_mismatch = 0;
      for (int64_t i = 0; i < ci.numel(); ++i) id_mismatch += hi.data_as<int32_t>()[i] != ci.data_as<int32_t>()[i];
      EXPECT_EQ(id_mismatch, 0) << name;
      DS_EXPECT_CLOSE(cuda_download(gw), cw, 1e-6, 1e-6, "route_permute weights " + name);
      Tensor x_dev = to_device(randn({T, d}, rng_));
      EXPECT_EQ(fused_grouping_mismatches(x_dev, gi, gw, hi, ex), 0) << "experts on the fused grouping " << name;
      // The kernel alone over NaN-poisoned ids, weights and grouping: the register routing (default) and the
      // shared-memory one (DSERVE_MOE_ROUTE_FAST=0, read per launch).
      const int64_t N = T * K;
      RoutePermuteLaunch l(gpu(), logits, bias_dev, r);
      const kernels::MoeRouteParams& rp = l.rp;
      const kernels::MoePermuteParams& pp = l.pp;
      ASSERT_TRUE(kernels::moe_route_permute_supported(rp, pp)) << name;
      double us[2] = {0, 0};
      for (int fast = 1; fast >= 0; --fast) {
        const test::ScopedEnv kernel("DSERVE_MOE_ROUTE_FAST", fast ? nullptr : "0");
        const std::string kname = name + (fast ? " register routing" : " shared-memory routing");
        l.poison(s);
        ASSERT_EQ(kernels::launch_moe_route_permute(rp, pp, s), cudaSuccess);
        Tensor kid = cuda_download(l.ids), hmeta = cuda_download(l.meta);
        std::vector<int32_t> idv(kid.data_as<int32_t>(), kid.data_as<int32_t>() + N);
        EXPECT_EQ(std::vector<int32_t>(hi.data_as<int32_t>(), hi.data_as<int32_t>() + N), idv) << kname;
        DS_EXPECT_CLOSE(cuda_download(l.wts), cw, 1e-6, 1e-6, "kernel weights " + kname);
        EXPECT_EQ(test::grouping_mismatches(idv, hmeta.data_as<int32_t>(), E, K, true), 0) << kname;
        if (T == 1)
          us[fast] =
              test::graph_time_us([&] { ASSERT_EQ(kernels::launch_moe_route_permute(rp, pp, s), cudaSuccess); }, s);
      }
      if (T == 1) {
        const double two_us = test::graph_time_us([&] {
          ASSERT_EQ(kernels::launch_moe_route(rp, s), cudaSuccess);
          ASSERT_EQ(kernels::launch_moe_permute(pp, s), cudaSuccess);
        }, s);
        std::printf("moe_route_permute %s T 1: register routing %.2f us, shared-memory routing %.2f us; route + "
                    "permute %.2f us\n", m.name.c_str(), us[1], us[0], two_us);
      }
    }
    // Past 16 tokens, and with DSERVE_MOE_ROUTE_PERMUTE=0, the op takes the two launches (no grouping behind the
    // ids): still the CPU's routing. Then the routing launch alone over NaN-poisoned ids and weights, with the
    // register routing (default) and the shared-memory one (DSERVE_MOE_ROUTE_FAST=0).
    for (int64_t T : {int64_t{3}, int64_t{kernels::kMoeRoutePermuteMaxTokens} + 1, int64_t{203}}) {
      const test::ScopedEnv apart("DSERVE_MOE_ROUTE_PERMUTE", T == 3 ? "0" : nullptr);
      const std::string name = m.name + " T " + std::to_string(T);
      Tensor logits = randn({T, E}, rng_, 2.0f);
      Tensor gi, gw, ci, cw;
      gpu().moe_route(cuda_upload(logits), bias_dev, r, &gi, &gw);
      cpu().moe_route(logits, bias, r, &ci, &cw);
      const std::vector<int32_t> want(ci.data_as<int32_t>(), ci.data_as<int32_t>() + ci.numel());
      Tensor hi = cuda_download(gi);
      EXPECT_EQ(std::vector<int32_t>(hi.data_as<int32_t>(), hi.data_as<int32_t>() + ci.numel()), want) << name;
      DS_EXPECT_CLOSE(cuda_download(gw), cw, 1e-6, 1e-6, "route weights " + name);
      Tensor lg = cuda_upload(logits), ids = gpu().empty({T, K}, DType::kI32), wts = gpu().empty({T, K}, DType::kF32);
      const kernels::MoeRouteParams rp = route_params_of(r, lg, bias_dev, ids, wts);
      for (int fast = 1; fast >= 0; --fast) {
        const test::ScopedEnv kernel("DSERVE_MOE_ROUTE_FAST", fast ? nullptr : "0");
        const std::string kname = name + (fast ? " register routing launch" : " shared-memory routing launch");
        for (Tensor* t : {&ids, &wts}) ASSERT_EQ(cudaMemsetAsync(t->data(), 0xff, t->nbytes(), s), cudaSuccess);
        ASSERT_EQ(kernels::launch_moe_route(rp, s), cudaSuccess);
        Tensor kid = cuda_download(ids);
        EXPECT_EQ(std::vector<int32_t>(kid.data_as<int32_t>(), kid.data_as<int32_t>() + ci.numel()), want) << kname;
        DS_EXPECT_CLOSE(cuda_download(wts), cw, 1e-6, 1e-6, "kernel weights " + kname);
      }
    }
  }
}

// Shared-experts fusion (MoeRouting::shared_experts; V2-Lite's shared MLP cut in two parts, V3's one): the routing
// op gives each token its picks (those of the routing without the fusion), then experts E .. E + shared - 1 with
// weight 1, as the CPU routing does: at decode sizes (routing and grouping in one launch) and past them (two
// launches), with the register routing and the shared-memory one (DSERVE_MOE_ROUTE_FAST=0). The experts op over
// the E + shared experts fed by the fused grouping equals, bit for bit, the op grouping a copy of the ids, and
// matches the CPU's; the kernels' own ids and groupings (NaN-poisoned) are the CPU routing's, the fused router's
// (DSERVE_MOE_GATE_ROUTE's kernel) too.
TEST_F(MoeGroupedTest, SharedExpertsFusedRouting) {
  cudaStream_t s = cuda_stream();
  for (const kbench::ModelDims& m : {kbench::deepseek_v2_lite(), kbench::deepseek_v3()}) {
    const MoeRouting plain = kcases::routing_of(m);
    MoeRouting r = plain;
    r.shared_experts = m.sigmoid ? 1 : 2;
    const int E = r.num_experts, K = r.width(), EG = r.grouped_experts();
    const int64_t d = 64;
    Tensor bias = m.sigmoid ? randn({E}, rng_, 0.05f) : Tensor();
    Tensor bias_dev = m.sigmoid ? cuda_upload(bias) : Tensor();
    Experts ex = make_experts(EG, d, 16);
    for (int64_t T : {int64_t{1}, int64_t{5}, int64_t{16}, int64_t{17}, int64_t{203}}) {
      for (int fast = 1; fast >= 0; --fast) {
        const test::ScopedEnv kernel("DSERVE_MOE_ROUTE_FAST", fast ? nullptr : "0");
        const std::string name = m.name + " T " + std::to_string(T) + (fast ? " register" : " shared-memory");
        Tensor logits = randn({T, E}, rng_, 2.0f);
        Tensor ci, cw, pi, pw;
        cpu().moe_route(logits, bias, r, &ci, &cw);
        cpu().moe_route(logits, bias, plain, &pi, &pw);
        ASSERT_EQ(ci.dim(1), K) << name;
        for (int64_t t = 0; t < T; ++t)
          for (int k = 0; k < K; ++k) {
            const int32_t id = ci.data_as<int32_t>()[t * K + k];
            const float w = cw.f32()[t * K + k];
            if (k < r.top_k) {
              EXPECT_EQ(id, pi.data_as<int32_t>()[t * r.top_k + k]) << name;
              EXPECT_EQ(w, pw.f32()[t * r.top_k + k]) << name;
            } else {
              EXPECT_EQ(id, E + k - r.top_k) << name;
              EXPECT_EQ(w, 1.0f) << name;
            }
          }
        Tensor gi, gw;
        gpu().moe_route(cuda_upload(logits), bias_dev, r, &gi, &gw);
        ASSERT_EQ(gi.dim(1), K) << name;
        Tensor hi = cuda_download(gi);
        EXPECT_EQ(std::vector<int32_t>(hi.data_as<int32_t>(), hi.data_as<int32_t>() + ci.numel()),
                  std::vector<int32_t>(ci.data_as<int32_t>(), ci.data_as<int32_t>() + ci.numel())) << name;
        DS_EXPECT_CLOSE(cuda_download(gw), cw, 1e-6, 1e-6, "fused-shared route weights " + name);
        Tensor x_dev = to_device(randn({T, d}, rng_));
        Tensor got;  // the fused grouping up to 16 tokens
        EXPECT_EQ(fused_grouping_mismatches(x_dev, gi, gw, hi, ex, &got), 0) << "experts on the fused grouping " << name;
        DS_EXPECT_CLOSE(got, cpu().moe_experts(to_host_f32(x_dev), ci, cw, ex.cpu), 2e-2, 1e-2,
                        "fused-shared experts " + name);
        if (T > kernels::kMoeRoutePermuteMaxTokens) continue;
        // The one-launch routing and grouping alone, over NaN-poisoned ids, weights and grouping.
        const int64_t N = T * K;
        RoutePermuteLaunch l(gpu(), logits, bias_dev, r);
        ASSERT_TRUE(kernels::moe_route_permute_supported(l.rp, l.pp)) << name;
        l.poison(s);
        ASSERT_EQ(kernels::launch_moe_route_permute(l.rp, l.pp, s), cudaSuccess);
        Tensor kid = cuda_download(l.ids), hmeta = cuda_download(l.meta);
        std::vector<int32_t> idv(kid.data_as<int32_t>(), kid.data_as<int32_t>() + N);
        EXPECT_EQ(std::vector<int32_t>(ci.data_as<int32_t>(), ci.data_as<int32_t>() + N), idv) << name;
        DS_EXPECT_CLOSE(cuda_download(l.wts), cw, 1e-6, 1e-6, "route_permute kernel weights " + name);
        EXPECT_EQ(test::grouping_mismatches(idv, hmeta.data_as<int32_t>(), EG, K, true), 0) << name;
      }
    }
    // The fused router kernel at the model's hidden size: its ids are the CPU routing of its logits, its grouping
    // (poisoned) that of its ids.
    Tensor router_bf = to_device(randn({E, m.hidden}, rng_, 0.05f));
    for (int64_t T : {int64_t{1}, int64_t{kernels::kMoeGateRouteMaxTokens}}) {
      for (int fast = 1; fast >= 0; --fast) {
        const test::ScopedEnv kernel("DSERVE_MOE_ROUTE_FAST", fast ? nullptr : "0");
        const std::string name = m.name + " gate_route T " + std::to_string(T) + (fast ? " register" : " shared-memory");
        GateRouteLaunch l(gpu(), to_device(randn({T, m.hidden}, rng_)), router_bf, bias_dev, r);
        l.poison(s);
        ASSERT_TRUE(kernels::moe_gate_route_supported(l.p)) << name;
        ASSERT_EQ(kernels::launch_moe_gate_route(l.p, s), cudaSuccess);
        Tensor ci, cw;
        cpu().moe_route(to_host_f32(l.lg), bias, r, &ci, &cw);
        Tensor kid = cuda_download(l.ids), hmeta = cuda_download(l.meta);
        const int64_t N = T * K;
        std::vector<int32_t> idv(kid.data_as<int32_t>(), kid.data_as<int32_t>() + N);
        EXPECT_EQ(std::vector<int32_t>(ci.data_as<int32_t>(), ci.data_as<int32_t>() + N), idv) << name;
        DS_EXPECT_CLOSE(cuda_download(l.wts), cw, 1e-6, 1e-6, "gate_route kernel weights " + name);
        EXPECT_EQ(test::grouping_mismatches(idv, hmeta.data_as<int32_t>(), EG, K, true), 0) << name;
      }
    }
  }
}

}  // namespace
}  // namespace ds
