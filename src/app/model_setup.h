// Shared by the CLI commands that run the model: the --model-path/--device/--load-format flags, loading
// the checkpoint, and constructing the backend and the model.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "app/flags.h"
#include "model/deepseek_model.h"
#include "runner/ngram_drafter.h"

namespace ds {

void add_model_flags(Flags& flags);

// SGLang's command-line spellings that every model command takes (add_model_flags and serve call it after declaring
// --model-path and --seed): --model (--model-path), --random-seed (--seed), --trust-remote-code (accepted; dserve runs
// no checkpoint code), and the parallel sizes --tp-size / --tp / --tensor-parallel-size, --dp-size / --dp /
// --data-parallel-size, --pp-size / --pipeline-parallel-size, --ep-size / --ep / --expert-parallel-size (default 1).
void add_sglang_compat_flags(Flags& flags);
// The parallel sizes and --base-gpu-id / --gpu-id-step: 1 is one rank (what the one-shot commands run); anything
// else is refused with the flag named. tp_on_cpu (serve): --tp-size up to 64 passes (ranks as threads: CPU
// backends, or one GPU a rank over NCCL), with --ep-size 1 or = --tp-size and DP attention's --dp-size = --tp-size.
Status check_parallel_flags(const Flags& flags, bool tp_on_cpu = false);
// SGLang's feature flags add_sglang_compat_flags declares: --attention-backend and its prefill / decode forms
// (SGLang's names accepted and logged, dserve's own MLA kernels run; other names refused), --enable-torch-compile
// (accepted: CUDA graphs), and what is not built yet, refused with the flag named: --enable-dp-attention, the
// speculative algorithms other than EAGLE / NEXTN (an unknown name is refused as such), --speculative-* without an
// algorithm.
Status check_sglang_feature_flags(const Flags& flags);
// What the --speculative-* flags ask for: the draft tokens a step verifies (0: no --speculative-algorithm), SGLang's
// DeepSeek defaults (3 steps, topk 1, steps + 1 draft tokens), drafted by the MTP layer (EAGLE / NEXTN) or from each
// request's tokens (NGRAM: --speculative-num-draft-tokens - 1 drafts when given, its match windows from the
// --speculative-ngram-* flags); topk > 1 (tree drafts) and a draft checkpoint other than model_path are refused.
struct SpeculativeSettings {
  int32_t steps = 0;
  bool ngram = false;
  NgramOptions ngram_options;
  std::string algorithm;  // as server_args reports it: EAGLE (NEXTN is EAGLE) or NGRAM; empty when off
};
Result<SpeculativeSettings> speculative_from_flags(const Flags& flags, const std::string& model_path);
// --log-level (SGLang's names: debug, info, warning, error, critical; empty: DSERVE_LOG, else info) set as the
// process's log level; an unknown name is refused.
Status apply_log_level_flag(const Flags& flags);
// --chunked-prefill-size: tokens in [1, 2^30], or -1 (SGLang's "no chunking").
Status check_chunked_prefill_flag(const Flags& flags);
// --mem-fraction-static: 0 (SGLang's default from GPU memory) or a fraction in (0, 1); NaN and the rest refused.
Status check_mem_fraction_flag(const Flags& flags);

// --device auto -> "cuda" when this build has the CUDA backend and GPU 0 is usable, else "cpu"; other
// values pass through (validated where the backend is made).
std::string resolve_device(const std::string& device);

struct ModelSetup {
  ModelConfig config;
  std::unique_ptr<Ops> ops;
  std::unique_ptr<DeepseekModel> model;
  KvCacheDtype kv_dtype = KvCacheDtype::kAuto;
};

Result<ModelSetup> setup_model(const Flags& flags);

// Validates token ids against the vocabulary; error names the first bad id and its index.
Result<std::vector<int32_t>> parse_token_ids(const std::string& text, int64_t vocab_size, const std::string& flag);

// Rough parameter count of the main model (embedding, head, attention, FFN/experts) from the config.
double estimate_parameters(const ModelConfig& c);

// The config of --model-path given as a config.json file or a checkpoint directory with one (the tuning
// commands); the error names the path.
Result<ModelConfig> load_config_path(const std::string& path);

// AttnMode from --attention-mode auto|mha|absorbed.
Result<AttnMode> parse_attn_mode(const std::string& text);

// What `generate` and `score` run: the model, --input-ids (required, checked against its vocabulary) and
// --attention-mode.
struct SequenceSetup {
  ModelSetup model;
  std::vector<int32_t> ids;
  AttnMode mode = AttnMode::kAuto;
};
Result<SequenceSetup> setup_sequence(const Flags& flags);

}  // namespace ds
