// Server-sent-events reader (see sse.h).
#include "bench/sse.h"

namespace ds::bench {

void SseReader::feed(std::string_view bytes, std::vector<std::string>* events) {
  size_t start = 0;
  while (start < bytes.size()) {
    const size_t nl = bytes.find('\n', start);
    if (nl == std::string_view::npos) {
      partial_.append(bytes.substr(start));
      return;
    }
    std::string_view piece = bytes.substr(start, nl - start);
    if (partial_.empty()) {
      line(piece, events);
    } else {
      partial_.append(piece);
      std::string l = std::move(partial_);
      partial_.clear();
      line(l, events);
    }
    start = nl + 1;
  }
}

void SseReader::finish(std::vector<std::string>* events) {
  if (!partial_.empty()) {
    std::string l = std::move(partial_);
    partial_.clear();
    line(l, events);
  }
  line("", events);
}

void SseReader::line(std::string_view l, std::vector<std::string>* events) {
  if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
  if (l.empty()) {  // dispatch
    if (has_data_) events->push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (l.front() == ':') return;  // comment (keep-alive pings)
  std::string_view field = l, value;
  if (const size_t colon = l.find(':'); colon != std::string_view::npos) {
    field = l.substr(0, colon);
    value = l.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field != "data") return;  // event:, id:, retry: carry nothing bench-serving needs
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

}  // namespace ds::bench
