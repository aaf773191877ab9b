// Compiling and keeping constraints (grammar_cache.h).
#include "http/grammar_cache.h"

#include <optional>

#include <nlohmann/json.hpp>

#include "http/api_request.h"
#include "text/ebnf_regex.h"
#include "text/json_schema_regex.h"
#include "text/regex_dfa.h"
#include "text/structural_tag.h"

namespace ds {

const std::vector<std::string> kToolMarkers = {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
                                               "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"};

std::shared_ptr<const TokenFsm> GrammarCache::peek(const std::string& kind, const std::string& text) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key(kind, text));
  if (it == map_.end()) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.second);
  return it->second.first;
}

Result<std::shared_ptr<const TokenFsm>> GrammarCache::get(const std::string& kind, const std::string& text) {
  const std::string key = GrammarCache::key(kind, text);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = map_.find(key); it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second.second);
      return it->second.first;
    }
  }
  std::string pattern = text;
  std::optional<ByteDfa> made;  // kinds built as an automaton directly
  bool markers = kind == "tool_regex";  // the vocabulary spells the tool-call marker tokens
  if ((kind == "structural_tag" || kind == "json_schema") && json_nests_deeper(text))
    return error(kind, " nests deeper than ", kMaxJsonDepth, " levels");
  if (kind == "structural_tag") {
    nlohmann::ordered_json spec;
    try {
      spec = nlohmann::ordered_json::parse(text);
    } catch (const std::exception& e) {
      return error("structural_tag is not valid JSON: ", e.what());
    }
    DS_ASSIGN_OR_RETURN(ByteDfa dfa, structural_tag_dfa(spec));
    made = std::move(dfa);
    for (const std::string& m : kToolMarkers) markers = markers || text.find(m) != std::string::npos;
  } else if (kind == "json_schema") {
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(text);
    } catch (const std::exception& e) {
      return error("json_schema is not valid JSON: ", e.what());
    }
    DS_ASSIGN_OR_RETURN(pattern, json_schema_to_regex(schema));
  } else if (kind == "ebnf") {
    DS_ASSIGN_OR_RETURN(pattern, ebnf_to_regex(text));
  } else if (kind != "regex" && kind != "tool_regex") {
    return error("unknown constraint kind '", kind, "'");
  }
  if (!made) {
    DS_ASSIGN_OR_RETURN(ByteDfa dfa, ByteDfa::compile(pattern));
    made = std::move(dfa);
  }
  ByteDfa dfa = std::move(*made);
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<const VocabTrie>& vocab = markers ? tool_vocab_ : vocab_;
  if (!vocab) vocab = VocabTrie::from_tokenizer(tok_, num_ids_, markers ? kToolMarkers : std::vector<std::string>{});
  auto fsm = std::make_shared<const TokenFsm>(std::move(dfa), vocab);
  if (auto it = map_.find(key); it != map_.end()) return it->second.first;  // compiled meanwhile
  lru_.push_front(key);
  map_.emplace(key, std::make_pair(fsm, lru_.begin()));
  while (map_.size() > capacity_) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
  return std::shared_ptr<const TokenFsm>(fsm);
}

}  // namespace ds
