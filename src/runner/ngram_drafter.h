// NgramDrafter: the draft half of NGRAM speculative decoding (SGLang's --speculative-algorithm NGRAM, one chain):
// a sequence's drafts continue the most recent earlier occurrence of its longest recurring suffix (window sizes
// between the min and max match window) in its own tokens, prompt and output. No model runs; the target verifies as
// for MTP drafts. Each request keeps an index of its n-grams, extended as tokens arrive.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace ds {

struct NgramOptions {
  int min_window = 1;   // --speculative-ngram-min-match-window-size
  int max_window = 12;  // --speculative-ngram-max-match-window-size
};

class NgramDrafter {
 public:
  explicit NgramDrafter(NgramOptions o);
  // `count` drafts for request `rid` whose tokens so far are `tokens` (prompt and output, the newest last; a later
  // call for the same rid extends the earlier tokens). With no recurring suffix the newest token is repeated
  // (verification rejects what does not fit; a fixed count keeps verify steps the shape of their CUDA graphs).
  std::vector<int32_t> draft(const std::string& rid, std::span<const int32_t> tokens, int count) {
    return draft(rid, tokens, {}, count);
  }
  // The same for the history `known` followed by `tail` (the engine: the request's tokens, then the step's accepted
  // drafts and sampled token), without the caller copying it. Histories only grow: one that extends what was indexed
  // costs its new tokens only (checked at the indexed part's two ends, not along it; a mismatch there starts over).
  std::vector<int32_t> draft(const std::string& rid, std::span<const int32_t> known, std::span<const int32_t> tail,
                             int count);
  // Forgets a finished request.
  void release(const std::string& rid) { index_.erase(rid); }

 private:
  struct Index {
    std::vector<int32_t> tokens;  // the history indexed (n-grams ending before its last token)
    // Per window w (index w - min_window): the hash of an n-gram -> the end (exclusive) of its latest occurrence.
    std::vector<std::unordered_map<uint64_t, int32_t>> latest;
  };
  void extend(Index& ix, std::span<const int32_t> known, std::span<const int32_t> tail) const;
  static uint64_t hash(const int32_t* p, int w);

  NgramOptions o_;
  std::unordered_map<std::string, Index> index_;
};

}  // namespace ds
