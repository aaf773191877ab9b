// Streaming detokenizer: turns generated ids into text one token at a time. It never emits part of
// a UTF-8 character (incomplete byte sequences are held back until completed; finish() turns what
// is left into U+FFFD), drops special tokens when asked, can put spaces around added tokens
// (transformers' spaces_between_special_tokens), and finds stop strings that span tokens by holding
// back any text that could still become the start of a stop string.
// With default options the concatenated output equals Tokenizer::decode of all the ids.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace ds {

struct DetokenizerOptions {
  bool skip_special_tokens = true;
  // Like transformers' slow decode: added tokens and the text runs between them joined by " ".
  bool spaces_between_special_tokens = false;
  // The output stops before the earliest occurrence of any of these (ties: the first listed).
  std::vector<std::string> stop;
};

class Detokenizer {
 public:
  // `tokenizer` must outlive the detokenizer.
  Detokenizer(const Tokenizer& tokenizer, DetokenizerOptions options);

  // Feeds one id; returns the text that became final. Unknown ids contribute nothing. After a stop
  // string was found, further calls return "".
  std::string push(int32_t id);
  std::string push(const std::vector<int32_t>& ids);
  // End of generation: flushes held-back bytes (as U+FFFD) and held-back text.
  std::string finish();

  bool stopped() const { return stop_index_ >= 0; }
  int stop_index() const { return stop_index_; }  // index into options.stop, or -1
  const std::string& stop_string() const;
  // Everything emitted so far.
  const std::string& text() const { return emitted_; }

 private:
  std::string take_text(std::string piece, bool final);
  const Tokenizer& tok_;
  DetokenizerOptions opt_;
  std::string pending_bytes_;  // decoded bytes not yet turned into text (an incomplete character)
  std::string held_text_;      // text that may be the start of a stop string
  std::string emitted_;
  bool any_sub_text_ = false;  // spaces_between_special_tokens: something was produced before
  bool in_text_run_ = false;
  int stop_index_ = -1;
};

}  // namespace ds
