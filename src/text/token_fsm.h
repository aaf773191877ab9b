// Constrained decoding over a tokenizer's vocabulary: VocabTrie (every token's bytes in a trie) and TokenFsm (a
// ByteDfa read token by token: which tokens each automaton state allows - those whose bytes keep the text a prefix
// of the language - and where each leads). A TokenFsm is shared by every request with the same pattern; the
// allowed sets are made when a state is first reached and kept.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/regex_dfa.h"

namespace ds {

class Tokenizer;

class VocabTrie {
 public:
  // bytes[id]: the token's bytes; empty for ids a constraint never allows (special and added tokens, ids past the
  // tokenizer's vocabulary).
  explicit VocabTrie(std::vector<std::string> bytes);
  // The tokenizer's model vocabulary over `num_ids` ids (the model's logits columns); added tokens are left out
  // except those whose content is in `added` (spelled by their content: tool-call markers for tool_choice).
  static std::shared_ptr<const VocabTrie> from_tokenizer(const Tokenizer& tok, int32_t num_ids,
                                                         const std::vector<std::string>& added = {});

  int32_t num_ids() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[static_cast<size_t>(id)]; }

  struct Node {
    int32_t first_child = -1, next_sibling = -1;
    uint8_t byte = 0;
    int32_t ids_begin = 0, ids_end = 0;  // [begin, end) in ids(): the tokens whose bytes end here
  };
  const std::vector<Node>& nodes() const { return nodes_; }  // nodes()[0]: the root (no byte)
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
  std::vector<int32_t> ids_;
};

class TokenFsm {
 public:
  TokenFsm(ByteDfa dfa, std::shared_ptr<const VocabTrie> vocab);

  int start() const { return dfa_.start(); }
  // The tokens allowed from state s: bit id of the result (ids past the vocabulary's are never allowed).
  const std::vector<uint64_t>& allowed(int s) const;
  static bool test(const std::vector<uint64_t>& bits, int32_t id) {
    return id >= 0 && static_cast<size_t>(id >> 6) < bits.size() && ((bits[static_cast<size_t>(id >> 6)] >> (id & 63)) & 1);
  }
  // The state after token `id` from s: ByteDfa::kDead when s does not allow it.
  int advance(int s, int32_t id) const;
  // The text so far is a whole match (end of sequence allowed) / and nothing can follow it.
  bool accepting(int s) const { return s != ByteDfa::kDead && dfa_.accepting(s); }
  bool complete(int s) const { return s == ByteDfa::kDead || (dfa_.accepting(s) && !dfa_.has_next(s)); }
  int32_t num_ids() const { return vocab_->num_ids(); }

 private:
  ByteDfa dfa_;
  std::shared_ptr<const VocabTrie> vocab_;
  mutable std::mutex mu_;
  mutable std::unordered_map<int, std::unique_ptr<std::vector<uint64_t>>> allowed_;  // by state (never erased)
};

}  // namespace ds
