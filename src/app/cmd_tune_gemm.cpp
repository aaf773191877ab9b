// `dserve tune-gemm`: measures, on this GPU, where the native block-FP8 linears should switch from the small-M
// kernel to cuBLASLt block-scaled FP8 for every FP8 linear shape of a model config, and writes the dispatch
// table (ops/fp8_tuning.h) that DSERVE_FP8_GEMM_CONFIG loads. SGLang keeps such tables per device in JSON.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/flags.h"
#include "app/model_setup.h"
#include "model/config.h"
#include "ops/fp8.h"
#ifdef DSERVE_WITH_CUDA
#include <cuda_runtime.h>

#include "ops/cuda/cuda_runtime.h"
#include "ops/cuda/fp8_linear.h"
#include "ops/cuda/graph_timing.h"
#endif

namespace ds {
namespace {

struct LinearShape {
  std::string name;
  int64_t n, k;
};

int64_t pad128(int64_t v) { return (v + 127) / 128 * 128; }

// Every block-FP8 linear of the model (attention, indexer, MTP projection, dense and shared MLPs), by padded
// shape; the first name seen labels a shape. (Used only by the CUDA build's measurement: maybe_unused elsewhere.)
[[maybe_unused]] std::vector<LinearShape> fp8_shapes(const ModelConfig& c) {
  const int64_t d = c.hidden_size, H = c.num_attention_heads;
  std::vector<LinearShape> all;
  if (c.q_lora_rank > 0) {
    all.push_back({"q_a_proj", c.q_lora_rank, d});
    all.push_back({"q_b_proj", H * c.qk_head_dim(), c.q_lora_rank});
  } else {
    all.push_back({"q_proj", H * c.qk_head_dim(), d});
  }
  all.push_back({"kv_a_proj", c.kv_cache_dim(), d});
  all.push_back({"kv_b_proj", H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank});
  all.push_back({"o_proj", d, H * c.v_head_dim});
  if (c.has_indexer()) {
    all.push_back({"indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank});
    all.push_back({"indexer.wk", c.index_head_dim, d});
  }
  if (c.num_nextn_predict_layers > 0) all.push_back({"eh_proj", d, 2 * d});
  // MLPs run as one [gate; up] linear with the intermediate size padded to 128 (ops/fp8.h stack_mlp_fp8).
  if (c.intermediate_size > 0) {
    all.push_back({"dense.gate_up", 2 * pad128(c.intermediate_size), d});
    all.push_back({"dense.down", d, pad128(c.intermediate_size)});
  }
  if (c.n_shared_experts > 0) {
    const int64_t shared = pad128(c.n_shared_experts * c.moe_intermediate_size);
    all.push_back({"shared.gate_up", 2 * shared, d});
    all.push_back({"shared.down", d, shared});
  }
  std::vector<LinearShape> out;
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const LinearShape& s : all)
    if (s.n > 0 && s.k > 0 && seen.insert({pad128(s.n), pad128(s.k)}).second) out.push_back(s);
  return out;
}

// The dispatch rule from timings: the small-M kernel up to the largest M (of the measured list) below which it
// never loses to cuBLASLt; 0 when it loses already at the smallest M.
[[maybe_unused]] int64_t crossover(const std::vector<int64_t>& ms, const std::vector<double>& small_us,
                                   const std::vector<double>& lt_us) {
  int64_t best = 0;
  for (size_t i = 0; i < ms.size(); ++i) {
    if (small_us[i] > lt_us[i]) break;
    best = ms[i];
  }
  return best;
}

}  // namespace

int run_tune_gemm(int argc, char** argv) {
  Flags flags;
  flags.add_string("model-path", "", "config.json (file) or checkpoint directory whose FP8 linear shapes to tune");
  flags.add_string("output", "", "write the JSON table here (DSERVE_FP8_GEMM_CONFIG loads it); default: stdout");
  flags.add_int_list("m-list", "1,2,4,8,12,16,24,32,48,64", "token counts to measure (a list, each in [1, 64])");
  flags.add_int("iters", 20, "timed repetitions per point");
  flags.add_bool("help", "show flags");
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "dserve tune-gemm: %s\n", st.message().c_str());
    return 1;
  };
  if (Status st = flags.parse(argc, argv); !st) return fail(st);
  if (flags.get_bool("help")) {
    std::printf("%s", flags.usage("tune-gemm").c_str());
    return 0;
  }
  const std::string path = flags.get_string("model-path");
  if (path.empty()) return fail(error("--model-path is required"));
  Result<ModelConfig> cfg = load_config_path(path);
  if (!cfg) return fail(cfg.status());
  std::vector<int64_t> ms = flags.get_int_list("m-list");
  std::sort(ms.begin(), ms.end());
  ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
  if (ms.empty() || ms.front() < 1 || ms.back() > 64) return fail(error("--m-list values must be in [1, 64]"));
  const int64_t iters = flags.get_int("iters");
  if (iters < 1 || iters > 10000) return fail(error("--iters must be in [1, 10000]"));
#ifndef DSERVE_WITH_CUDA
  return fail(error("this build has no CUDA backend: tune-gemm measures GPU kernels"));
#else
  if (Status st = check_cuda_device(0); !st) return fail(st);
  init_cuda_device(0);
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  Fp8Gemm gemm;
  nlohmann::json out = {{"device", prop.name}, {"default_small_m_max", gemm.small_m_max()}, {"shapes", nlohmann::json::array()}};
  std::printf("tune-gemm on %s: small-M kernel vs cuBLASLt block-FP8 (quantization included), us per call\n", prop.name);
  for (const LinearShape& s : fp8_shapes(*cfg)) {
    // Random e4m3 weights (never NaN) with small scales; enough copies to stream past the 50 MB L2.
    const LinearWeight host = random_e4m3_weight(s.n, s.k, static_cast<uint64_t>(s.n * 131 + s.k), 1e-3f);
    const int64_t np = pad128(s.n), kp = pad128(s.k), bytes = np * kp;
    const int copies = static_cast<int>(std::clamp<int64_t>((256LL << 20) / std::max<int64_t>(bytes, 1) + 1, 1, 64));
    std::vector<Fp8Weight> ws;
    for (int c = 0; c < copies; ++c) ws.push_back(prepare_fp8_weight(host));
    std::vector<double> small_us, lt_us;
    for (int64_t m : ms) {
      Tensor xh = Tensor::empty(ds::Shape{m, s.k}, DType::kF32);
      for (int64_t i = 0; i < xh.numel(); ++i) xh.f32()[i] = static_cast<float>((i * 37 % 101) - 50) * 0.02f;
      Tensor xd = cuda_upload(xh);
      // Device time per call (quantization included), replayed from a CUDA graph as decode steps run it: timed
      // eagerly, a call of two small launches is bound by the host (~8-12 us a call for every shape at M = 1 on
      // the H200, session 51), which hid the kernels' differences.
      auto time_path = [&](Fp8Path p) {
        return graph_time_us([&](int i) { gemm.linear(xd, ws[i % copies], false, p); }, static_cast<int>(iters));
      };
      small_us.push_back(time_path(Fp8Path::kSmallM));
      const int64_t mp = (m + Fp8Gemm::kLtRowMultiple - 1) / Fp8Gemm::kLtRowMultiple * Fp8Gemm::kLtRowMultiple;
      lt_us.push_back(gemm.lt_supported(mp, np, kp) ? time_path(Fp8Path::kCublasLt) : 1e30);
    }
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      return fail(error("CUDA error while timing ", s.name, ": ", cudaGetErrorString(err)));
    const int64_t best = crossover(ms, small_us, lt_us);
    nlohmann::json entry = {{"name", s.name}, {"N", np}, {"K", kp}, {"small_m_max", best}};
    std::printf("%-16s N %6lld K %6lld -> small_m_max %2lld |", s.name.c_str(), static_cast<long long>(np),
                static_cast<long long>(kp), static_cast<long long>(best));
    for (size_t i = 0; i < ms.size(); ++i) {
      entry["us"][std::to_string(ms[i])] = {small_us[i], lt_us[i] > 1e29 ? -1.0 : lt_us[i]};
      std::printf(" M%lld %.1f/%.1f", static_cast<long long>(ms[i]), small_us[i], lt_us[i] > 1e29 ? -1.0 : lt_us[i]);
    }
    std::printf("\n");
    out["shapes"].push_back(entry);
  }
  const std::string text = out.dump(1) + "\n";
  const std::string dest = flags.get_string("output");
  if (dest.empty()) {
    std::printf("%s", text.c_str());
  } else {
    std::ofstream f(dest);
    f << text;
    if (!f) return fail(error("cannot write --output '", dest, "'"));
    std::printf("wrote %s\n", dest.c_str());
  }
  return 0;
#endif
}

}  // namespace ds
