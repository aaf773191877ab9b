// Model loading for CLI commands (see model_setup.h).
#include "app/model_setup.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include "core/logging.h"
#ifdef DSERVE_WITH_CUDA
#include "ops/cuda/cuda_runtime.h"
#endif
#include "model/quantize.h"
#include "runner/expert_recorder.h"
#include "runner/mem_plan.h"
#include "sched/scheduler.h"

namespace ds {

double estimate_parameters(const ModelConfig& c) {
  const double d = static_cast<double>(c.hidden_size), H = c.num_attention_heads;
  const double attn = (c.q_lora_rank > 0 ? d * c.q_lora_rank + c.q_lora_rank * H * c.qk_head_dim() : d * H * c.qk_head_dim()) +
                      d * c.kv_cache_dim() + c.kv_lora_rank * H * (c.qk_nope_head_dim + c.v_head_dim) + H * c.v_head_dim * d;
  double total = 2.0 * c.vocab_size * d;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    total += attn;
    if (c.is_moe_layer(l))
      total += (c.n_routed_experts + c.n_shared_experts) * 3.0 * d * c.moe_intermediate_size + c.n_routed_experts * d;
    else
      total += 3.0 * d * c.intermediate_size;
  }
  return total;
}

void add_model_flags(Flags& flags) {
  flags.add_string("model-path", "", "Hugging Face checkpoint directory (config.json + *.safetensors)");
  flags.add_string("device", "auto", "cpu, cuda or auto (cuda when this build has CUDA and a GPU is visible)");
  flags.add_string("load-format", "auto", "auto (safetensors) or dummy (seeded random weights from config.json)");
  flags.add_int("seed", 0, "random seed for --load-format dummy and sampling");
  flags.add_string("attention-mode", "auto", "MLA form: auto, mha (expand latents) or absorbed (MQA over the cache)");
  flags.add_string("quantization", "", "fp8: block-quantize a BF16 checkpoint's linears at load time");
  flags.add_string("kv-cache-dtype", "auto", "latent cache storage: auto, bf16, fp8_e4m3 or fp8_e5m2");
  flags.add_bool("disable-shared-experts-fusion",
                 "run the shared experts apart, not as extra routed experts (the default; DSERVE_SHARED_EXPERTS_FUSION=1: fused)");
  flags.add_bool("disable-chunked-prefix-cache",
                 "MHA-form prefill over the whole context in one pass instead of chunks merged by log-sum-exp");
  flags.add_bool("json", "print JSON");
  add_sglang_compat_flags(flags);
}

