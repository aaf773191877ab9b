// BPE model (see bpe.h). The merge loop reproduces the Rust crate's Word::merge_all exactly,
// including how it decides that a queued merge is stale (the pair now at that position must still
// produce the queued token), because that decision can change results on rare words.
#include "text/bpe.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/unicode.h"

namespace ds {
namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

struct Merge {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
};
// std heap functions build a max-heap; "less" means lower priority: higher rank, then higher pos.
struct MergeLess {
  bool operator()(const Merge& a, const Merge& b) const {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  }
};

}  // namespace

Result<BpeModel> BpeModel::from_json(const nlohmann::json& j) {
  if (!j.is_object() || j.value("type", std::string("BPE")) != "BPE")
    return error("tokenizer.json model: only \"BPE\" models are supported");
  BpeModel m;
  if (!j.contains("vocab") || !j["vocab"].is_object()) return error("tokenizer.json model: missing \"vocab\" object");
  const auto& vocab = j["vocab"];
  m.vocab_.reserve(vocab.size());
  int32_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    // Ids index dense tables: a huge id (a hostile tokenizer.json) would allocate gigabytes.
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > kMaxTokenId)
      return error("tokenizer.json model.vocab: id of '", it.key(), "' is not an integer in [0, ", kMaxTokenId, "]");
    int32_t id = it.value().get<int32_t>();
    m.vocab_.emplace(it.key(), id);
    max_id = std::max(max_id, id);
  }
  m.id_to_token_.assign(static_cast<size_t>(max_id + 1), std::string());
  std::vector<bool> present(static_cast<size_t>(max_id + 1), false);
  for (const auto& [tok, id] : m.vocab_) {
    m.id_to_token_[id] = tok;
    present[id] = true;
  }
  auto opt_string = [&](const char* key) -> std::string {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  if (!opt_string("continuing_subword_prefix").empty() || !opt_string("end_of_word_suffix").empty())
    return error("tokenizer.json model: continuing_subword_prefix/end_of_word_suffix are not supported");
  if (j.contains("dropout") && j["dropout"].is_number() && j["dropout"].get<double>() > 0)
    return error("tokenizer.json model: BPE dropout is not supported");
  std::string unk = opt_string("unk_token");
  if (!unk.empty()) {
    m.unk_id_ = m.token_to_id(unk);
    if (m.unk_id_ < 0) return error("tokenizer.json model: unk_token '", unk, "' is not in the vocabulary");
  }
  m.fuse_unk_ = j.value("fuse_unk", false);
  m.byte_fallback_ = j.value("byte_fallback", false);
  m.ignore_merges_ = j.value("ignore_merges", false);
  if (m.byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      m.byte_fallback_id_[b] = m.token_to_id(name);
    }
  }

  // Merges: "a b" strings (lines starting with "#version" are skipped) or [a, b] pairs.
  if (!j.contains("merges") || !j["merges"].is_array()) return error("tokenizer.json model: missing \"merges\" array");
  const auto& merges = j["merges"];
  m.merges_.reserve(merges.size());
  int32_t rank = 0;
  for (size_t k = 0; k < merges.size(); ++k) {
    const auto& e = merges[k];
    std::string a, b;
    if (e.is_string()) {
      const std::string& line = e.get_ref<const std::string&>();
      if (line.rfind("#version", 0) == 0) continue;
      size_t sp = line.find(' ');
      if (sp == std::string::npos || line.find(' ', sp + 1) != std::string::npos)
        return error("tokenizer.json model.merges[", k, "]: expected \"a b\", got '", line, "'");
      a = line.substr(0, sp);
      b = line.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
      a = e[0].get<std::string>();
      b = e[1].get<std::string>();
    } else {
      return error("tokenizer.json model.merges[", k, "]: expected a string or a pair of strings");
    }
    int32_t ia = m.token_to_id(a), ib = m.token_to_id(b), inew = m.token_to_id(a + b);
    if (ia < 0 || ib < 0 || inew < 0)
      return error("tokenizer.json model.merges[", k, "]: '", a, "' + '", b, "' not in the vocabulary");
    m.merges_.insert_or_assign(pair_key(ia, ib), std::make_pair(rank, inew));  // a later duplicate wins
    ++rank;
  }

  m.has_byte_symbols_ = true;
  const auto& alphabet = byte_to_utf8();
  for (int b = 0; b < 256; ++b) {
    m.byte_symbol_[b] = m.token_to_id(alphabet[b]);
    if (m.byte_symbol_[b] < 0) m.has_byte_symbols_ = false;
  }
  return m;
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return nullptr;
  const std::string& s = id_to_token_[id];
  if (s.empty()) return nullptr;  // a hole in the id range (no vocabulary token is empty)
  return &s;
}

