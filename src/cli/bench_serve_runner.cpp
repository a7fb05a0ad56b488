#include "cli/bench_serve_runner.h"

#include <deque>
#include <memory>

#include "cli/bench_serve_arrivals.h"

namespace folio::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

class ServeRun {
 public:
  ServeRun(HttpClient& client, const std::vector<ServeBenchRequest>& requests, const ServeRunOptions& options)
      : client_(client),
        requests_(requests),
        options_(options),
        progress_(options.progress, static_cast<int32_t>(requests.size())) {
    result_.records.resize(requests.size());
  }

  ServeRunResult run() {
    if (requests_.empty()) return result_;
    const std::vector<double> arrivals =
        poisson_arrival_times_s(static_cast<int32_t>(requests_.size()), options_.request_rate, options_.seed);
    start_ = Clock::now();
    last_end_ = start_;
    for (size_t i = 0; i < requests_.size(); ++i) {
      const auto at = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i]));
      client_.call_at(at, [this, i] { arrive(i); });
    }
    tick();
    client_.run();
    progress_.finish();
    result_.duration_s = seconds(last_end_ - start_);
    return std::move(result_);
  }

 private:
  void arrive(size_t i) {
    if (options_.max_concurrency > 0 && in_flight_ >= options_.max_concurrency) {
      waiting_.push_back(i);
      return;
    }
    send(i);
  }

  void send(size_t i) {
    const ServeBenchRequest& request = requests_[i];
    const Clock::time_point sent = Clock::now();
    ++in_flight_;
    result_.peak_in_flight = std::max(result_.peak_in_flight, in_flight_);
    auto recorder = std::make_shared<OpenAiStreamRecorder>(options_.kind, sent);
    client_.post_events(
        options_.endpoint, openai_request_body(options_.kind, options_.fields, request.prompt, request.max_tokens),
        options_.timeout_s,
        [recorder](std::string_view data, Clock::time_point arrival) { recorder->on_event(data, arrival); },
        [this, i, sent, recorder](HttpOutcome outcome) { done(i, sent, *recorder, outcome); });
  }

  void done(size_t i, Clock::time_point sent, const OpenAiStreamRecorder& recorder, const HttpOutcome& outcome) {
    const Clock::time_point now = Clock::now();
    RequestRecord& record = result_.records[i];
    record = recorder.finish(outcome, now, requests_[i].prompt_tokens, requests_[i].max_tokens);
    record.sent_s = seconds(sent - start_);
    last_end_ = now;
    --in_flight_;
    ++completed_;
    failed_ += record.success ? 0 : 1;
    progress_.update(completed_, failed_, seconds(now - start_));
    if (!waiting_.empty()) {
      const size_t next = waiting_.front();
      waiting_.pop_front();
      send(next);
    }
  }

  // Redraws the progress line while requests are out, so that elapsed time moves on a terminal.
  void tick() {
    if (options_.progress != ProgressLine::Mode::kInPlace) return;
    client_.call_at(Clock::now() + std::chrono::seconds(1), [this] {
      if (completed_ == static_cast<int32_t>(requests_.size())) return;
      progress_.update(completed_, failed_, seconds(Clock::now() - start_));
      tick();
    });
  }

  HttpClient& client_;
  const std::vector<ServeBenchRequest>& requests_;
  const ServeRunOptions& options_;
  ProgressLine progress_;
  ServeRunResult result_;
  std::deque<size_t> waiting_;
  Clock::time_point start_;
  Clock::time_point last_end_;
  int32_t in_flight_ = 0;
  int32_t completed_ = 0;
  int32_t failed_ = 0;
};

}  // namespace

ServeRunResult run_serve_requests(HttpClient& client, const std::vector<ServeBenchRequest>& requests,
                                  const ServeRunOptions& options) {
  return ServeRun(client, requests, options).run();
}

}  // namespace folio::cli
