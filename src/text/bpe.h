// Byte-pair-encoding model of Hugging Face tokenizer.json ("type": "BPE"): vocabulary, ranked merges
// (either "a b" strings or ["a", "b"] pairs) and the merge loop of the Rust crate (a min-heap on
// (rank, position) over a linked list of symbols, so long words cost O(n log n)).
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace ds {

// Largest token id a tokenizer.json may use (DeepSeek vocabularies have ~130K, the largest common ones ~260K;
// ids index dense tables, so a hostile id must not size them to gigabytes).
inline constexpr int64_t kMaxTokenId = (int64_t{1} << 21) - 1;

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  // From the "model" value of tokenizer.json.
  static Result<BpeModel> from_json(const nlohmann::json& j);

  // Appends the ids of one pre-token whose characters are vocabulary symbols (for byte-level
  // tokenizers: the piece already mapped to the byte alphabet).
  void tokenize(std::string_view word, std::vector<int32_t>* out) const;
  // Same for raw bytes of a byte-level tokenizer: symbol i is the alphabet character of byte i,
  // preceded by the character of ' ' when `prefix_space`. Needs has_byte_symbols().
  void tokenize_bytes(std::string_view bytes, bool prefix_space, std::vector<int32_t>* out) const;
  bool has_byte_symbols() const { return has_byte_symbols_; }

  int32_t token_to_id(std::string_view token) const;  // -1 when absent
  const std::string* id_to_token(int32_t id) const;   // nullptr when absent
  const TokenMap& vocab() const { return vocab_; }
  int32_t max_id() const { return static_cast<int32_t>(id_to_token_.size()) - 1; }
  size_t num_merges() const { return merges_.size(); }

 private:
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    int32_t len;  // 0 once merged into its left neighbour
  };
  void merge_symbols(std::vector<Symbol>* symbols, std::vector<int32_t>* out) const;
  const std::pair<int32_t, int32_t>* find_merge(int32_t a, int32_t b) const;

  TokenMap vocab_;
  std::vector<std::string> id_to_token_;
  // (left id << 32 | right id) -> (rank, merged id)
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  std::array<int32_t, 256> byte_symbol_{};  // id of each byte's alphabet character
  bool has_byte_symbols_ = false;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_fallback_id_{};  // id of "<0xAB>" tokens
};

}  // namespace ds
