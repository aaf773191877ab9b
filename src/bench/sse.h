// Incremental server-sent-events reader for streamed completions: bytes in, `data:` payloads out.
// Handles events split across reads, CRLF or LF line ends, multi-line data (joined with '\n'), comment
// and other-field lines (ignored); an event is complete at its blank line, or at end of stream.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace ds::bench {

class SseReader {
 public:
  // Appends the data payloads of the events completed by `bytes` (e.g. "{...}" or "[DONE]").
  void feed(std::string_view bytes, std::vector<std::string>* events);
  // End of stream: an event still missing its blank line is delivered too (a final unterminated line
  // counts as a line).
  void finish(std::vector<std::string>* events);

 private:
  void line(std::string_view l, std::vector<std::string>* events);
  std::string partial_;  // bytes of the current unfinished line
  std::string data_;     // data lines of the current event
  bool has_data_ = false;
};

}  // namespace ds::bench
