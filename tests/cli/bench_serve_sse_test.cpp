// SseParser: the events of a stream must not depend on where the transport cut it.
#ifdef FOLIO_HAS_SERVER
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/bench_serve_sse.h"

namespace folio::cli {
namespace {

std::vector<std::string> parse_in_pieces(const std::string& stream, const std::vector<size_t>& cuts) {
  SseParser parser;
  std::vector<std::string> events;
  size_t from = 0;
  for (const size_t cut : cuts) {
    parser.feed(std::string_view(stream).substr(from, cut - from), events);
    from = cut;
  }
  parser.feed(std::string_view(stream).substr(from), events);
  parser.finish(events);
  return events;
}

// What an OpenAI-compatible server sends: events, a comment (sse-starlette's ping), an event
// of two data lines, a field without a space, fields other than data, CRLF and lone CR.
const std::string kStream =
    "data: {\"choices\":[{\"text\":\"Hel\"}]}\n\n"
    ": ping - 2026-11-30 12:00:00\r\n\r\n"
    "data: {\"choices\":[{\"text\":\"lo\"}]}\r\n\r\n"
    "event: message\nid: 7\ndata: first line\ndata:second line\n\n"
    "data: {\"text\":\"\\u00e9\xc3\xa9\"}\r\r"
    "data:\n\n"
    "data: [DONE]\n\n";

const std::vector<std::string> kEvents = {"{\"choices\":[{\"text\":\"Hel\"}]}",
                                          "{\"choices\":[{\"text\":\"lo\"}]}",
                                          "first line\nsecond line",
                                          "{\"text\":\"\\u00e9\xc3\xa9\"}",
                                          "",
                                          "[DONE]"};

TEST(SseParser, ReadsEveryEventOfAWholeStream) {
  EXPECT_EQ(parse_in_pieces(kStream, {}), kEvents);
}

TEST(SseParser, SameEventsWhereverOneCutFalls) {
  for (size_t cut = 0; cut <= kStream.size(); ++cut) {
    EXPECT_EQ(parse_in_pieces(kStream, {cut}), kEvents) << "cut at byte " << cut;
  }
}

TEST(SseParser, SameEventsWhereverTwoCutsFall) {
  for (size_t a = 0; a <= kStream.size(); ++a) {
    for (size_t b = a; b <= kStream.size(); ++b) {
      ASSERT_EQ(parse_in_pieces(kStream, {a, b}), kEvents) << "cuts at bytes " << a << " and " << b;
    }
  }
}

TEST(SseParser, ByteByByte) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < kStream.size(); ++i) cuts.push_back(i);
  EXPECT_EQ(parse_in_pieces(kStream, cuts), kEvents);
}

TEST(SseParser, EventsArriveAsSoonAsTheirBlankLineDoes) {
  SseParser parser;
  std::vector<std::string> events;
  parser.feed("data: a\n", events);
  EXPECT_TRUE(events.empty());
  parser.feed("\n", events);
  EXPECT_EQ(events, std::vector<std::string>{"a"});
  // CR then LF split across reads is one line end, not a blank line after it.
  parser.feed("data: b\r", events);
  parser.feed("\ndata: c\r", events);
  EXPECT_EQ(events.size(), 1u);
  parser.feed("\n\r\n", events);
  EXPECT_EQ(events, (std::vector<std::string>{"a", "b\nc"}));
}

TEST(SseParser, CommentsAndDatalessEventsDispatchNothing) {
  EXPECT_TRUE(parse_in_pieces(": keep-alive\n\nevent: ping\n\nid: 3\n\n\n\n", {}).empty());
}

TEST(SseParser, AnUnterminatedLastEventIsDeliveredAtTheEnd) {
  EXPECT_EQ(parse_in_pieces("data: x\n\ndata: [DONE]", {}), (std::vector<std::string>{"x", "[DONE]"}));
  EXPECT_EQ(parse_in_pieces("data: x\n\ndata: [DONE]\n", {}), (std::vector<std::string>{"x", "[DONE]"}));
}

}  // namespace
}  // namespace folio::cli
#endif  // FOLIO_HAS_SERVER