void add_sglang_compat_flags(Flags& flags) {
  flags.add_alias("model", "model-path");
  flags.add_alias("random-seed", "seed");
  flags.add_bool("trust-remote-code", "accepted for SGLang command lines (dserve runs no checkpoint code)");
  flags.add_string("log-level", "", "debug, info, warning, error or critical (default: DSERVE_LOG, else info)");
  flags.add_int("tp-size", 1, "tensor-parallel size (serve: ranks as threads of one process; --device cuda: one GPU "
                              "a rank, all-reduced over NCCL)");
  flags.add_alias("tp", "tp-size");
  flags.add_alias("tensor-parallel-size", "tp-size");
  flags.add_int("dp-size", 1, "data-parallel size (1)");
  flags.add_alias("dp", "dp-size");
  flags.add_alias("data-parallel-size", "dp-size");
  flags.add_int("pp-size", 1, "pipeline-parallel size (1)");
  flags.add_alias("pipeline-parallel-size", "pp-size");
  flags.add_int("ep-size", 1, "expert-parallel size (1; serve: = --tp-size deals the routed experts out whole)");
  flags.add_int("base-gpu-id", 0, "the GPU of the first (or only) rank");
  flags.add_int("gpu-id-step", 1, "tensor-parallel rank r runs on GPU --base-gpu-id + r * --gpu-id-step");
  flags.add_alias("ep", "ep-size");
  flags.add_alias("expert-parallel-size", "ep-size");
  flags.add_bool("enable-dp-attention", "data-parallel attention: --dp-size ranks with their own requests and KV pools, "
                                        "MLPs sharded over them (serve; --dp-size = --tp-size; on CUDA one GPU a rank)");
  for (const char* name : {"attention-backend", "prefill-attention-backend", "decode-attention-backend"})
    flags.add_string(name, "", "SGLang's MLA backend names (fa3, flashinfer, triton, flashmla, ...): accepted and "
                               "checked; dserve runs its own MLA kernels whatever the name");
  flags.add_bool("enable-torch-compile", "accepted for SGLang command lines (dserve captures CUDA graphs; no torch)");
  flags.add_int("torch-compile-max-bs", 32, "accepted with --enable-torch-compile (no effect)");
  flags.add_string("speculative-algorithm", "",
                   "EAGLE or NEXTN (the same): MTP speculative decoding with the checkpoint's NextN layer; NGRAM: "
                   "drafts from each request's own tokens (any checkpoint); serve only. EAGLE3 and STANDALONE are "
                   "not built");
  flags.add_int("speculative-num-steps", 0, "draft tokens a decode step verifies (default 3, as SGLang for DeepSeek)");
  flags.add_int("speculative-eagle-topk", 0, "drafts per step (default 1: one chain; tree drafts are not built)");
  flags.add_int("speculative-num-draft-tokens", 0, "with topk 1 always num-steps + 1 (as SGLang)");
  flags.add_int("speculative-ngram-min-match-window-size", 1, "NGRAM: the shortest suffix that may match");
  flags.add_int("speculative-ngram-max-match-window-size", 12, "NGRAM: the longest suffix tried (longest first)");
  flags.add_string("speculative-draft-model-path", "",
                   "the draft's checkpoint: --model-path's own MTP layer (default; another path is refused)");
  // SGLang's DeepSeek deployment flags (docs/basic_usage/deepseek_v3.md, deepseek_v32.md, expert_parallelism.md): kernel
  // and overlap choices are accepted and named in the log as having no effect here; what would change the answer or
  // the machine layout is checked (check_sglang_feature_flags).
  for (const char* name : {"nsa-prefill-backend", "nsa-decode-backend", "dsa-prefill-backend", "dsa-decode-backend",
                           "nsa-prefill", "nsa-decode", "fp8-gemm-backend", "moe-runner-backend",
                           "speculative-attention-mode", "speculative-moe-runner-backend",
                           "speculative-moe-a2a-backend", "nsa-prefill-cp-mode", "eplb-algorithm",
                           "ep-dispatch-algorithm"})
    flags.add_string(name, "", "SGLang's kernel / schedule choice: accepted, no effect (dserve runs its own kernels)");
  flags.add_string("moe-a2a-backend", "none", "SGLang's MoE all-to-all (deepep, mooncake, ...): accepted with "
                                              "--ep-size = --tp-size; dserve's expert parallelism all-reduces instead");
  flags.add_string("deepep-mode", "auto", "with --moe-a2a-backend deepep: auto, normal or low_latency (no effect)");
  for (const char* name : {"enable-two-batch-overlap", "enable-single-batch-overlap", "enable-dp-lm-head",
                           "enable-eplb", "enable-nsa-prefill-context-parallel", "enable-dsa-prefill-context-parallel"})
    flags.add_bool(name, "SGLang's overlap / balancing / layout option: accepted, not built here (no effect)");
  flags.add_bool("enable-ep-moe", "SGLang's deprecated spelling of --ep-size = --tp-size (refused: give --ep-size)");
  flags.add_bool("enable-deepep-moe", "SGLang's deprecated spelling of --moe-a2a-backend deepep (refused)");
  flags.add_double("tbo-token-distribution-threshold", 0.48, "with --enable-two-batch-overlap (no effect)");
  flags.add_int("triton-attention-num-kv-splits", 8, "SGLang's Triton split-KV count (no effect: dserve plans splits)");
  flags.add_int("moe-dense-tp-size", 0, "SGLang's dense-FFN TP size under DP attention: only 1, as SGLang (no effect)");
  flags.add_int("eplb-rebalance-num-iterations", 1000, "with --enable-eplb (no effect)");
  flags.add_int("ep-num-redundant-experts", 0, "with --enable-eplb: only 0 (no redundant experts here)");
  flags.add_string("init-expert-location", "trivial", "only trivial (experts where --ep-size deals them)");
  flags.add_string("expert-distribution-recorder-mode", "",
                   "stat: count each layer's routed expert picks for the server's /start_, /stop_ and "
                   "/dump_expert_distribution_record (JSON under $SGLANG_EXPERT_DISTRIBUTION_RECORDER_DIR, else /tmp); "
                   "per_pass, per_token and stat_approx are not built");
  flags.add_int("expert-distribution-recorder-buffer-size", -1,
                "accepted as -1 only: stat mode keeps every step since the recording started");
  flags.add_int("nnodes", 1, "nodes of one server: 1 (multi-node serving is not built)");
  flags.add_int("node-rank", 0, "this node's rank: 0 with --nnodes 1");
  flags.add_string("dist-init-addr", "", "multi-node rendezvous: accepted with --nnodes 1 (no effect)");
  flags.add_int("dist-timeout", 0, "collectives' timeout in s (accepted; no effect in one process)");
}

