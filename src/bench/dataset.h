// bench-serving datasets, as sglang.bench_serving builds them: random (text of a chosen token length),
// random-ids (token ids directly), generated-shared-prefix (groups of prompts sharing a system prompt) and
// sharegpt (a local ShareGPT JSON file). Text datasets need the model's tokenizer to count tokens.
#pragma once
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench/backend.h"
#include "core/status.h"
#include "text/tokenizer.h"

namespace ds::bench {

struct DatasetOptions {
  std::string name = "sharegpt";  // sharegpt | random | random-ids | generated-shared-prefix
  std::string path;               // --dataset-path (sharegpt; optional source texts for random)
  int64_t num_prompts = 1000;
  int64_t random_input_len = 1024;
  int64_t random_output_len = 1024;
  double random_range_ratio = 0.0;
  int64_t random_ids_vocab_size = 0;  // random-ids without a tokenizer: ids are drawn below this
  std::optional<int64_t> sharegpt_output_len;
  std::optional<int64_t> sharegpt_context_len;
  int64_t gsp_num_groups = 64;
  int64_t gsp_prompts_per_group = 16;
  int64_t gsp_system_prompt_len = 2048;
  int64_t gsp_question_len = 128;
  int64_t gsp_output_len = 256;
  bool tokenize_prompt = false;  // send token ids instead of text wherever the ids are known
  bool need_text = false;        // chat backends: every row must carry text
};

struct Dataset {
  std::vector<DatasetRow> rows;
  std::vector<std::string> notes;  // statistics lines SGLang prints while building the dataset
};

// Lengths uniform in [max(floor(len * ratio), 1), len], as SGLang draws them (SGLang lets an output length
// reach 0; a request for 0 tokens is refused by vLLM and measures nothing, so outputs start at 1 too).
std::vector<int64_t> sample_lengths(int64_t len, double ratio, int64_t n, std::mt19937_64& rng);

// `tok` may be null for random-ids (with random_ids_vocab_size). Errors name the flag or file at fault.
Result<Dataset> make_dataset(const DatasetOptions& options, const Tokenizer* tok, std::mt19937_64& rng);

}  // namespace ds::bench
