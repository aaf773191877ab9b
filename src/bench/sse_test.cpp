// Tests of the incremental SSE reader: events split anywhere, CRLF, comments, multi-line data, EOF.
#include "bench/sse.h"

#include <gtest/gtest.h>

namespace ds::bench {
namespace {

std::vector<std::string> read_all(const std::string& stream, size_t piece) {
  SseReader r;
  std::vector<std::string> ev;
  for (size_t i = 0; i < stream.size(); i += piece) r.feed(std::string_view(stream).substr(i, piece), &ev);
  r.finish(&ev);
  return ev;
}

TEST(BenchSse, SplitAnywhere) {
  const std::string s =
      "data: {\"a\":1}\n\n: keep-alive\n\ndata:{\"b\":2}\r\n\r\nevent: x\nid: 7\ndata: line1\ndata: line2\n\n"
      "data: [DONE]\n\n";
  const std::vector<std::string> want = {"{\"a\":1}", "{\"b\":2}", "line1\nline2", "[DONE]"};
  for (size_t piece = 1; piece <= s.size(); ++piece) EXPECT_EQ(read_all(s, piece), want) << "piece " << piece;
}

TEST(BenchSse, EventsOnlyAtBlankLineOrEnd) {
  SseReader r;
  std::vector<std::string> ev;
  r.feed("data: x\n", &ev);
  EXPECT_TRUE(ev.empty());  // not dispatched before its blank line
  r.feed("\n", &ev);
  ASSERT_EQ(ev.size(), 1u);
  r.feed("data: tail-without-newline", &ev);
  EXPECT_EQ(ev.size(), 1u);
  r.finish(&ev);
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[1], "tail-without-newline");
  r.finish(&ev);  // nothing pending: nothing new
  EXPECT_EQ(ev.size(), 2u);
}

}  // namespace
}  // namespace ds::bench
