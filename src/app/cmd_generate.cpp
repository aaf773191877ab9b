// `dserve generate`: continuation of a token sequence through prefill-then-decode over the latent cache.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/model_setup.h"
#include "runner/sequence_runner.h"

namespace ds {

int run_generate(int argc, char** argv) {
  Flags flags;
  add_model_flags(flags);
  flags.add_string("input-ids", "", "comma-separated prompt token ids");
  flags.add_int("max-new-tokens", 16, "number of tokens to generate");
  flags.add_double("temperature", 0.0, "0 = greedy");
  flags.add_int("top-k", -1, "sample among the K most likely tokens (-1 = off)");
  flags.add_double("top-p", 1.0, "nucleus sampling threshold");
  flags.add_double("min-p", 0.0, "drop tokens below min-p times the top probability");
  flags.add_bool("ignore-eos", "do not stop at the end-of-sequence token");
  flags.add_bool("disable-cuda-graph", "decode eagerly instead of replaying a CUDA graph (--device cuda)");
  flags.add_int("cuda-graph-max-bs", 0, "largest CUDA-graph batch (generate runs one sequence: 0 turns graphs off)");
  flags.add_bool("help", "show flags");
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "dserve generate: %s\n", st.message().c_str());
    return 1;
  };
  if (Status st = flags.parse(argc, argv); !st) return fail(st);
  if (flags.get_bool("help")) {
    std::printf("%s", flags.usage("generate").c_str());
    return 0;
  }
  GenerateOptions opts;
  const int64_t max_new = flags.get_int("max-new-tokens");
  if (max_new < 1 || max_new > 1'000'000) return fail(error("--max-new-tokens must be in [1, 1000000], got ", max_new));
  opts.max_new_tokens = static_cast<int>(max_new);
  opts.sampling.temperature = static_cast<float>(flags.get_double("temperature"));
  opts.sampling.top_k = static_cast<int>(flags.get_int("top-k"));
  opts.sampling.top_p = static_cast<float>(flags.get_double("top-p"));
  opts.sampling.min_p = static_cast<float>(flags.get_double("min-p"));
  opts.sampling.seed = static_cast<uint64_t>(flags.get_int("seed"));
  opts.sampling.ignore_eos = flags.get_bool("ignore-eos");
  if (!(opts.sampling.temperature >= 0)) return fail(error("--temperature must be >= 0"));
  if (!(opts.sampling.top_p > 0 && opts.sampling.top_p <= 1)) return fail(error("--top-p must be in (0, 1]"));
  if (!(opts.sampling.min_p >= 0 && opts.sampling.min_p <= 1)) return fail(error("--min-p must be in [0, 1]"));
  if (opts.sampling.top_k == 0 || opts.sampling.top_k < -1) return fail(error("--top-k must be -1 or >= 1"));
  auto seq = setup_sequence(flags);
  if (!seq) return fail(seq.status());
  const std::vector<int32_t>& ids = seq->ids;

  SequenceRunner runner(*seq->model.model, *seq->model.ops, 64, seq->model.kv_dtype);
  if (flags.get_int("cuda-graph-max-bs") < 0) return fail(error("--cuda-graph-max-bs must be >= 0"));
  const bool graph_flag_zero = flags.was_set("cuda-graph-max-bs") && flags.get_int("cuda-graph-max-bs") == 0;
  runner.set_use_cuda_graphs(!flags.get_bool("disable-cuda-graph") && !graph_flag_zero);
  GenerateResult r = runner.generate(ids, opts, seq->mode);
  if (flags.get_bool("json")) {
    nlohmann::json out = {{"output_ids", r.output_ids},
                          {"output_token_logprobs", r.output_logprobs},
                          {"finish_reason", r.finish_reason}};
    std::cout << out.dump() << std::endl;
  } else {
    for (size_t i = 0; i < r.output_ids.size(); ++i) std::printf("%s%d", i ? "," : "", r.output_ids[i]);
    std::printf("\n");
  }
  return 0;
}

}  // namespace ds
