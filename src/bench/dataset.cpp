// bench-serving datasets (see dataset.h).
#include "bench/dataset.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace ds::bench {

namespace {

int64_t uniform(int64_t lo, int64_t hi, std::mt19937_64& rng) {  // inclusive
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

Status need_tokenizer(const std::string& what) {
  return error(what, " needs --tokenizer (a directory with tokenizer.json) to count and decode tokens");
}

// Ids a random prompt may use: in the vocabulary, not added/special tokens (which would put BOS/EOS or
// chat markers into the middle of a prompt).
std::vector<int32_t> plain_vocab(const Tokenizer& tok) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (tok.has_id(id) && !tok.is_added(id)) ids.push_back(id);
  return ids;
}

std::string random_text(const Tokenizer& tok, const std::vector<int32_t>& vocab, int64_t n, std::mt19937_64& rng) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = vocab[static_cast<size_t>(uniform(0, static_cast<int64_t>(vocab.size()) - 1, rng))];
  return tok.decode(ids, false);
}

std::string sum_note(const char* label, const std::vector<DatasetRow>& rows, bool input) {
  int64_t total = 0;
  for (const auto& r : rows) total += input ? r.prompt_len : r.output_len;
  return std::string(label) + std::to_string(total);
}

struct Conversation {
  std::string prompt, completion;
};

Result<std::vector<Conversation>> load_sharegpt(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error("--dataset-path ", path, ": cannot open the file");
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return error("--dataset-path ", path, ": not valid JSON");
  if (!j.is_array()) return error("--dataset-path ", path, ": expected a JSON list of {\"conversations\": [...]}");
  std::vector<Conversation> out;
  for (const auto& item : j) {
    if (!item.is_object()) continue;
    auto it = item.find("conversations");
    if (it == item.end()) it = item.find("conversation");
    if (it == item.end() || !it->is_array() || it->size() < 2) continue;  // fewer than two turns
    const auto& a = (*it)[0];
    const auto& b = (*it)[1];
    if (!a.is_object() || !b.is_object() || !a.contains("value") || !b.contains("value") || !a["value"].is_string() ||
        !b["value"].is_string())
      continue;
    out.push_back({a["value"].get<std::string>(), b["value"].get<std::string>()});
  }
  if (out.empty()) return error("--dataset-path ", path, ": no conversation with two turns of string values");
  return out;
}

Result<Dataset> make_random_ids(const DatasetOptions& o, const Tokenizer* tok, std::mt19937_64& rng) {
  int64_t vocab = o.random_ids_vocab_size;
  if (vocab <= 0) {
    if (!tok) return error("--dataset-name random-ids needs --tokenizer or --random-ids-vocab-size");
    // The base vocabulary (HF's tokenizer.vocab_size): ids below the first added token at the top.
    vocab = tok->vocab_size();
    while (vocab > 0 && tok->is_added(static_cast<int32_t>(vocab - 1))) --vocab;
  }
  if (o.need_text && !tok) return need_tokenizer("a chat backend with --dataset-name random-ids");
  Dataset d;
  const auto in_lens = sample_lengths(o.random_input_len, o.random_range_ratio, o.num_prompts, rng);
  const auto out_lens = sample_lengths(o.random_output_len, o.random_range_ratio, o.num_prompts, rng);
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    DatasetRow r;
    const int64_t offset = uniform(0, vocab - 1, rng);
    for (int64_t j = 0; j < in_lens[static_cast<size_t>(i)]; ++j)
      r.ids.push_back(static_cast<int32_t>((offset + i + j) % vocab));
    r.use_ids = !o.need_text;
    if (o.need_text) r.text = tok->decode(r.ids, false);
    r.prompt_len = in_lens[static_cast<size_t>(i)];
    r.output_len = out_lens[static_cast<size_t>(i)];
    d.rows.push_back(std::move(r));
  }
  d.notes.push_back(sum_note("#Input tokens: ", d.rows, true));
  d.notes.push_back(sum_note("#Output tokens: ", d.rows, false));
  return d;
}

