// GrammarCache: the server's compiled constraints (regex / JSON schema -> TokenFsm over the tokenizer's vocabulary),
// kept by their text so that repeated requests (and n > 1 samples) compile once. The vocabulary trie is made on the
// first constrained request.
#pragma once
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/status.h"
#include "text/token_fsm.h"

namespace ds {

class Tokenizer;

// DeepSeek's tool-call markers (added tokens, allowed only by tool_choice constraints).
extern const std::vector<std::string> kToolMarkers;

class GrammarCache {
 public:
  // num_ids: the model's logits columns (token ids past the tokenizer's are never allowed).
  GrammarCache(const Tokenizer& tok, int32_t num_ids, size_t capacity = 64) : tok_(tok), num_ids_(num_ids), capacity_(capacity) {}
  // kind "regex" (the pattern), "json_schema" (the schema's JSON text), "ebnf" (a grammar), "structural_tag" (its JSON
  // spec; with the marker-spelling vocabulary when it names a tool-call marker) or "tool_regex" (a pattern over the
  // vocabulary with the tool-call marker tokens, kToolMarkers, spelled by their content); an error names what is
  // wrong with it.
  Result<std::shared_ptr<const TokenFsm>> get(const std::string& kind, const std::string& text);
  // What a constraint is kept by (and what identifies one compile in flight).
  static std::string key(const std::string& kind, const std::string& text) { return kind + '\n' + text; }
  // The compiled constraint when it is kept, else null (never compiles: the server compiles off its I/O threads).
  std::shared_ptr<const TokenFsm> peek(const std::string& kind, const std::string& text);

 private:
  const Tokenizer& tok_;
  const int32_t num_ids_;
  const size_t capacity_;
  std::mutex mu_;
  std::shared_ptr<const VocabTrie> vocab_, tool_vocab_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const TokenFsm>, std::list<std::string>::iterator>> map_;
};

}  // namespace ds
