#include "server/engine_worker.h"

#include <pthread.h>

#include <utility>

namespace folio::server {

EngineWorker::EngineWorker(Engine& engine, int32_t max_waiting)
    : engine_(engine), max_waiting_(max_waiting), max_running_(engine.max_num_seqs()) {}

EngineWorker::~EngineWorker() {
  stop();
}

void EngineWorker::start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "folio-engine");  // for top -H, perf and /proc: which thread is busy
    loop();
  });
}

void EngineWorker::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<EngineWorker::Ticket> EngineWorker::submit(std::vector<std::vector<int32_t>> prompts,
                                                         RequestParams params, OutputSink sink) {
  const Ticket ticket = next_ticket_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Requests the engine holds or will hold (queued here, waiting and running there after its
    // last step), less the running slots: what would wait. The engine's counts lag by at most
    // one step.
    const int32_t new_prompts = static_cast<int32_t>(prompts.size());
    const int64_t held = static_cast<int64_t>(num_queued_prompts_) + num_applying_prompts_ +
                         metrics_.engine.num_waiting + metrics_.engine.num_running + new_prompts;
    if (max_waiting_ > 0 && held - max_running_ > max_waiting_) return std::nullopt;
    ++num_queued_submissions_;
    num_queued_prompts_ += new_prompts;
    commands_.push_back(
        Submission{ticket, std::move(prompts), std::move(params), std::move(sink), std::chrono::steady_clock::now()});
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
      num_queued_submissions_ = 0;
      // Being handed to the engine: counted until the metrics after the next step show them.
      num_applying_prompts_ = num_queued_prompts_;
      num_queued_prompts_ = 0;
    }
    for (Command& command : commands) apply(command);
    // step() also reports (and forgets) requests aborted since the last one, so it runs even
    // when nothing is left to schedule.
    const std::vector<RequestOutput> outputs = engine_.step();
    // The metrics show the step before its outputs reach a client: whoever has read a token
    // finds its request in /metrics (a stale snapshot read "idle" beside a running request).
    publish_metrics();
    deliver(outputs);
    publish_counters();  // what deliver() just counted; the engine state is the same
  }
  // Shutting down: everything in flight is aborted and its blocks freed; sinks hear nothing.
  for (auto& [ticket, live] : live_) {
    for (RequestId id : live.engine_ids) engine_.abort(id);
  }
  live_.clear();
  owner_of_.clear();
  engine_.step();
  publish_metrics();
}

void EngineWorker::apply(Command& command) {
  if (auto* submission = std::get_if<Submission>(&command)) {
    const int32_t n = submission->params.n;
    std::vector<RequestId> ids;
    for (std::vector<int32_t>& prompt : submission->prompts) {
      Expected<RequestId> id = engine_.add_request(std::move(prompt), submission->params);
      if (!id) {
        // All prompts or none: the ones already added go again.
        for (RequestId added : ids) engine_.abort(added);
        ++counters_.num_requests_rejected;
        if (submission->sink.on_rejected) submission->sink.on_rejected(id.status());
        return;
      }
      ids.push_back(*id);
    }
    for (size_t i = 0; i < ids.size(); ++i) owner_of_[ids[i]] = Owner{submission->ticket, static_cast<int32_t>(i)};
    const int32_t num_samples = n * static_cast<int32_t>(ids.size());
    live_.emplace(submission->ticket,
                  Live{std::move(ids), std::move(submission->sink), num_samples, 0, submission->submitted});
    return;
  }
  const Ticket ticket = std::get<Cancellation>(command).ticket;
  auto it = live_.find(ticket);
  if (it == live_.end()) return;  // already finished (or never accepted)
  for (RequestId id : it->second.engine_ids) {
    engine_.abort(id);
    owner_of_.erase(id);
  }
  ++counters_.num_requests_aborted;
  live_.erase(it);
}

void EngineWorker::deliver(const std::vector<RequestOutput>& outputs) {
  for (const RequestOutput& engine_out : outputs) {
    auto owner = owner_of_.find(engine_out.id);
    if (owner == owner_of_.end()) continue;  // cancelled: its sink is gone
    const Ticket ticket = owner->second.ticket;
    Live& live = live_.at(ticket);
    ServedOutput served{owner->second.prompt_index, engine_out};
    const RequestOutput& out = served.output;
    const bool last = out.finished && ++live.num_finished == live.num_samples;
    if (out.finished) {
      if (out.finish_reason == FinishReason::kLength) ++counters_.num_requests_finished_length;
      if (out.finish_reason == FinishReason::kStop) ++counters_.num_requests_finished_stop;
      const double e2e = std::chrono::duration<double>(std::chrono::steady_clock::now() - live.submitted).count();
      latencies_.observe_finished(out, e2e);
    }
    // The sink may be the last owner of what it captures; move it out before erasing.
    if (last) {
      OutputSink sink = std::move(live.sink);
      for (RequestId id : live.engine_ids) owner_of_.erase(id);
      live_.erase(ticket);
      if (sink.on_output) sink.on_output(std::move(served));
    } else if (live.sink.on_output) {
      live.sink.on_output(std::move(served));
    }
  }
}

void EngineWorker::publish_metrics() {
  WorkerMetrics snapshot;
  snapshot.engine = engine_.metrics();
  snapshot.counters = counters_;
  snapshot.latencies = latencies_;
  std::lock_guard<std::mutex> lock(mutex_);
  snapshot.num_queued_submissions = num_queued_submissions_;
  num_applying_prompts_ = 0;
  metrics_ = snapshot;
}

void EngineWorker::publish_counters() {
  std::lock_guard<std::mutex> lock(mutex_);
  metrics_.counters = counters_;
  metrics_.latencies = latencies_;
}

}  // namespace folio::server