Result<Dataset> make_random(const DatasetOptions& o, const Tokenizer* tok, std::mt19937_64& rng) {
  if (!tok) return need_tokenizer("--dataset-name random");
  Dataset d;
  const auto in_lens = sample_lengths(o.random_input_len, o.random_range_ratio, o.num_prompts, rng);
  const auto out_lens = sample_lengths(o.random_output_len, o.random_range_ratio, o.num_prompts, rng);
  // With a ShareGPT file, prompts are its human turns' tokens truncated or repeated to length (SGLang);
  // without one, random ordinary tokens.
  std::vector<std::vector<int32_t>> sources;
  if (!o.path.empty()) {
    auto convs = load_sharegpt(o.path);
    if (!convs) return convs.status();
    std::shuffle(convs->begin(), convs->end(), rng);
    for (const auto& c : *convs) {
      if (static_cast<int64_t>(sources.size()) == o.num_prompts) break;
      auto ids = tok->encode(c.prompt, false);
      if (!ids || ids->empty()) continue;
      sources.push_back(std::move(*ids));
    }
    if (sources.empty()) return error("--dataset-path ", o.path, ": no prompt could be tokenized");
  }
  const std::vector<int32_t> vocab = sources.empty() ? plain_vocab(*tok) : std::vector<int32_t>{};
  if (sources.empty() && vocab.empty()) return error("--tokenizer has no ordinary tokens to draw prompts from");
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    DatasetRow r;
    const size_t n = static_cast<size_t>(in_lens[static_cast<size_t>(i)]);
    if (!sources.empty()) {
      const auto& src = sources[static_cast<size_t>(i) % sources.size()];
      for (size_t j = 0; j < n; ++j) r.ids.push_back(src[j % src.size()]);
    } else {
      for (size_t j = 0; j < n; ++j)
        r.ids.push_back(vocab[static_cast<size_t>(uniform(0, static_cast<int64_t>(vocab.size()) - 1, rng))]);
    }
    r.text = tok->decode(r.ids, false);
    r.use_ids = o.tokenize_prompt && !o.need_text;
    r.prompt_len = static_cast<int64_t>(n);
    r.output_len = out_lens[static_cast<size_t>(i)];
    d.rows.push_back(std::move(r));
  }
  d.notes.push_back(sum_note("#Input tokens: ", d.rows, true));
  d.notes.push_back(sum_note("#Output tokens: ", d.rows, false));
  return d;
}

Result<Dataset> make_gsp(const DatasetOptions& o, const Tokenizer* tok, std::mt19937_64& rng) {
  if (!tok) return need_tokenizer("--dataset-name generated-shared-prefix");
  if (o.gsp_num_groups <= 0 || o.gsp_prompts_per_group <= 0)
    return error("--gsp-num-groups and --gsp-prompts-per-group must be positive");
  const std::vector<int32_t> vocab = plain_vocab(*tok);
  if (vocab.empty()) return error("--tokenizer has no ordinary tokens to draw prompts from");
  std::vector<std::string> systems, questions;
  for (int64_t g = 0; g < o.gsp_num_groups; ++g) systems.push_back(random_text(*tok, vocab, o.gsp_system_prompt_len, rng));
  for (int64_t q = 0; q < o.gsp_num_groups * o.gsp_prompts_per_group; ++q)
    questions.push_back(random_text(*tok, vocab, o.gsp_question_len, rng));
  Dataset d;
  double sys_tokens = 0, q_tokens = 0;
  for (int64_t g = 0; g < o.gsp_num_groups; ++g) {
    for (int64_t p = 0; p < o.gsp_prompts_per_group; ++p) {
      DatasetRow r;
      r.text = systems[static_cast<size_t>(g)] + "\n\n" + questions[static_cast<size_t>(g * o.gsp_prompts_per_group + p)];
      auto ids = tok->encode(r.text, true);
      if (!ids) return ids.status();
      r.prompt_len = static_cast<int64_t>(ids->size());
      r.ids = std::move(*ids);
      r.use_ids = o.tokenize_prompt && !o.need_text;
      r.output_len = o.gsp_output_len;
      d.rows.push_back(std::move(r));
    }
  }
  for (const auto& s : systems) sys_tokens += static_cast<double>(tok->encode(s, true).value().size());
  for (const auto& q : questions) q_tokens += static_cast<double>(tok->encode(q, true).value().size());
  std::shuffle(d.rows.begin(), d.rows.end(), rng);
  char buf[128];
  d.notes.push_back("Generated shared prefix dataset statistics:");
  d.notes.push_back("Number of groups: " + std::to_string(o.gsp_num_groups));
  d.notes.push_back("Prompts per group: " + std::to_string(o.gsp_prompts_per_group));
  d.notes.push_back("Total prompts: " + std::to_string(d.rows.size()));
  d.notes.push_back(sum_note("Total input tokens: ", d.rows, true));
  d.notes.push_back(sum_note("Total output tokens: ", d.rows, false));
  std::snprintf(buf, sizeof(buf), "Average system prompt length: %.1f tokens", sys_tokens / static_cast<double>(systems.size()));
  d.notes.push_back(buf);
  std::snprintf(buf, sizeof(buf), "Average question length: %.1f tokens", q_tokens / static_cast<double>(questions.size()));
  d.notes.push_back(buf);
  return d;
}