// The DeepSeek deployment flags add_sglang_compat_flags declares after the speculative ones.
static Status check_sglang_deployment_flags(const Flags& flags) {
  if (flags.get_bool("enable-ep-moe"))
    return error("--enable-ep-moe is SGLang's deprecated spelling: give --ep-size N (= --tp-size N)");
  if (flags.get_bool("enable-deepep-moe"))
    return error("--enable-deepep-moe is SGLang's deprecated spelling: give --moe-a2a-backend deepep (with --ep-size = "
                 "--tp-size)");
  const std::string a2a = flags.get_string("moe-a2a-backend");
  if (a2a != "none" && flags.get_int("ep-size") != flags.get_int("tp-size"))
    return error("--moe-a2a-backend ", a2a, " needs --ep-size = --tp-size (as SGLang), got --ep-size ",
                 flags.get_int("ep-size"), " and --tp-size ", flags.get_int("tp-size"));
  if (const std::string m = flags.get_string("deepep-mode"); m != "auto" && m != "normal" && m != "low_latency")
    return error("--deepep-mode must be auto, normal or low_latency, got '", m, "'");
  if (const double t = flags.get_double("tbo-token-distribution-threshold"); !(t >= 0.0 && t <= 1.0))
    return error("--tbo-token-distribution-threshold must be in [0, 1], got ", t);
  if (flags.get_int("triton-attention-num-kv-splits") < 1)
    return error("--triton-attention-num-kv-splits must be positive, got ", flags.get_int("triton-attention-num-kv-splits"));
  if (flags.was_set("moe-dense-tp-size") && flags.get_int("moe-dense-tp-size") != 1)
    return error("--moe-dense-tp-size ", flags.get_int("moe-dense-tp-size"), ": only 1 is supported (as in SGLang)");
  if (flags.get_int("eplb-rebalance-num-iterations") < 1)
    return error("--eplb-rebalance-num-iterations must be positive, got ", flags.get_int("eplb-rebalance-num-iterations"));
  if (flags.get_int("ep-num-redundant-experts") != 0)
    return error("--ep-num-redundant-experts ", flags.get_int("ep-num-redundant-experts"), ": redundant experts are not "
                 "built (each routed expert lives on one rank)");
  if (flags.get_string("init-expert-location") != "trivial")
    return error("--init-expert-location '", flags.get_string("init-expert-location"), "': only trivial (experts where "
                 "--ep-size deals them; no expert-location files are read)");
  DS_RETURN_IF_ERROR(check_expert_recorder_flags(flags.get_string("expert-distribution-recorder-mode"),
                                                 flags.get_int("expert-distribution-recorder-buffer-size"),
                                                 flags.was_set("expert-distribution-recorder-buffer-size")));
  if (flags.get_int("nnodes") != 1)
    return error("--nnodes ", flags.get_int("nnodes"), ": multi-node serving is not built (one node, up to its GPUs)");
  if (flags.get_int("node-rank") != 0) return error("--node-rank must be 0 with --nnodes 1, got ", flags.get_int("node-rank"));
  if (flags.get_int("dist-timeout") < 0) return error("--dist-timeout must be >= 0, got ", flags.get_int("dist-timeout"));
  std::string no_effect;
  for (const char* name : {"nsa-prefill-backend", "nsa-decode-backend", "dsa-prefill-backend", "dsa-decode-backend",
                           "nsa-prefill", "nsa-decode", "fp8-gemm-backend", "moe-runner-backend",
                           "speculative-attention-mode", "speculative-moe-runner-backend", "speculative-moe-a2a-backend",
                           "nsa-prefill-cp-mode", "eplb-algorithm", "ep-dispatch-algorithm", "moe-a2a-backend",
                           "deepep-mode", "enable-two-batch-overlap", "enable-single-batch-overlap", "enable-dp-lm-head",
                           "enable-eplb", "enable-nsa-prefill-context-parallel", "enable-dsa-prefill-context-parallel",
                           "tbo-token-distribution-threshold", "triton-attention-num-kv-splits", "moe-dense-tp-size",
                           "eplb-rebalance-num-iterations", "dist-init-addr", "dist-timeout"})
    if (flags.was_set(name)) no_effect += std::string(no_effect.empty() ? "" : ", ") + "--" + name;
  if (!no_effect.empty())
    DS_INFO(no_effect, ": accepted for SGLang command lines; no effect here (dserve's own kernels and schedule)");
  return Status::ok();
}

