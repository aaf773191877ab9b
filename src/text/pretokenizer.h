// Hugging Face pre-tokenizers over UTF-8 text: Split (regex or literal pattern, all five delimiter
// behaviours, invert), ByteLevel (GPT-2 regex optional, add_prefix_space) and Sequence. Regexes run
// on PCRE2 in UTF + UCP mode (JIT when available) with Oniguruma-compatible Unicode classes.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace ds {

// A pre-token: the bytes text[begin, end), preceded by one space when `prefix_space` (added by a
// ByteLevel step with add_prefix_space).
struct Piece {
  uint32_t begin = 0;
  uint32_t end = 0;
  bool prefix_space = false;
};

// A compiled PCRE2 pattern. Thread-safe: matching uses per-thread match data.
class Regex {
 public:
  // `pattern` is in the syntax of tokenizer.json (Oniguruma); it is adapted where PCRE2 differs.
  static Result<std::shared_ptr<const Regex>> compile(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [start, end) byte ranges of the non-empty, non-overlapping matches in `subject`
  // (which must be valid UTF-8), leftmost first, like Oniguruma's find_iter.
  Status find_all(std::string_view subject, std::vector<std::pair<uint32_t, uint32_t>>* out) const;
  const std::string& pattern() const { return pattern_; }

 private:
  Regex() = default;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code*
};

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// One step of a pre-tokenizer pipeline.
struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel } kind = Kind::kSplit;
  // kSplit: either a regex or a literal string.
  std::shared_ptr<const Regex> regex;
  std::string literal;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel
  bool add_prefix_space = false;
  bool use_regex = true;
};

class PreTokenizer {
 public:
  // From the "pre_tokenizer" value of tokenizer.json (null gives a pre-tokenizer that keeps the
  // whole text as one piece). Unsupported types are errors naming the type.
  static Result<PreTokenizer> from_json(const nlohmann::json& j);

  // Splits `text` (valid UTF-8) into pieces, appended to `out` in order. Empty pieces are dropped.
  Status split(std::string_view text, std::vector<Piece>* out) const;

  // Whether a ByteLevel step ran: pieces must then be mapped to the byte alphabet before the model.
  bool byte_level() const { return byte_level_; }
  const std::vector<PreTokenizerStep>& steps() const { return steps_; }

 private:
  Status add_from_json(const nlohmann::json& j);
  std::vector<PreTokenizerStep> steps_;
  bool byte_level_ = false;
};

}  // namespace ds
