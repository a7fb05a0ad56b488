// The progress line of `folio bench serve` on stderr: completed / total, failures, elapsed
// time and the completion rate. On a terminal it redraws in place; in a log (--progress with
// stderr redirected) it prints one line per tenth of the requests.
#pragma once

#include <cstdint>
#include <cstdio>

namespace folio::cli {

class ProgressLine {
 public:
  enum class Mode { kOff, kInPlace, kLines };

  ProgressLine(Mode mode, int32_t total, std::FILE* out = stderr) : mode_(mode), total_(total), out_(out) {}

  void update(int32_t completed, int32_t failed, double elapsed_s);
  // Ends the in-place line, so that what follows starts on a line of its own.
  void finish();

 private:
  Mode mode_;
  int32_t total_;
  std::FILE* out_;
  int32_t last_tenth_ = -1;
  bool drawn_ = false;
};

}  // namespace folio::cli
