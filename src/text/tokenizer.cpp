// Tokenizer pipeline (see tokenizer.h): added-token extraction (two leftmost-longest passes, first
// tokens with normalized=false, then normalized=true, as the Rust AddedVocabulary does), the
// pre-tokenizer, the BPE model with a sharded cache of pre-token results, the post-processor, and
// the decoder.
#include "text/tokenizer.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/pretokenizer.h"
#include "text/unicode.h"

namespace ds {
namespace {

using json = nlohmann::json;

// Byte trie over added-token contents for leftmost-longest matching.
class TokenTrie {
 public:
  void add(std::string_view s, int32_t index) {
    if (s.empty()) return;
    int32_t node = 0;
    for (unsigned char b : s) {
      uint64_t key = (static_cast<uint64_t>(node) << 8) | b;
      auto it = edges_.find(key);
      if (it == edges_.end()) {
        int32_t child = static_cast<int32_t>(terminal_.size());
        terminal_.push_back(-1);
        edges_.emplace(key, child);
        node = child;
      } else {
        node = it->second;
      }
    }
    terminal_[node] = index;
    first_[static_cast<unsigned char>(s[0])] = true;
    empty_ = false;
  }
  bool empty() const { return empty_; }
  // Longest token starting at text[pos]: returns its length and sets *index, or 0.
  size_t longest_at(std::string_view text, size_t pos, int32_t* index) const {
    if (!first_[static_cast<unsigned char>(text[pos])]) return 0;
    int32_t node = 0;
    size_t best = 0;
    for (size_t i = pos; i < text.size(); ++i) {
      auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
      if (it == edges_.end()) break;
      node = it->second;
      if (terminal_[node] >= 0) {
        best = i + 1 - pos;
        *index = terminal_[node];
      }
    }
    return best;
  }

 private:
  std::unordered_map<uint64_t, int32_t> edges_;
  std::vector<int32_t> terminal_{-1};  // node 0 is the root
  std::array<bool, 256> first_{};
  bool empty_ = true;
};

// A segment of the input: an added token (token >= 0, index into added tokens) or plain text.
struct Segment {
  int32_t token = -1;
  size_t begin = 0, end = 0;
};

uint32_t first_cp(std::string_view s) {
  uint32_t cp = 0;
  return utf8_sequence_length(s, 0, &cp) ? cp : 0;
}
uint32_t last_cp(std::string_view s) {
  size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
  if (i == 0) return 0;
  uint32_t cp = 0;
  return utf8_sequence_length(s, i - 1, &cp) ? cp : 0;
}

// Post-processor step over the ids of a single sequence.
struct PostStep {
  // ids inserted before and after the sequence ($A) by a template.
  std::vector<int32_t> before, after;
};

std::string read_file(const std::string& path, bool* ok) {
  std::ifstream f(path, std::ios::binary);
  *ok = static_cast<bool>(f);
  if (!*ok) return {};
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string token_content(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return {};
}

constexpr size_t kCacheShards = 16;
constexpr size_t kCacheMaxKeyBytes = 256;  // longer pre-tokens are not cached (as in the Rust crate)

}  // namespace

struct Tokenizer::Impl {
  BpeModel model;
  PreTokenizer pre;
  std::vector<AddedToken> added;             // in file order
  std::vector<int32_t> added_index;          // id -> index into `added`, or -1
  TokenMap added_by_content;
  TokenTrie trie_raw, trie_normalized;       // normalized=false / normalized=true tokens
  std::shared_ptr<const Regex> word_char;    // for single_word tokens
  std::vector<PostStep> post;
  bool byte_level_decoder = false;
  bool has_decoder = false;
  std::vector<std::string> bytes_of;         // id -> decoder bytes
  std::optional<int32_t> bos, eos, pad;
  int32_t size = 0;

  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> map[2];
  };
  std::unique_ptr<Shard[]> cache{new Shard[kCacheShards]};
  std::atomic<size_t> cache_capacity{65536};

