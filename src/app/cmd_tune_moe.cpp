// `dserve tune-moe`: measures, on this GPU, up to how many tokens a model's FP8 MoE layer should run the
// device-driven grouped kernels (kernels/moe_fp8.h) before cuBLASLt block-FP8 per expert (host sync) is faster,
// and writes the table (ops/fp8_tuning.h MoeFp8Tuning) that DSERVE_MOE_FP8_CONFIG or
// configs/moe_fp8/<GPU name>.json supplies to native FP8 runs.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/flags.h"
#include "app/model_setup.h"
#include "model/config.h"
#include "ops/fp8.h"
#include "ops/fp8_tuning.h"
#ifdef DSERVE_WITH_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/cuda_runtime.h"
#include "ops/ops.h"
#endif

namespace ds {

int run_tune_moe(int argc, char** argv) {
  Flags flags;
  flags.add_string("model-path", "", "config.json (file) or checkpoint directory whose MoE layer to tune");
  flags.add_string("output", "", "write the JSON table here (DSERVE_MOE_FP8_CONFIG loads it); default: stdout");
  flags.add_int_list("tokens", "32,64,128,256,512,1024,2048,4096,8192",
                     "token counts to measure (a list, each in [17, 65536])");
  flags.add_int("iters", 5, "timed repetitions per point");
  flags.add_bool("help", "show flags");
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "dserve tune-moe: %s\n", st.message().c_str());
    return 1;
  };
  if (Status st = flags.parse(argc, argv); !st) return fail(st);
  if (flags.get_bool("help")) {
    std::printf("%s", flags.usage("tune-moe").c_str());
    return 0;
  }
  const std::string path = flags.get_string("model-path");
  if (path.empty()) return fail(error("--model-path is required"));
  Result<ModelConfig> cfg = load_config_path(path);
  if (!cfg) return fail(cfg.status());
  const int64_t E = cfg->n_routed_experts, d = cfg->hidden_size, inter = cfg->moe_intermediate_size;
  const int64_t K = cfg->num_experts_per_tok;
  if (E <= 0 || K <= 0 || inter <= 0) return fail(error(path, ": the model has no routed experts"));
  if (d % 128 != 0) return fail(error(path, ": hidden_size ", d, " is not a multiple of 128 (no native FP8 experts)"));
  std::vector<int64_t> ts = flags.get_int_list("tokens");
  std::sort(ts.begin(), ts.end());
  ts.erase(std::unique(ts.begin(), ts.end()), ts.end());
  if (ts.empty() || ts.front() <= MoeFp8Tuning::kMinGroupedMax || ts.back() > 65536)
    return fail(error("--tokens values must be in [17, 65536] (up to 16 tokens the grouped small-M kernel always runs)"));
  const int64_t iters = flags.get_int("iters");
  if (iters < 1 || iters > 1000) return fail(error("--iters must be in [1, 1000]"));
  // An existing --output table (one file per GPU, several models) keeps its other shapes: check it before tuning.
  const std::string dest = flags.get_string("output");
  std::string existing;
  if (std::ifstream old(dest); !dest.empty() && old) {
    std::stringstream prev;
    prev << old.rdbuf();
    existing = prev.str();
    if (Result<MoeFp8Tuning> t = parse_moe_fp8_tuning(existing); !t)
      return fail(error("--output '", dest, "' exists and is not an FP8 MoE table: ", t.status().message()));
  }
#ifndef DSERVE_WITH_CUDA
  return fail(error("this build has no CUDA backend: tune-moe measures GPU kernels"));
