// A generation request as the engine tracks it: its tokens (prompt, then output, in one vector),
// how many of them have K/V in the cache (num_computed_tokens, which catches up with
// num_tokens(): there are no separate prefill and decode phases), its random stream and its
// stop conditions. The parameters a user sent are shared by every sequence of the request (its n
// samples, its beams), never copied per sequence.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "engine/spec/speculation.h"
#include "text/tokenizer.h"

namespace folio {

using RequestId = int64_t;

enum class RequestStatus { kWaiting, kRunning, kSwapped, kFinished };
enum class FinishReason { kNone, kStop, kLength, kAbort };
const char* finish_reason_name(FinishReason reason);

struct RequestParams {
  SamplingParams sampling;
  int32_t max_tokens = 16;
  std::vector<std::string> stop;  // stop strings; not part of the returned text
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t priority = 0;         // lower runs first; ties in arrival order
  int32_t n = 1;                // parallel samples: one prefill, n forked continuations
  int32_t beam_width = 1;       // > 1: beam search (greedy over beams; results at the end)
  float length_penalty = 1.0f;  // beam score = cum logprob / length^length_penalty
  bool early_stopping = false;  // beam search ends once beam_width hypotheses ended
};

using Clock = std::chrono::steady_clock;

struct Request {
  // index: which of the request's n samples this sequence is (its seed is the request's + index).
  Request(RequestId id, RequestId parent_id, int32_t index, std::shared_ptr<const RequestParams> params,
          std::vector<int32_t> tokens, int32_t num_prompt_tokens, const Tokenizer& tokenizer);

  RequestId id;
  RequestId parent_id;  // the user's request: == id for the first sequence, shared by its forks
  int32_t index = 0;    // which of the n parallel samples
  std::shared_ptr<const RequestParams> shared_params;
  std::vector<int32_t> tokens;  // (num_prompt_tokens + output length,) prompt, then output
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;  // tokens whose K/V are in the cache
  Sampler sampler;                  // this sequence's random stream
  IncrementalDetokenizer detokenizer;
  std::string output_text;                         // stop strings already cut off
  size_t emitted_text = 0;                         // bytes of output_text handed out in outputs
  RequestStatus status = RequestStatus::kWaiting;  // written by the scheduler only
  FinishReason finish_reason = FinishReason::kNone;
  bool forked = false;                                      // n > 1: the n - 1 siblings have been made
  double cum_logprob = 0.0;                                 // beam search: sum of the output tokens' logprobs
  bool beam_pending = false;                                // beam search: scored, waiting for the rest of its group
  std::vector<std::pair<int32_t, double>> beam_candidates;  // (token, logprob), best first
  Speculation speculation;                                  // proposals and acceptance (engine/spec/)
  uint64_t arrival_order = 0;
  int32_t num_preemptions = 0;
  Clock::time_point arrival_time;
  std::optional<Clock::time_point> first_token_time;
  Clock::time_point last_token_time;

  const RequestParams& params() const { return *shared_params; }
  // The request's seed for this sequence (seed + index), if the request gave one.
  std::optional<uint64_t> seed() const;
  int64_t sequence_id() const { return id; }
  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  std::span<const int32_t> prompt() const { return std::span<const int32_t>(tokens).first(num_prompt_tokens); }
  std::span<const int32_t> output() const { return std::span<const int32_t>(tokens).subspan(num_prompt_tokens); }
  bool finished() const { return status == RequestStatus::kFinished; }
};

}  // namespace folio