  Status load(std::string_view tokenizer_json, std::string_view config_json, const std::string& origin);
  Status split_added(std::string_view text, const TokenTrie& trie, size_t base, std::vector<Segment>* out) const;
  Status encode_text(std::string_view text, std::vector<int32_t>* out) const;
  void model_piece(std::string_view bytes, bool prefix_space, std::vector<int32_t>* out) const;
  bool is_word_char(uint32_t cp) const;
};

bool Tokenizer::Impl::is_word_char(uint32_t cp) const {
  if (cp == 0) return false;
  std::string s;
  append_utf8(&s, cp);
  std::vector<std::pair<uint32_t, uint32_t>> m;
  return word_char && word_char->find_all(s, &m).is_ok() && !m.empty();
}

Status Tokenizer::Impl::load(std::string_view tokenizer_json, std::string_view config_json, const std::string& origin) {
  json j = json::parse(tokenizer_json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error(origin, ": not a valid JSON object");
  try {
    // Normalizer: only "none" is supported (DeepSeek's is an empty Sequence).
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      const json& n = j["normalizer"];
      std::string type = n.value("type", std::string());
      if (!(type == "Sequence" && n.value("normalizers", json::array()).empty()))
        return error(origin, ": normalizer '", type, "' is not supported");
    }
    auto model = BpeModel::from_json(j.value("model", json()));
    if (!model.is_ok()) return error(origin, ": ", model.status().message());
    this->model = std::move(model).value();
    auto pre = PreTokenizer::from_json(j.value("pre_tokenizer", json()));
    if (!pre.is_ok()) return error(origin, ": ", pre.status().message());
    this->pre = std::move(pre).value();

    int32_t max_id = this->model.max_id();
    for (const json& t : j.value("added_tokens", json::array())) {
      AddedToken a;
      const json& id = t.at("id");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId)
        return error(origin, ": added token id ", id.dump(), " is not an integer in [0, ", kMaxTokenId, "]");
      a.id = id.get<int32_t>();
      a.content = t.at("content").get<std::string>();
      a.special = t.value("special", false);
      a.single_word = t.value("single_word", false);
      a.lstrip = t.value("lstrip", false);
      a.rstrip = t.value("rstrip", false);
      a.normalized = t.value("normalized", !a.special);
      if (a.id < 0) return error(origin, ": added token '", a.content, "' has a negative id");
      max_id = std::max(max_id, a.id);
      added.push_back(std::move(a));
    }
    size = max_id + 1;
    added_index.assign(size, -1);
    for (size_t k = 0; k < added.size(); ++k) {
      added_index[added[k].id] = static_cast<int32_t>(k);
      added_by_content[added[k].content] = added[k].id;
      (added[k].normalized ? trie_normalized : trie_raw).add(added[k].content, static_cast<int32_t>(k));
      if (added[k].single_word && !word_char) {
        auto r = Regex::compile("[\\p{Alphabetic}\\p{N}]");
        if (!r.is_ok()) r = Regex::compile("[\\p{L}\\p{N}]");
        if (r.is_ok()) word_char = r.value();
      }
    }

    // Decoder.
    const json dec = j.value("decoder", json());
    if (!dec.is_null()) {
      std::vector<json> parts;
      if (dec.value("type", std::string()) == "Sequence") {
        for (const json& d : dec.value("decoders", json::array())) parts.push_back(d);
      } else {
        parts.push_back(dec);
      }
      for (const json& d : parts) {
        std::string type = d.value("type", std::string());
        if (type != "ByteLevel") return error(origin, ": decoder '", type, "' is not supported");
        byte_level_decoder = true;
      }
      has_decoder = true;
    }
    bytes_of.assign(size, std::string());
    for (int32_t id = 0; id < size; ++id) {
      if (added_index[id] >= 0) {
        bytes_of[id] = added[added_index[id]].content;
      } else if (const std::string* t = this->model.id_to_token(id)) {
        if (byte_level_decoder) byte_level_decode_append(*t, &bytes_of[id]);
        else bytes_of[id] = *t;
      }
    }

    // Post-processor.
    auto id_of = [&](const std::string& tok) -> std::optional<int32_t> {
      if (auto it = added_by_content.find(tok); it != added_by_content.end()) return it->second;
      int32_t id = this->model.token_to_id(tok);
      return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
    };
    std::function<Status(const json&)> add_post = [&](const json& p) -> Status {
      if (p.is_null()) return Status::ok();
      std::string type = p.value("type", std::string());
      if (type == "Sequence") {
        for (const json& s : p.value("processors", json::array())) DS_RETURN_IF_ERROR(add_post(s));
        return Status::ok();
      }
      if (type == "ByteLevel") return Status::ok();  // only adjusts offsets
      PostStep step;
      if (type == "TemplateProcessing") {
        const json& specials = p.value("special_tokens", json::object());
        bool seen_a = false;
        for (const json& item : p.at("single")) {
          if (item.contains("Sequence")) {
            seen_a = true;
            continue;
          }
          std::string name = item.at("SpecialToken").at("id").get<std::string>();
          if (!specials.contains(name)) return error("post_processor: special token '", name, "' is not defined");
          for (const json& id : specials[name].at("ids")) (seen_a ? step.after : step.before).push_back(id.get<int32_t>());
        }
      } else if (type == "BertProcessing" || type == "RobertaProcessing") {
        step.before.push_back(p.at("cls").at(1).get<int32_t>());
        step.after.push_back(p.at("sep").at(1).get<int32_t>());
      } else {
        return error("post_processor '", type, "' is not supported");
      }
      post.push_back(std::move(step));
      return Status::ok();
    };
    if (Status s = add_post(j.value("post_processor", json())); !s.is_ok()) return error(origin, ": ", s.message());

    // tokenizer_config.json: special tokens and transformers' add_bos_token/add_eos_token.
    if (!config_json.empty()) {
      json c = json::parse(config_json, nullptr, false);
      if (c.is_discarded() || !c.is_object()) return error("tokenizer_config.json: not a valid JSON object");
      auto special = [&](const char* key, std::optional<int32_t>* out) -> Status {
        if (!c.contains(key) || c[key].is_null()) return Status::ok();
        std::string content = token_content(c[key]);
        *out = id_of(content);
        if (!*out) return error("tokenizer_config.json: ", key, " '", content, "' is not in the vocabulary");
        return Status::ok();
      };
      DS_RETURN_IF_ERROR(special("bos_token", &bos));
      DS_RETURN_IF_ERROR(special("eos_token", &eos));
      DS_RETURN_IF_ERROR(special("pad_token", &pad));
      if (c.contains("add_bos_token") || c.contains("add_eos_token")) {
        bool add_bos = c.value("add_bos_token", false), add_eos = c.value("add_eos_token", false);
        if (add_bos && !bos) return error("tokenizer_config.json: add_bos_token is set but bos_token is not");
        if (add_eos && !eos) return error("tokenizer_config.json: add_eos_token is set but eos_token is not");
        post.clear();
        PostStep step;
        if (add_bos) step.before.push_back(*bos);
        if (add_eos) step.after.push_back(*eos);
        post.push_back(std::move(step));
      }
    }
  } catch (const json::exception& e) {
    return error(origin, ": unexpected structure: ", e.what());
  }
  return Status::ok();
}

