// Model loading for CLI commands (see model_setup.h).
#include "app/model_setup.h"

#include <filesystem>

#include "core/logging.h"

namespace ds {

void add_model_flags(Flags& flags) {
  flags.add_string("model-path", "", "Hugging Face checkpoint directory (config.json + *.safetensors)");
  flags.add_string("device", "cpu", "cpu or cuda");
  flags.add_string("load-format", "auto", "auto (safetensors) or dummy (seeded random weights from config.json)");
  flags.add_int("seed", 0, "random seed for --load-format dummy and sampling");
  flags.add_string("attention-mode", "auto", "MLA form: auto, mha (expand latents) or absorbed (MQA over the cache)");
  flags.add_bool("json", "print JSON");
}

Result<ModelSetup> setup_model(const Flags& flags) {
  const std::string dir = flags.get_string("model-path");
  if (dir.empty()) return error("--model-path is required");
  if (!std::filesystem::is_directory(dir)) return error("--model-path '", dir, "' is not a directory");
  ModelSetup s;
  DS_ASSIGN_OR_RETURN(s.config, load_model_config(dir));
  const std::string device = flags.get_string("device");
  if (device == "cpu") {
    s.ops = make_cpu_ops();
  } else if (device == "cuda") {
    return error("--device cuda: the CUDA backend is not available yet in this build");
  } else {
    return error("--device must be cpu or cuda, got '", device, "'");
  }
  const std::string format = flags.get_string("load-format");
  ModelWeights weights;
  if (format == "auto") {
    DS_ASSIGN_OR_RETURN(weights, load_weights(dir, s.config));
  } else if (format == "dummy") {
    weights = make_dummy_weights(s.config, static_cast<uint64_t>(flags.get_int("seed")));
  } else {
    return error("--load-format must be auto or dummy, got '", format, "'");
  }
  s.model = std::make_unique<DeepseekModel>(s.config, weights, *s.ops);
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

}  // namespace ds