Status check_sglang_feature_flags(const Flags& flags) {
  static const std::vector<std::string> kBackends = {"fa3", "fa4", "flashinfer", "triton", "flashmla", "cutlass_mla",
                                                     "trtllm_mla", "cutedsl_mla", "torch_native", "aiter", "nsa", "dsa"};
  for (const char* name : {"attention-backend", "prefill-attention-backend", "decode-attention-backend"}) {
    const std::string v = flags.get_string(name);
    if (v.empty()) continue;
    if (std::find(kBackends.begin(), kBackends.end(), v) == kBackends.end()) {
      std::string list;
      for (const std::string& b : kBackends) list += (list.empty() ? "" : ", ") + b;
      return error("--", name, " '", v, "' is not one of SGLang's attention backends (", list, ")");
    }
    DS_INFO("--", name, " ", v, ": accepted; dserve runs its own MLA kernels (absorbed decode, flash prefill)");
  }
  if (flags.get_bool("enable-dp-attention") && flags.get_int("dp-size") <= 1)
    return error("--enable-dp-attention needs --dp-size > 1 (= --tp-size): the attention's data-parallel ranks");
  const std::string algo = flags.get_string("speculative-algorithm");
  if (!algo.empty() && algo != "EAGLE" && algo != "EAGLE3" && algo != "NEXTN" && algo != "STANDALONE" &&
      algo != "NGRAM")
    return error("--speculative-algorithm must be EAGLE, EAGLE3, NEXTN, STANDALONE or NGRAM, got '", algo, "'");
  if (algo == "EAGLE3" || algo == "STANDALONE")
    return error("--speculative-algorithm ", algo, " is not built: dserve drafts with the checkpoint's own MTP "
                 "(NextN) layer, --speculative-algorithm EAGLE or NEXTN, or from the request's tokens, NGRAM");
  if (algo.empty() && (flags.get_int("speculative-num-steps") != 0 || flags.get_int("speculative-eagle-topk") != 0 ||
                       flags.get_int("speculative-num-draft-tokens") != 0 ||
                       !flags.get_string("speculative-draft-model-path").empty()))
    return error("--speculative-num-steps / -eagle-topk / -num-draft-tokens / -draft-model-path need "
                 "--speculative-algorithm");
  if (flags.get_int("torch-compile-max-bs") < 1)
    return error("--torch-compile-max-bs must be positive, got ", flags.get_int("torch-compile-max-bs"));
  DS_RETURN_IF_ERROR(check_sglang_deployment_flags(flags));
  if (flags.get_bool("enable-torch-compile"))
    DS_INFO("--enable-torch-compile: accepted; dserve's decode steps replay CUDA graphs instead");
  return Status::ok();
}