Status Tokenizer::Impl::split_added(std::string_view text, const TokenTrie& trie, size_t base,
                                    std::vector<Segment>* out) const {
  size_t start_offset = 0;  // end of the previous match
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t index = -1;
    size_t len = trie.longest_at(text, pos, &index);
    if (len == 0) {
      ++pos;
      continue;
    }
    const AddedToken& t = added[index];
    size_t start = pos, stop = pos + len;
    if (t.single_word) {
      bool start_space = start == 0 || !is_word_char(last_cp(text.substr(0, start)));
      bool stop_space = stop == text.size() || !is_word_char(first_cp(text.substr(stop)));
      if (!start_space || !stop_space) {  // not a whole word: the span stays text
        pos = stop;
        continue;
      }
    }
    if (t.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t c = s - 1;
        while (c > 0 && (static_cast<unsigned char>(text[c]) & 0xC0) == 0x80) --c;
        uint32_t cp = 0;
        if (!utf8_sequence_length(text, c, &cp) || !is_unicode_whitespace(cp)) break;
        s = c;
      }
      start = std::max(s, start_offset);
    }
    if (t.rstrip) {
      while (stop < text.size()) {
        uint32_t cp = 0;
        int l = utf8_sequence_length(text, stop, &cp);
        if (!l || !is_unicode_whitespace(cp)) break;
        stop += l;
      }
    }
    if (start_offset < start) out->push_back({-1, base + start_offset, base + start});
    out->push_back({index, base + start, base + stop});
    start_offset = stop;
    pos += len;  // matching resumes after the token itself, as Aho-Corasick's iterator does
  }
  if (start_offset < text.size()) out->push_back({-1, base + start_offset, base + text.size()});
  return Status::ok();
}

