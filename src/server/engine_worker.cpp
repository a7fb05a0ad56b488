#include "server/engine_worker.h"

#include <utility>

namespace folio::server {

EngineWorker::EngineWorker(Engine& engine) : engine_(engine) {}

EngineWorker::~EngineWorker() { stop(); }

void EngineWorker::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { loop(); });
}

void EngineWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

EngineWorker::Ticket EngineWorker::submit(std::vector<int32_t> prompt, RequestParams params, OutputSink sink) {
  const Ticket ticket = next_ticket_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    commands_.push_back(Submission{ticket, std::move(prompt), std::move(params), std::move(sink)});
  }
  wake_.notify_one();
  return ticket;
}

void EngineWorker::cancel(Ticket ticket) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    commands_.push_back(Cancellation{ticket});
  }
  wake_.notify_one();
}

WorkerMetrics EngineWorker::metrics() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return metrics_;
}

void EngineWorker::loop() {
  publish_metrics();
  for (;;) {
    std::deque<Command> commands;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // Idle: sleep until a command arrives. Busy: take what is there and step.
      wake_.wait(lock, [&] { return stopping_ || !commands_.empty() || engine_.has_unfinished_requests(); });
      if (stopping_) break;
      commands.swap(commands_);
    }
    for (Command& command : commands) apply(command);
    // step() also reports (and forgets) requests aborted since the last one, so it runs even
    // when nothing is left to schedule.
    deliver(engine_.step());
    publish_metrics();
  }
  // Shutting down: everything in flight is aborted and its blocks freed; sinks hear nothing.
  for (auto& [ticket, live] : live_) engine_.abort(live.engine_id);
  live_.clear();
  ticket_of_.clear();
  engine_.step();
  publish_metrics();
}

void EngineWorker::apply(Command& command) {
  if (auto* submission = std::get_if<Submission>(&command)) {
    const int32_t num_samples = submission->params.n;
    Expected<RequestId> id = engine_.add_request(std::move(submission->prompt), std::move(submission->params));
    if (!id) {
      ++counters_.num_requests_rejected;
      if (submission->sink.on_rejected) submission->sink.on_rejected(id.status());
      return;
    }
    live_.emplace(submission->ticket, Live{*id, std::move(submission->sink), num_samples});
    ticket_of_[*id] = submission->ticket;
    return;
  }
  const Ticket ticket = std::get<Cancellation>(command).ticket;
  auto it = live_.find(ticket);
  if (it == live_.end()) return;  // already finished (or never accepted)
  engine_.abort(it->second.engine_id);
  ++counters_.num_requests_aborted;
  ticket_of_.erase(it->second.engine_id);
  live_.erase(it);
}

void EngineWorker::deliver(const std::vector<RequestOutput>& outputs) {
  for (const RequestOutput& out : outputs) {
    auto ticket = ticket_of_.find(out.id);
    if (ticket == ticket_of_.end()) continue;  // cancelled: its sink is gone
    Live& live = live_.at(ticket->second);
    const bool last = out.finished && ++live.num_finished == live.num_samples;
    if (out.finished) {
      if (out.finish_reason == FinishReason::kLength) ++counters_.num_requests_finished_length;
      if (out.finish_reason == FinishReason::kStop) ++counters_.num_requests_finished_stop;
    }
    // The sink may be the last owner of what it captures; move it out before erasing.
    if (last) {
      OutputSink sink = std::move(live.sink);
      live_.erase(ticket->second);
      ticket_of_.erase(ticket);
      if (sink.on_output) sink.on_output(out);
    } else if (live.sink.on_output) {
      live.sink.on_output(out);
    }
  }
}

void EngineWorker::publish_metrics() {
  WorkerMetrics snapshot;
  snapshot.engine = engine_.metrics();
  snapshot.counters = counters_;
  std::lock_guard<std::mutex> lock(mutex_);
  snapshot.num_queued_submissions = static_cast<int32_t>(commands_.size());
  metrics_ = snapshot;
}

}  // namespace folio::server