const std::pair<int32_t, int32_t>* BpeModel::find_merge(int32_t a, int32_t b) const {
  auto it = merges_.find(pair_key(a, b));
  return it == merges_.end() ? nullptr : &it->second;
}

void BpeModel::merge_symbols(std::vector<Symbol>* symbols_ptr, std::vector<int32_t>* out) const {
  std::vector<Symbol>& sy = *symbols_ptr;
  const int32_t n = static_cast<int32_t>(sy.size());
  if (n == 0) return;
  thread_local std::vector<Merge> heap;
  heap.clear();
  for (int32_t i = 0; i + 1 < n; ++i)
    if (const auto* m = find_merge(sy[i].id, sy[i + 1].id)) heap.push_back({m->first, i, m->second});
  std::make_heap(heap.begin(), heap.end(), MergeLess());
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), MergeLess());
    Merge top = heap.back();
    heap.pop_back();
    Symbol& cur = sy[top.pos];
    if (cur.len == 0 || cur.next < 0) continue;
    const int32_t next_pos = cur.next;
    const Symbol right = sy[next_pos];
    const auto* m = find_merge(cur.id, right.id);
    if (!m || m->second != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    sy[next_pos].len = 0;
    if (right.next >= 0 && right.next < n) sy[right.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const auto* pm = find_merge(sy[cur.prev].id, cur.id)) {
        heap.push_back({pm->first, cur.prev, pm->second});
        std::push_heap(heap.begin(), heap.end(), MergeLess());
      }
    }
    if (cur.next >= 0 && cur.next < n) {
      if (const auto* nm = find_merge(cur.id, sy[cur.next].id)) {
        heap.push_back({nm->first, top.pos, nm->second});
        std::push_heap(heap.begin(), heap.end(), MergeLess());
      }
    }
  }
  for (const Symbol& s : sy)
    if (s.len) out->push_back(s.id);
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (int32_t id = token_to_id(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  thread_local std::vector<Symbol> sy;
  sy.clear();
  auto add = [&](int32_t id, int32_t len) {
    int32_t i = static_cast<int32_t>(sy.size());
    sy.push_back({id, i - 1, -1, len});
    if (i > 0) sy[i - 1].next = i;
  };
  int32_t unk_pending = -1, unk_len = 0;
  size_t i = 0;
  while (i < word.size()) {
    int len = utf8_sequence_length(word, i);
    if (len == 0) len = 1;  // callers pass valid UTF-8; be robust anyway
    std::string_view ch = word.substr(i, len);
    int32_t id = token_to_id(ch);
    if (id >= 0) {
      if (unk_pending >= 0) {
        add(unk_pending, unk_len);
        unk_pending = -1;
      }
      add(id, len);
    } else {
      bool done = false;
      if (byte_fallback_) {
        bool all = true;
        for (unsigned char b : ch) all = all && byte_fallback_id_[b] >= 0;
        if (all) {
          for (unsigned char b : ch) add(byte_fallback_id_[b], 1);
          done = true;
        }
      }
      if (!done && unk_id_ >= 0) {
        if (unk_pending >= 0 && fuse_unk_) {
          unk_len += len;
        } else {
          if (unk_pending >= 0) add(unk_pending, unk_len);
          unk_pending = unk_id_;
          unk_len = len;
        }
      }
      // Without unk token or byte fallback, an unknown character is dropped (as in the Rust crate).
    }
    i += len;
  }
  if (unk_pending >= 0) add(unk_pending, unk_len);
  merge_symbols(&sy, out);
}

void BpeModel::tokenize_bytes(std::string_view bytes, bool prefix_space, std::vector<int32_t>* out) const {
  DS_CHECK(has_byte_symbols_);
  if (bytes.empty() && !prefix_space) return;
  if (ignore_merges_) {
    std::string mapped;
    if (prefix_space) byte_level_encode_append(" ", &mapped);
    byte_level_encode_append(bytes, &mapped);
    if (int32_t id = token_to_id(mapped); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  thread_local std::vector<Symbol> sy;
  sy.clear();
  int32_t n = static_cast<int32_t>(bytes.size()) + (prefix_space ? 1 : 0);
  sy.reserve(n);
  int32_t k = 0;
  if (prefix_space) sy.push_back({byte_symbol_[' '], -1, n > 1 ? 1 : -1, 1}), ++k;
  for (unsigned char b : bytes) {
    sy.push_back({byte_symbol_[b], k - 1, k + 1 < n ? k + 1 : -1, 1});
    ++k;
  }
  merge_symbols(&sy, out);
}

}  // namespace ds
