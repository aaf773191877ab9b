// Hugging Face tokenizer.json tokenizer (byte-level BPE, e.g. DeepSeek V2/V3): added tokens matched
// in the raw text first, then pre-tokenizer, BPE model, post-processor; decoding through the
// ByteLevel decoder with Rust-compatible U+FFFD replacement. tokenizer_config.json's
// add_bos_token/add_eos_token are applied the way transformers' wrapper does (they replace the
// post-processor). Results equal the Rust `tokenizers` crate (tests/data/tokenizer_golden.json).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace ds {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

class Tokenizer {
 public:
  // Loads DIR/tokenizer.json and, when present, DIR/tokenizer_config.json.
  static Result<Tokenizer> load(const std::string& dir);
  // From file contents (config_json may be empty). `origin` names the source in error messages.
  static Result<Tokenizer> from_json_text(std::string_view tokenizer_json, std::string_view config_json,
                                          const std::string& origin = "tokenizer.json");

  // Encodes UTF-8 text (an error for ill-formed UTF-8). add_special_tokens applies the
  // post-processor (e.g. prepends BOS for DeepSeek-V3, whose config has add_bos_token: true).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens) const;
  // Decodes ids; ids that are not in the vocabulary are ignored, like the Rust crate does.
  // skip_special_tokens drops added tokens marked special (not the non-special added tokens).
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens) const;

  // One more than the largest id of the vocabulary and the added tokens.
  int32_t vocab_size() const;
  bool has_id(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Token string of `id` (added token content or model vocabulary entry); nullptr when absent.
  const std::string* id_to_token(int32_t id) const;
  // Whether `id` is an added token (matched atomically) / an added token marked special.
  bool is_added(int32_t id) const;
  bool is_special(int32_t id) const;
  // The bytes the decoder produces for `id` alone (before UTF-8 repair); empty when absent.
  const std::string& token_bytes(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const;

  // Special tokens named by tokenizer_config.json (nullopt when not configured).
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;

  // Size limit of the per-tokenizer cache of pre-token -> ids (0 disables it; default 65536).
  void set_cache_capacity(size_t entries);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace ds
