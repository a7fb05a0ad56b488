#include "cli/bench_serve_sse.h"

namespace folio::cli {

void SseParser::feed(std::string_view bytes, std::vector<std::string>& events) {
  for (const char c : bytes) {
    if (skip_line_feed_) {
      skip_line_feed_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      skip_line_feed_ = c == '\r';
      take_line(events);
      continue;
    }
    line_.push_back(c);
  }
}

void SseParser::finish(std::vector<std::string>& events) {
  if (!line_.empty()) take_line(events);
  if (has_data_) events.push_back(std::move(data_));
  data_.clear();
  has_data_ = false;
  skip_line_feed_ = false;
}

void SseParser::take_line(std::vector<std::string>& events) {
  if (line_.empty()) {  // the blank line that ends an event
    if (has_data_) events.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line_.front() != ':') {
    const size_t colon = line_.find(':');
    const std::string_view field = std::string_view(line_).substr(0, colon);
    if (field == "data") {
      std::string_view value =
          colon == std::string::npos ? std::string_view() : std::string_view(line_).substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      if (has_data_) data_.push_back('\n');
      data_.append(value);
      has_data_ = true;
    }
  }
  line_.clear();
}

}  // namespace folio::cli
