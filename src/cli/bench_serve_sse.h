// Server-sent events as OpenAI-compatible servers stream them: bytes in, as they arrive off the
// socket, the `data:` of every complete event out. An event or a line may be cut anywhere by
// the transport (between TCP reads, between HTTP chunks), so the parser keeps the unfinished
// line and event between calls.
//
// Follows the WHATWG event-stream rules a client needs here: lines end in CRLF, LF or CR;
// a blank line ends an event; "data:" lines of one event are joined with '\n'; one space after
// the colon is dropped; lines starting with ':' are comments (sse-starlette's pings); other
// fields (event, id, retry) are ignored; an event without data is not dispatched.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace folio::cli {

class SseParser {
 public:
  // Appends to `events` the data of every event these bytes complete, in order.
  void feed(std::string_view bytes, std::vector<std::string>& events);
  // At the end of the body: an event whose closing blank line never came is delivered too,
  // since a server that ends the stream there has nothing more to say.
  void finish(std::vector<std::string>& events);

 private:
  void take_line(std::vector<std::string>& events);

  std::string line_;             // the current line, without its terminator
  std::string data_;             // the current event's data lines, joined
  bool has_data_ = false;        // an empty "data:" still makes an event
  bool skip_line_feed_ = false;  // the previous byte was CR: a following LF belongs to it
};

}  // namespace folio::cli