Result<SpeculativeSettings> speculative_from_flags(const Flags& flags, const std::string& model_path) {
  DS_RETURN_IF_ERROR(check_sglang_feature_flags(flags));
  SpeculativeSettings out;
  const std::string algo = flags.get_string("speculative-algorithm");
  const bool ngram_flags = flags.was_set("speculative-ngram-min-match-window-size") ||
                           flags.was_set("speculative-ngram-max-match-window-size");
  if (algo != "NGRAM" && ngram_flags)
    return error("--speculative-ngram-*-match-window-size need --speculative-algorithm NGRAM");
  if (algo.empty()) return out;
  out.ngram = algo == "NGRAM";
  out.algorithm = out.ngram ? "NGRAM" : "EAGLE";
  if (out.ngram) {
    const int64_t lo = flags.get_int("speculative-ngram-min-match-window-size");
    const int64_t hi = flags.get_int("speculative-ngram-max-match-window-size");
    if (lo < 1 || hi < lo || hi > 1024)
      return error("--speculative-ngram-min-match-window-size ", lo, " / --speculative-ngram-max-match-window-size ",
                   hi, ": need 1 <= min <= max <= 1024");
    out.ngram_options = NgramOptions{static_cast<int>(lo), static_cast<int>(hi)};
    if (!flags.get_string("speculative-draft-model-path").empty())
      return error("--speculative-draft-model-path: NGRAM drafts from each request's own tokens, with no draft model");
  }
  // NGRAM counts its drafts with --speculative-num-draft-tokens (the verified token included), as SGLang does.
  const bool by_tokens = out.ngram && flags.was_set("speculative-num-draft-tokens");
  const int64_t steps = by_tokens ? flags.get_int("speculative-num-draft-tokens") - 1
                        : flags.was_set("speculative-num-steps") ? flags.get_int("speculative-num-steps")
                                                                 : 3;
  if (by_tokens && (steps < 1 || steps > SchedulerConfig::kMaxSpeculativeSteps))
    return error("--speculative-num-draft-tokens must be in [2, ", SchedulerConfig::kMaxSpeculativeSteps + 1,
                 "] with NGRAM, got ", steps + 1);
  if (steps < 1 || steps > SchedulerConfig::kMaxSpeculativeSteps)
    return error("--speculative-num-steps must be in [1, ", SchedulerConfig::kMaxSpeculativeSteps, "], got ", steps);
  const int64_t topk = flags.was_set("speculative-eagle-topk") ? flags.get_int("speculative-eagle-topk") : 1;
  if (topk != 1)
    return error("--speculative-eagle-topk ", topk, ": tree drafts (topk > 1) are not built; dserve drafts one chain "
                 "(--speculative-eagle-topk 1)");
  if (!by_tokens && flags.was_set("speculative-num-draft-tokens") &&
      flags.get_int("speculative-num-draft-tokens") != steps + 1) {
    if (flags.get_int("speculative-num-draft-tokens") < 1)
      return error("--speculative-num-draft-tokens must be positive, got ", flags.get_int("speculative-num-draft-tokens"));
    DS_WARN("--speculative-num-draft-tokens ", flags.get_int("speculative-num-draft-tokens"), " set to ", steps + 1,
            ": with --speculative-eagle-topk 1 the draft tokens are num-steps + 1 (as SGLang)");
  }
  if (const std::string draft = flags.get_string("speculative-draft-model-path"); !draft.empty()) {
    std::error_code ec1, ec2;
    const auto a = std::filesystem::weakly_canonical(draft, ec1), b = std::filesystem::weakly_canonical(model_path, ec2);
    if (ec1 || ec2 || a != b)
      return error("--speculative-draft-model-path '", draft, "': dserve drafts with --model-path's own MTP (NextN) "
                   "layer; a separate draft checkpoint is not supported (leave the flag out or give the same path)");
  }
  out.steps = static_cast<int32_t>(steps);
  return out;
}

