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
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

#include "engine/engine.h"

namespace folio::server {

// Where one request's results go. on_rejected or on_output(finished) for each of the n
// samples ends it; nothing is called after that, nor after cancel().
struct OutputSink {
  std::function<void(RequestOutput)> on_output;
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
  int32_t num_queued_submissions = 0;  // submitted, not yet handed to the engine
};

class EngineWorker {
 public:
  using Ticket = uint64_t;  // the worker's name for a request; engine ids exist only on its thread

  explicit EngineWorker(Engine& engine);
  ~EngineWorker();  // stop()s
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  void start();
  // Aborts whatever is in flight (sinks get nothing more) and joins the engine thread.
  void stop();

  Ticket submit(std::vector<int32_t> prompt, RequestParams params, OutputSink sink);
  // The request ends at the next pass of the engine loop and frees its KV blocks; its sink is
  // dropped and gets nothing more.
  void cancel(Ticket ticket);

  // A snapshot taken by the engine thread after its latest step.
  WorkerMetrics metrics() const;

 private:
  struct Submission {
    Ticket ticket;
    std::vector<int32_t> prompt;
    RequestParams params;
    OutputSink sink;
  };
  struct Cancellation {
    Ticket ticket;
  };
  using Command = std::variant<Submission, Cancellation>;

  struct Live {
    RequestId engine_id;
    OutputSink sink;
    int32_t num_samples;
    int32_t num_finished = 0;
  };

  void loop();
  void apply(Command& command);
  void deliver(const std::vector<RequestOutput>& outputs);
  void publish_metrics();

  Engine& engine_;
  std::thread thread_;
  std::atomic<Ticket> next_ticket_{1};

  mutable std::mutex mutex_;  // guards the fields below it
  std::condition_variable wake_;
  std::deque<Command> commands_;
  bool stopping_ = false;
  WorkerMetrics metrics_;

  // Engine thread only.
  std::map<Ticket, Live> live_;
  std::map<RequestId, Ticket> ticket_of_;
  WorkerCounters counters_;
};

}  // namespace folio::server
