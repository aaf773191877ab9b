// `dserve score`: teacher-forced log-probabilities of each input token given its prefix.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "app/model_setup.h"
#include "runner/sequence_runner.h"

namespace ds {

int run_score(int argc, char** argv) {
  Flags flags;
  add_model_flags(flags);
  flags.add_string("input-ids", "", "comma-separated token ids to score");
  flags.add_int("top-logprobs", 0, "also report the K most likely tokens at every position");
  flags.add_int("chunk-size", 0, "prefill in chunks of this many tokens (0 = one step)");
  flags.add_bool("help", "show flags");
  if (Status st = flags.parse(argc, argv); !st) {
    std::fprintf(stderr, "dserve score: %s\n", st.message().c_str());
    return 1;
  }
  if (flags.get_bool("help")) {
    std::printf("%s", flags.usage("score").c_str());
    return 0;
  }
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "dserve score: %s\n", st.message().c_str());
    return 1;
  };
  const int64_t top_k = flags.get_int("top-logprobs");
  if (top_k < 0) return fail(error("--top-logprobs must be >= 0"));
  if (flags.get_int("chunk-size") < 0) return fail(error("--chunk-size must be >= 0"));
  auto seq = setup_sequence(flags);
  if (!seq) return fail(seq.status());
  const std::vector<int32_t>& ids = seq->ids;

  SequenceRunner runner(*seq->model.model, *seq->model.ops, 64, seq->model.kv_dtype);
  ScoreResult r = runner.score(ids, static_cast<int>(top_k), seq->mode, static_cast<int>(flags.get_int("chunk-size")));

  nlohmann::json lps = nlohmann::json::array(), tops = nlohmann::json::array();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i == 0) {
      lps.push_back(nullptr);
      tops.push_back(nullptr);
      continue;
    }
    lps.push_back(r.token_logprobs[i]);
    nlohmann::json t = nlohmann::json::array();
    for (auto& [lp, id] : r.top_logprobs[i]) t.push_back({lp, id});
    tops.push_back(t);
  }
  if (flags.get_bool("json")) {
    nlohmann::json out = {{"input_token_logprobs", lps}};
    if (top_k > 0) out["input_top_logprobs"] = tops;
    std::cout << out.dump() << std::endl;
  } else {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i == 0) std::printf("%6zu %8d            -\n", i, ids[i]);
      else std::printf("%6zu %8d %12.6f\n", i, ids[i], r.token_logprobs[i]);
    }
  }
  return 0;
}

}  // namespace ds
