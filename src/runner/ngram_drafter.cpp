// NGRAM drafting (ngram_drafter.h): n-gram indexes per request and the longest-suffix lookup.
#include "runner/ngram_drafter.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace ds {

NgramDrafter::NgramDrafter(NgramOptions o) : o_(o) {
  DS_CHECK(o_.min_window >= 1 && o_.max_window >= o_.min_window, "n-gram windows [", o_.min_window, ", ",
           o_.max_window, "]");
}

uint64_t NgramDrafter::hash(const int32_t* p, int w) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids' bytes
  for (int i = 0; i < w; ++i) {
    uint32_t v = static_cast<uint32_t>(p[i]);
    for (int b = 0; b < 4; ++b, v >>= 8) h = (h ^ (v & 0xff)) * 1099511628211ull;
  }
  return h;
}

// Appends the history's new tokens to ix.tokens and indexes every n-gram ending at positions up to its size - 1
// (exclusive end), so that the suffix ending at the newest token is looked up among earlier occurrences only.
void NgramDrafter::extend(Index& ix, std::span<const int32_t> known, std::span<const int32_t> tail) const {
  const int windows = o_.max_window - o_.min_window + 1;
  if (ix.latest.empty()) ix.latest.resize(static_cast<size_t>(windows));
  const size_t total = known.size() + tail.size();
  auto at = [&](size_t i) { return i < known.size() ? known[i] : tail[i - known.size()]; };
  // A history that is not an extension of the indexed one starts over (the engine's only grow: a retracted and
  // re-admitted request keeps its tokens; a finished one's index is released). Checked at the indexed part's ends.
  const size_t have = ix.tokens.size();
  if (have > total || (have > 0 && (at(0) != ix.tokens[0] || at(have - 1) != ix.tokens[have - 1]))) {
    ix.tokens.clear();
    for (auto& m : ix.latest) m.clear();
  }
  const int64_t from = static_cast<int64_t>(ix.tokens.size());  // ends already indexed: (.., from - 1]
  ix.tokens.reserve(total);
  for (size_t i = ix.tokens.size(); i < total; ++i) ix.tokens.push_back(at(i));
  const int32_t* tokens = ix.tokens.data();
  const int64_t n = static_cast<int64_t>(total);
  for (int64_t end = std::max<int64_t>(from, 1); end < n; ++end)  // the end n (the newest suffix) stays out
    for (int w = o_.min_window; w <= o_.max_window && w <= end; ++w)
      ix.latest[static_cast<size_t>(w - o_.min_window)][hash(tokens + end - w, w)] = static_cast<int32_t>(end);
}

std::vector<int32_t> NgramDrafter::draft(const std::string& rid, std::span<const int32_t> known,
                                         std::span<const int32_t> tail, int count) {
  DS_CHECK(known.size() + tail.size() > 0 && count >= 0, "n-gram drafts from ", known.size() + tail.size(), " tokens");
  Index& ix = index_[rid];
  // Indexing up to the newest token's predecessor: the n-grams ending before it (the newest is looked up, then
  // indexed by the next call, which sees a longer history).
  extend(ix, known, tail);
  const std::vector<int32_t>& tokens = ix.tokens;  // the whole history
  const int64_t n = static_cast<int64_t>(tokens.size());
  int64_t match_end = -1;  // end of the earlier occurrence of the longest recurring suffix
  for (int w = std::min<int64_t>(o_.max_window, n - 1); w >= o_.min_window && match_end < 0; --w) {
    const auto& m = ix.latest[static_cast<size_t>(w - o_.min_window)];
    auto it = m.find(hash(tokens.data() + n - w, w));
    if (it != m.end() && std::equal(tokens.begin() + (it->second - w), tokens.begin() + it->second, tokens.end() - w))
      match_end = it->second;
  }
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(count));
  // The continuation of the match; past the newest token it repeats the drafts themselves (period n - match_end).
  for (int k = 0; k < count; ++k) {
    if (match_end < 0) {
      out.push_back(tokens.back());
      continue;
    }
    const int64_t j = match_end + k;
    out.push_back(j < n ? tokens[j] : out[static_cast<size_t>(j - n)]);
  }
  return out;
}

}  // namespace ds