Status check_parallel_flags(const Flags& flags, bool tp_on_cpu) {
  const int64_t tp = flags.get_int("tp-size"), dp = flags.get_int("dp-size"), ep = flags.get_int("ep-size");
  if (flags.get_int("base-gpu-id") < 0 || flags.get_int("base-gpu-id") > 1023)
    return error("--base-gpu-id must be in [0, 1023], got ", flags.get_int("base-gpu-id"));
  if (flags.get_int("gpu-id-step") < 1 || flags.get_int("gpu-id-step") > 1023)
    return error("--gpu-id-step must be in [1, 1023], got ", flags.get_int("gpu-id-step"));
  if (tp_on_cpu) {  // serve: ranks as threads (CPU backends, or one GPU a rank)
    if (tp < 1 || tp > 64) return error("--tp-size must be in [1, 64], got ", tp);
    if (ep != 1 && ep != tp)
      return error("--ep-size ", ep, " must be 1 or --tp-size (", tp, "): the routed experts are dealt out over the "
                   "tensor-parallel ranks");
    if (dp != 1 && !(dp == tp && flags.get_bool("enable-dp-attention")))
      return error("--dp-size ", dp, ": data parallelism is built as SGLang's DP attention only "
                   "(--enable-dp-attention with --dp-size = --tp-size); replicated servers behind a router are not");
  }
  for (const char* name : {"tp-size", "dp-size", "pp-size", "ep-size"})
    if (const int64_t v = flags.get_int(name); v != 1 && !(tp_on_cpu && std::string(name) != "pp-size"))
      return error("--", name, " ", v, ": dserve runs on one GPU (1); multi-GPU serving (tensor, data, pipeline and "
                   "expert parallelism) is not built yet");
  return Status::ok();
}

