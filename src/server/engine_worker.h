// EngineWorker: the engine on its own thread, and the only way HTTP handlers reach it.
//
//   HTTP threads --submit/cancel--> submission queue (mutex + condition variable)
//   engine thread: drain the queue -> Engine::add_request / abort -> Engine::step()
//                  -> each RequestOutput to its request's OutputSink
//
// A sink is called on the engine thread and must only hand the output on (the HTTP side posts
// it to the connection's strand); it never calls back into the worker while being called.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "engine/engine.h"
#include "server/latency_histogram.h"

namespace folio::server {

// One engine output of a submitted request: output.index is the sample of prompt `prompt`.
struct ServedOutput {
  int32_t prompt = 0;
  RequestOutput output;
};

// Where one request's results go. on_rejected or on_output(finished) for each of the n
// samples of each prompt ends it; nothing is called after that, nor after cancel().
struct OutputSink {
  std::function<void(ServedOutput)> on_output;
  std::function<void(Status)> on_rejected;  // add_request refused it (a 400 for the client)
};

// Counters the engine does not keep, kept by the worker.
struct WorkerCounters {
  int64_t num_requests_finished_stop = 0;
  int64_t num_requests_finished_length = 0;
  int64_t num_requests_aborted = 0;
  int64_t num_requests_rejected = 0;
};

struct WorkerMetrics {
  EngineMetrics engine;
  WorkerCounters counters;
  RequestLatencies latencies;
  int32_t num_queued_submissions = 0;  // submitted, not yet handed to the engine
};

class EngineWorker {
 public:
  using Ticket = uint64_t;  // the worker's name for a request; engine ids exist only on its thread

  // max_waiting: how many accepted requests (prompts) may wait for a running slot; a submission
  // that would make more wait is refused (submit returns nothing; the server answers 503). A
  // request that can start at once does not wait: up to the engine's max_num_seqs run, and
  // max_waiting more queue behind them. 0: no limit.
  explicit EngineWorker(Engine& engine, int32_t max_waiting = 0);
  ~EngineWorker();  // stop()s
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  void start();
  // Aborts whatever is in flight (sinks get nothing more) and joins the engine thread.
  void stop();

  // Each prompt runs as its own engine request with params (n samples each); outputs reach the
  // sink with their prompt's index. Nothing when the waiting queue is full.
  std::optional<Ticket> submit(std::vector<std::vector<int32_t>> prompts, RequestParams params, OutputSink sink);
  // The request ends at the next pass of the engine loop and frees its KV blocks; its sink is
  // dropped and gets nothing more.
  void cancel(Ticket ticket);

  // A snapshot taken by the engine thread after its latest step.
  WorkerMetrics metrics() const;

 private:
  struct Submission {
    Ticket ticket;
    std::vector<std::vector<int32_t>> prompts;
    RequestParams params;
    OutputSink sink;
    std::chrono::steady_clock::time_point submitted;
  };
  struct Cancellation {
    Ticket ticket;
  };
  using Command = std::variant<Submission, Cancellation>;

  struct Live {
    std::vector<RequestId> engine_ids;  // one per prompt
    OutputSink sink;
    int32_t num_samples;
    int32_t num_finished = 0;
    std::chrono::steady_clock::time_point submitted;  // for the end-to-end latency
  };

  void loop();
  void apply(Command& command);
  void deliver(const std::vector<RequestOutput>& outputs);
  void publish_metrics();   // the engine after a step, the counters and the latencies
  void publish_counters();  // the counters and latencies alone, after deliver()

  Engine& engine_;
  const int32_t max_waiting_;
  const int32_t max_running_;  // the engine's max_num_seqs
  std::thread thread_;
  std::atomic<Ticket> next_ticket_{1};

  mutable std::mutex mutex_;  // guards the fields below it
  std::condition_variable wake_;
  std::deque<Command> commands_;
  int32_t num_queued_submissions_ = 0;  // Submissions in commands_
  int32_t num_queued_prompts_ = 0;      // their prompts: engine requests to be
  int32_t num_applying_prompts_ = 0;    // taken by the engine thread, not yet in metrics_
  bool stopping_ = false;
  WorkerMetrics metrics_;

  // Engine thread only.
  std::map<Ticket, Live> live_;
  struct Owner {
    Ticket ticket;
    int32_t prompt_index;
  };
  std::map<RequestId, Owner> owner_of_;
  WorkerCounters counters_;
  RequestLatencies latencies_;
};

}  // namespace folio::server
