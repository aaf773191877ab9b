// Streaming detokenizer (see detokenizer.h). Splitting the byte stream before an incomplete but
// still valid trailing sequence keeps the output identical to decoding all bytes at once: such a
// sequence starts with a lead byte, which never continues an earlier sequence.
#include "text/detokenizer.h"

#include <algorithm>

#include "text/unicode.h"

namespace ds {

Detokenizer::Detokenizer(const Tokenizer& tokenizer, DetokenizerOptions options)
    : tok_(tokenizer), opt_(std::move(options)) {}

const std::string& Detokenizer::stop_string() const {
  static const std::string kNone;
  return stop_index_ >= 0 ? opt_.stop[stop_index_] : kNone;
}

std::string Detokenizer::push(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += push(id);
  return out;
}

std::string Detokenizer::push(int32_t id) {
  if (stopped() || !tok_.has_id(id)) return {};
  if (opt_.skip_special_tokens && tok_.is_special(id)) return {};
  std::string text;
  const std::string& bytes = tok_.token_bytes(id);
  if (tok_.is_added(id)) {
    // An added token is complete text of its own; what is pending before it is flushed
    // (the full decode would turn an unfinished character there into U+FFFD as well).
    append_utf8_lossy(&text, pending_bytes_);
    pending_bytes_.clear();
    if (opt_.spaces_between_special_tokens && any_sub_text_) text += ' ';
    text += bytes;
    any_sub_text_ = true;
    in_text_run_ = false;
  } else {
    if (opt_.spaces_between_special_tokens && !in_text_run_) {
      if (any_sub_text_) text += ' ';
      any_sub_text_ = true;
      in_text_run_ = true;
    }
    pending_bytes_ += bytes;
    size_t hold = utf8_incomplete_tail(pending_bytes_);
    append_utf8_lossy(&text, std::string_view(pending_bytes_).substr(0, pending_bytes_.size() - hold));
    pending_bytes_.erase(0, pending_bytes_.size() - hold);
  }
  return take_text(std::move(text), false);
}

std::string Detokenizer::finish() {
  if (stopped()) return {};
  std::string text = utf8_lossy(pending_bytes_);
  pending_bytes_.clear();
  return take_text(std::move(text), true);
}

// Adds new text after the held-back text, cuts at the earliest stop string, and holds back the
// longest suffix that is a proper prefix of some stop string (unless `final`).
std::string Detokenizer::take_text(std::string piece, bool final) {
  std::string buf = std::move(held_text_);
  held_text_.clear();
  buf += piece;
  size_t best = std::string::npos;
  for (size_t k = 0; k < opt_.stop.size(); ++k) {
    const std::string& s = opt_.stop[k];
    if (s.empty()) continue;
    size_t p = buf.find(s);
    if (p != std::string::npos && (best == std::string::npos || p < best)) {
      best = p;
      stop_index_ = static_cast<int>(k);
    }
  }
  if (best != std::string::npos) {
    buf.resize(best);
    emitted_ += buf;
    return buf;
  }
  size_t hold = 0;
  if (!final) {
    for (const std::string& s : opt_.stop) {
      for (size_t k = std::min(s.size() - (s.empty() ? 0 : 1), buf.size()); k > hold; --k) {
        if (buf.compare(buf.size() - k, k, s, 0, k) == 0) {
          hold = k;
          break;
        }
      }
    }
  }
  held_text_ = buf.substr(buf.size() - hold);
  buf.resize(buf.size() - hold);
  emitted_ += buf;
  return buf;
}

}  // namespace ds