Status apply_log_level_flag(const Flags& flags) {
  const std::string v = flags.get_string("log-level");
  if (v.empty()) return Status::ok();
  static const std::map<std::string, LogLevel> kLevels = {{"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
                                                          {"warning", LogLevel::kWarn}, {"warn", LogLevel::kWarn},
                                                          {"error", LogLevel::kError}, {"critical", LogLevel::kError}};
  const auto it = kLevels.find(v);
  if (it == kLevels.end()) return error("--log-level must be debug, info, warning, error or critical, got '", v, "'");
  set_log_level(it->second);
  return Status::ok();
}

Status check_chunked_prefill_flag(const Flags& flags) {
  if (const int64_t c = flags.get_int("chunked-prefill-size"); c != -1 && (c < 1 || c > (int64_t{1} << 30)))
    return error("--chunked-prefill-size must be a positive integer or -1 (no chunking), got ", c);
  return Status::ok();
}

Status check_mem_fraction_flag(const Flags& flags) {
  const double v = flags.get_double("mem-fraction-static");
  if (!(v == 0 || (v > 0 && v < 1)))
    return error("--mem-fraction-static must be a fraction in (0, 1) (0: SGLang's default from GPU memory), got ", v);
  return Status::ok();
}

std::string resolve_device(const std::string& device) {
  if (device != "auto") return device;
#ifdef DSERVE_WITH_CUDA
  if (check_cuda_device(0).is_ok()) return "cuda";
#endif
  return "cpu";
}

Result<ModelConfig> load_config_path(const std::string& path) {
  Result<ModelConfig> cfg = error("unreachable");
  if (std::filesystem::is_regular_file(path + "/config.json")) {
    cfg = load_model_config(path);
  } else if (std::ifstream g(path); g && std::filesystem::is_regular_file(path)) {
    std::stringstream text;
    text << g.rdbuf();
    cfg = parse_model_config(text.str());
  } else {
    return error("--model-path '", path, "' is neither a config.json file nor a directory with one");
  }
  if (!cfg) return error(path, ": ", cfg.status().message());
  return cfg;
}

Result<ModelSetup> setup_model(const Flags& flags) {
  DS_RETURN_IF_ERROR(check_parallel_flags(flags));
  DS_RETURN_IF_ERROR(apply_log_level_flag(flags));
  DS_RETURN_IF_ERROR(check_sglang_feature_flags(flags));
  if (!flags.get_string("speculative-algorithm").empty())
    return error("--speculative-algorithm: speculative decoding runs in `dserve serve`; this command decodes without "
                 "drafts");
  const std::string dir = flags.get_string("model-path");
  const std::string device = resolve_device(flags.get_string("device"));
  const std::string format = flags.get_string("load-format");
  if (dir.empty()) return error("--model-path is required");
  ModelSetup s;
  // With dummy weights a bare config.json file is enough (e.g. the real models' configs for benchmarks).
  if (format == "dummy" && std::filesystem::is_regular_file(dir)) {
    DS_ASSIGN_OR_RETURN(s.config, load_config_path(dir));
  } else {
    if (!std::filesystem::is_directory(dir)) return error("--model-path '", dir, "' is not a directory");
    DS_ASSIGN_OR_RETURN(s.config, load_model_config(dir));
  }
  // The CPU backend keeps fp32 copies of every weight: refuse up front what cannot fit in memory.
  if (device == "cpu") {
    const double need = estimate_parameters(s.config) * 6.0;  // fp32 prepared + bf16 source
    const double avail = available_host_memory();
    if (avail > 0 && need > avail)
      return error("the model has about ", static_cast<int64_t>(estimate_parameters(s.config) / 1e6),
                   "M parameters: the CPU backend needs about ", static_cast<int64_t>(need / (1 << 30)),
                   " GiB of memory, ", static_cast<int64_t>(avail / (1 << 30)), " GiB are available (use --device cuda)");
  }
  if (device == "cpu") {
    s.ops = make_cpu_ops();
  } else if (device == "cuda") {
#ifdef DSERVE_WITH_CUDA
    const int gpu = static_cast<int>(flags.get_int("base-gpu-id"));
    DS_RETURN_IF_ERROR(check_cuda_device(gpu));
    s.ops = make_cuda_ops(gpu);
#else
    return error("--device cuda: this build has no CUDA backend (CUDA toolkit not found at build time)");
#endif
  } else {
    return error("--device must be cpu or cuda, got '", device, "'");
  }
  // Set-up time is logged by phase for large models: on the device machine it is most of a benchmark process's
  // wall time.
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  Clock::time_point t0 = Clock::now();
  ModelWeights weights;
  if (format == "auto") {
    DS_ASSIGN_OR_RETURN(weights, load_weights(dir, s.config));
  } else if (format == "dummy") {
    weights = make_dummy_weights(dummy_weights_config(s.config, flags.get_string("quantization")),
                                 static_cast<uint64_t>(flags.get_int("seed")));
  } else {
    return error("--load-format must be auto or dummy, got '", format, "'");
  }
  const double t_load = since(t0);
  t0 = Clock::now();
  DS_RETURN_IF_ERROR(apply_quantization_flag(flags.get_string("quantization"), &weights, &s.config));
  const double t_quant = since(t0);
  DS_ASSIGN_OR_RETURN(s.kv_dtype, parse_kv_cache_dtype(flags.get_string("kv-cache-dtype")));
  t0 = Clock::now();
  s.model = std::make_unique<DeepseekModel>(s.config, weights, *s.ops,
                                            model_options(flags.get_bool("disable-shared-experts-fusion"),
                                                          flags.get_bool("disable-chunked-prefix-cache")));
  const double t_prep = since(t0);
  // A line for full-size models only (>= 1B parameters, decided by the config, not the clock): small ones keep
  // their output to what they were asked.
  if (estimate_parameters(s.config) >= 1e9)
    DS_INFO("weights: ", format == "dummy" ? "made" : "read", " in ", t_load, " s, quantized in ", t_quant,
            " s, prepared on the ", device, " backend in ", t_prep, " s");
  return s;
}

Result<std::vector<int32_t>> parse_token_ids(const std::string& text, int64_t vocab_size, const std::string& flag) {
  DS_ASSIGN_OR_RETURN(std::vector<int64_t> ids, parse_int_list(text, flag));
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size)
      return error(flag, ": token id ", ids[i], " at index ", i, " is outside the vocabulary [0, ", vocab_size, ")");
    out.push_back(static_cast<int32_t>(ids[i]));
  }
  return out;
}

Result<AttnMode> parse_attn_mode(const std::string& text) {
  if (text == "auto") return AttnMode::kAuto;
  if (text == "mha") return AttnMode::kMha;
  if (text == "absorbed") return AttnMode::kAbsorbed;
  return error("--attention-mode must be auto, mha or absorbed, got '", text, "'");
}

Result<SequenceSetup> setup_sequence(const Flags& flags) {
  if (flags.get_string("input-ids").empty()) return error("--input-ids is required");
  auto mode = parse_attn_mode(flags.get_string("attention-mode"));
  if (!mode) return mode.status();
  auto setup = setup_model(flags);
  if (!setup) return setup.status();
  auto ids = parse_token_ids(flags.get_string("input-ids"), setup->config.vocab_size, "--input-ids");
  if (!ids) return ids.status();
  return SequenceSetup{std::move(setup).value(), std::move(ids).value(), *mode};
}

}  // namespace ds