#else
  if (Status st = check_cuda_device(0); !st) return fail(st);
  const int64_t ip = (inter + 127) / 128 * 128;
  size_t free_b = 0, total_b = 0;
  init_cuda_device(0);
  cudaMemGetInfo(&free_b, &total_b);
  const double need = static_cast<double>(E) * 3 * d * ip + 4.0 * ts.back() * K * (d + ip) * 3;
  if (need > 0.8 * static_cast<double>(free_b))
    return fail(error("the layer needs ~", static_cast<int64_t>(need / (1 << 30)), " GiB of device memory, ",
                      static_cast<int64_t>(free_b >> 30), " GiB free"));
  setenv("DSERVE_FP8_NATIVE", "1", 1);
  std::unique_ptr<Ops> ops = make_cuda_ops(0);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  // Random e4m3 weights with scale 1/64; every expert its own device copy, so repeated calls stream past the L2.
  const LinearWeight g = random_e4m3_weight(inter, d, 1, 1.0f / 64), u = random_e4m3_weight(inter, d, 2, 1.0f / 64),
                     dn = random_e4m3_weight(d, inter, 3, 1.0f / 64);
  std::vector<PreparedMlp> experts;
  for (int64_t e = 0; e < E; ++e) experts.push_back(ops->prepare_mlp(g, u, dn));
  std::printf("tune-moe on %s: %lld experts, hidden %lld, inter %lld, top-%lld: grouped kernels vs cuBLASLt per "
              "expert, us per layer\n",
              prop.name, static_cast<long long>(E), static_cast<long long>(d), static_cast<long long>(ip),
              static_cast<long long>(K));
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::mt19937 rng(20261125);
  nlohmann::json entry = {{"name", "moe"}, {"experts", E}, {"hidden", d}, {"inter", ip}, {"top_k", K}};
  int64_t best = MoeFp8Tuning::kMinGroupedMax;
  bool lost = false;
  for (int64_t T : ts) {
    Tensor xh = Tensor::empty({T, d}, DType::kBF16);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t i = 0; i < xh.numel(); ++i) xh.data_as<uint16_t>()[i] = f32_to_bf16(nd(rng));
    Tensor ids = Tensor::empty({T, K}, DType::kI32), w = Tensor::empty({T, K}, DType::kF32);
    std::vector<int32_t> all(static_cast<size_t>(E));
    for (int64_t t = 0; t < T; ++t) {  // uniform top-k, distinct experts per token
      for (int64_t e = 0; e < E; ++e) all[e] = static_cast<int32_t>(e);
      std::shuffle(all.begin(), all.end(), rng);
      for (int64_t k = 0; k < K; ++k) {
        ids.data_as<int32_t>()[t * K + k] = all[k];
        w.f32()[t * K + k] = 1.0f / static_cast<float>(K);
      }
    }
    Tensor xd = ops->upload(xh), idd = ops->upload(ids), wd = ops->upload(w);
    auto time_path = [&](bool grouped) {
      setenv("DSERVE_MOE_FP8_GROUPED_MAX", grouped ? "1048576" : "16", 1);
      for (int i = 0; i < 2; ++i) ops->moe_experts(xd, idd, wd, experts);
      cudaEventRecord(e0, cuda_stream());
      for (int64_t i = 0; i < iters; ++i) ops->moe_experts(xd, idd, wd, experts);
      cudaEventRecord(e1, cuda_stream());
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      return 1000.0 * ms / static_cast<double>(iters);
    };
    const double grouped_us = time_path(true), synced_us = time_path(false);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      return fail(error("CUDA error while timing ", T, " tokens: ", cudaGetErrorString(err)));
    // The switch goes below the first size where the grouped kernels lose.
    if (!lost && grouped_us <= synced_us) best = T;
    lost = lost || grouped_us > synced_us;
    entry["us"][std::to_string(T)] = {grouped_us, synced_us};
    std::printf("  %6lld tokens: grouped %9.1f  per-expert cuBLASLt %9.1f\n", static_cast<long long>(T), grouped_us,
                synced_us);
  }
  unsetenv("DSERVE_MOE_FP8_GROUPED_MAX");
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  entry["grouped_max_tokens"] = best;
  std::printf("grouped_max_tokens %lld\n", static_cast<long long>(best));
  Result<std::string> text = merge_moe_fp8_tuning(existing, prop.name, entry.dump());
  if (!text) return fail(text.status());
  if (dest.empty()) {
    std::printf("%s", text->c_str());
  } else {
    std::ofstream f(dest);
    f << *text;
    if (!f) return fail(error("cannot write --output '", dest, "'"));
    std::printf("wrote %s\n", dest.c_str());
  }
  return 0;
#endif
}

}  // namespace ds