Result<Dataset> make_sharegpt(const DatasetOptions& o, const Tokenizer* tok, std::mt19937_64& rng) {
  if (!tok) return need_tokenizer("--dataset-name sharegpt");
  if (o.path.empty())
    return error("--dataset-name sharegpt needs --dataset-path (a local ShareGPT JSON file; nothing is downloaded)");
  if (o.sharegpt_output_len && *o.sharegpt_output_len < 4) return error("--sharegpt-output-len must be at least 4");
  auto convs = load_sharegpt(o.path);
  if (!convs) return convs.status();
  std::shuffle(convs->begin(), convs->end(), rng);
  Dataset d;
  for (const auto& c : *convs) {
    if (static_cast<int64_t>(d.rows.size()) == o.num_prompts) break;
    auto prompt_ids = tok->encode(c.prompt, true);
    if (!prompt_ids) continue;  // not UTF-8
    int64_t output_len = 0;
    if (o.sharegpt_output_len) {
      output_len = *o.sharegpt_output_len;
    } else {
      auto completion_ids = tok->encode(c.completion, true);
      if (!completion_ids) continue;
      output_len = static_cast<int64_t>(completion_ids->size());
    }
    const int64_t prompt_len = static_cast<int64_t>(prompt_ids->size());
    if (prompt_len < 2 || output_len < 2) continue;  // too short
    if (o.sharegpt_context_len && prompt_len + output_len > *o.sharegpt_context_len) continue;  // too long
    DatasetRow r;
    r.text = c.prompt;
    r.ids = std::move(*prompt_ids);
    r.use_ids = o.tokenize_prompt && !o.need_text;
    r.prompt_len = prompt_len;
    r.output_len = output_len;
    d.rows.push_back(std::move(r));
  }
  if (d.rows.empty()) return error("--dataset-path ", o.path, ": no conversation passed the length filters");
  d.notes.push_back(sum_note("#Input tokens: ", d.rows, true));
  d.notes.push_back(sum_note("#Output tokens: ", d.rows, false));
  return d;
}

}  // namespace

std::vector<int64_t> sample_lengths(int64_t len, double ratio, int64_t n, std::mt19937_64& rng) {
  const int64_t lo = std::min(std::max<int64_t>(static_cast<int64_t>(static_cast<double>(len) * ratio), 1), len);
  std::vector<int64_t> out;
  for (int64_t i = 0; i < n; ++i) out.push_back(uniform(lo, len, rng));
  return out;
}

Result<Dataset> make_dataset(const DatasetOptions& o, const Tokenizer* tok, std::mt19937_64& rng) {
  if (o.num_prompts <= 0 && o.name != "generated-shared-prefix") return error("--num-prompts must be positive");
  if (o.name == "random" || o.name == "random-ids") {
    if (o.random_input_len <= 0) return error("--random-input-len must be positive");
    if (o.random_output_len <= 0) return error("--random-output-len must be positive");
    if (!(o.random_range_ratio >= 0 && o.random_range_ratio <= 1))  // NaN too
      return error("--random-range-ratio must be in [0, 1], got ", o.random_range_ratio);
    return o.name == "random" ? make_random(o, tok, rng) : make_random_ids(o, tok, rng);
  }
  if (o.name == "generated-shared-prefix") return make_gsp(o, tok, rng);
  if (o.name == "sharegpt") return make_sharegpt(o, tok, rng);
  return error("--dataset-name '", o.name, "' is not one of sharegpt, random, random-ids, generated-shared-prefix");
}

}  // namespace ds::bench
