#include "cli/bench_serve_progress.h"

#include <string>

namespace folio::cli {

void ProgressLine::update(int32_t completed, int32_t failed, double elapsed_s) {
  if (mode_ == Mode::kOff || total_ <= 0) return;
  if (mode_ == Mode::kLines) {
    const int32_t tenth = completed * 10 / total_;
    if (tenth == last_tenth_) return;
    last_tenth_ = tenth;
  }
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(static_cast<int64_t>(completed) * kWidth / total_);
  const std::string bar =
      std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(kWidth - filled), '.');
  const double rate = elapsed_s > 0.0 ? completed / elapsed_s : 0.0;
  const std::string failures = failed > 0 ? ", " + std::to_string(failed) + " failed" : "";
  // In place: carriage return, then clear what a longer earlier line left behind.
  std::fprintf(out_, "%s[%s] %d/%d requests%s, %.1f s, %.2f req/s%s", mode_ == Mode::kInPlace ? "\r" : "", bar.c_str(),
               completed, total_, failures.c_str(), elapsed_s, rate, mode_ == Mode::kInPlace ? "\033[K" : "\n");
  std::fflush(out_);
  drawn_ = true;
}

void ProgressLine::finish() {
  if (mode_ == Mode::kInPlace && drawn_) std::fprintf(out_, "\n");
  drawn_ = false;
}

}  // namespace folio::cli