void Tokenizer::Impl::model_piece(std::string_view bytes, bool prefix_space, std::vector<int32_t>* out) const {
  const bool use_cache = bytes.size() < kCacheMaxKeyBytes && cache_capacity.load(std::memory_order_relaxed) > 0;
  Shard* shard = nullptr;
  if (use_cache) {
    shard = &cache[StringHash{}(bytes) % kCacheShards];
    std::lock_guard<std::mutex> lock(shard->mu);
    auto& map = shard->map[prefix_space ? 1 : 0];
    if (auto it = map.find(bytes); it != map.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out->size();
  if (pre.byte_level() && model.has_byte_symbols()) {
    model.tokenize_bytes(bytes, prefix_space, out);
  } else if (pre.byte_level()) {
    std::string mapped;
    if (prefix_space) byte_level_encode_append(" ", &mapped);
    byte_level_encode_append(bytes, &mapped);
    model.tokenize(mapped, out);
  } else {
    model.tokenize(bytes, out);
  }
  if (use_cache) {
    std::lock_guard<std::mutex> lock(shard->mu);
    auto& map = shard->map[prefix_space ? 1 : 0];
    if (map.size() < cache_capacity.load(std::memory_order_relaxed) / kCacheShards)
      map.emplace(std::string(bytes), std::vector<int32_t>(out->begin() + first, out->end()));
  }
}

Status Tokenizer::Impl::encode_text(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<Segment> segs, segs2;
  if (!trie_raw.empty()) DS_RETURN_IF_ERROR(split_added(text, trie_raw, 0, &segs));
  else if (!text.empty()) segs.push_back({-1, 0, text.size()});
  if (!trie_normalized.empty()) {
    for (const Segment& s : segs) {
      if (s.token >= 0) segs2.push_back(s);
      else DS_RETURN_IF_ERROR(split_added(text.substr(s.begin, s.end - s.begin), trie_normalized, s.begin, &segs2));
    }
    segs.swap(segs2);
  }
  std::vector<Piece> pieces;
  for (const Segment& s : segs) {
    if (s.token >= 0) {
      out->push_back(added[s.token].id);
      continue;
    }
    std::string_view sub = text.substr(s.begin, s.end - s.begin);
    pieces.clear();
    DS_RETURN_IF_ERROR(pre.split(sub, &pieces));
    for (const Piece& p : pieces) model_piece(sub.substr(p.begin, p.end - p.begin), p.prefix_space, out);
  }
  return Status::ok();
}

Result<Tokenizer> Tokenizer::load(const std::string& dir) {
  bool ok = false;
  std::string path = dir + "/tokenizer.json";
  std::string text = read_file(path, &ok);
  if (!ok) return error("cannot read ", path);
  std::string config = read_file(dir + "/tokenizer_config.json", &ok);
  if (!ok) config.clear();
  return from_json_text(text, config, path);
}

Result<Tokenizer> Tokenizer::from_json_text(std::string_view tokenizer_json, std::string_view config_json,
                                            const std::string& origin) {
  Tokenizer t;
  t.impl_ = std::make_shared<Impl>();
  DS_RETURN_IF_ERROR(t.impl_->load(tokenizer_json, config_json, origin));
  return t;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  if (size_t bad = find_invalid_utf8(text); bad != std::string_view::npos)
    return error("text to encode is not valid UTF-8 (byte ", bad, ")");
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  DS_RETURN_IF_ERROR(impl_->encode_text(text, &ids));
  if (add_special_tokens) {
    for (const PostStep& s : impl_->post) {
      if (s.before.empty() && s.after.empty()) continue;
      std::vector<int32_t> r(s.before);
      r.insert(r.end(), ids.begin(), ids.end());
      r.insert(r.end(), s.after.begin(), s.after.end());
      ids.swap(r);
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& m = *impl_;
  std::string bytes;
  bool first = true;
  for (int32_t id : ids) {
    if (id < 0 || id >= m.size) continue;
    if (skip_special_tokens && is_special(id)) continue;
    if (!has_id(id)) continue;
    if (!m.has_decoder && !first) bytes.push_back(' ');  // no decoder: tokens joined by spaces
    bytes += m.bytes_of[id];
    first = false;
  }
  return utf8_lossy(bytes);
}

int32_t Tokenizer::vocab_size() const { return impl_->size; }

bool Tokenizer::has_id(int32_t id) const {
  if (id < 0 || id >= impl_->size) return false;
  return impl_->added_index[id] >= 0 || impl_->model.id_to_token(id) != nullptr;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) return it->second;
  int32_t id = impl_->model.token_to_id(token);
  return id >= 0 ? std::optional<int32_t>(id) : std::nullopt;
}

const std::string* Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || id >= impl_->size) return nullptr;
  if (int32_t k = impl_->added_index[id]; k >= 0) return &impl_->added[k].content;
  return impl_->model.id_to_token(id);
}

bool Tokenizer::is_added(int32_t id) const { return id >= 0 && id < impl_->size && impl_->added_index[id] >= 0; }

bool Tokenizer::is_special(int32_t id) const {
  return is_added(id) && impl_->added[impl_->added_index[id]].special;
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < impl_->size ? impl_->bytes_of[id] : kEmpty;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }

void Tokenizer::set_cache_capacity(size_t entries) {
  impl_->cache_capacity.store(entries);
  for (size_t k = 0; k < kCacheShards; ++k) {
    std::lock_guard<std::mutex> lock(impl_->cache[k].mu);
    impl_->cache[k].map[0].clear();
    impl_->cache[k].map[1].clear();
  }
}

}  // namespace ds
