// SamplingParams: how one request turns logits into tokens. Field names and meanings follow
// vLLM's SamplingParams (and so the OpenAI API); Sampler (sampler.h) documents the exact order
// in which they are applied.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"

namespace folio {

struct SamplingParams {
  // Logits are divided by temperature before sampling. 0 means greedy (argmax, ties go to the
  // lowest token id); vLLM treats anything below 1e-5 as greedy too, and so do we.
  float temperature = 1.0f;
  // Keep only tokens whose logit is >= the k-th largest logit (ties at the boundary are kept,
  // as in vLLM). <= 0 (or >= vocab size) turns it off.
  int top_k = -1;
  // Nucleus sampling: keep the smallest set of most likely tokens whose probability mass
  // (after top-k, renormalized) reaches top_p. 1 turns it off.
  float top_p = 1.0f;
  // Keep tokens whose probability is >= min_p * (probability of the most likely token).
  // 0 turns it off.
  float min_p = 0.0f;
  // HF/vLLM repetition penalty over every token seen in prompt or output: positive logits are
  // divided by it, negative ones multiplied. 1 turns it off.
  float repetition_penalty = 1.0f;
  // OpenAI penalties over output tokens only: logit -= frequency_penalty * count(token)
  // and logit -= presence_penalty * (count(token) > 0).
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  // Same seed, same logits -> same tokens. Without a seed the sampler draws one from
  // std::random_device.
  std::optional<uint64_t> seed;
  // -1: no logprobs (nothing extra is computed). 0: the sampled token's logprob only.
  // N in 1..20: also the N most likely tokens. This is vLLM's logprobs=None / 0 / N.
  // Logprobs are "raw": the log-softmax of the model's logits before penalties, temperature
  // and truncation (vLLM v1's default logprobs_mode="raw_logprobs").
  int logprobs = -1;

  static constexpr int kMaxLogprobs = 20;
  static constexpr float kGreedyTemperature = 1e-5f;

  bool is_greedy() const { return temperature < kGreedyTemperature; }

  // An error naming the first field out of range, so an API layer can return it as a 400.
  Status validate() const {
    // `!(x >= lo)` rather than `x < lo` so that NaN is rejected too.
    if (!(temperature >= 0.0f) || std::isinf(temperature))
      return Status::error("temperature must be a finite number >= 0, got " + std::to_string(temperature));
    if (top_k < -1)
      return Status::error("top_k must be -1 (off), 0 (off) or a positive count, got " + std::to_string(top_k));
    if (!(top_p > 0.0f && top_p <= 1.0f)) return Status::error("top_p must be in (0, 1], got " + std::to_string(top_p));
    if (!(min_p >= 0.0f && min_p <= 1.0f))
      return Status::error("min_p must be in [0, 1], got " + std::to_string(min_p));
    if (!(repetition_penalty > 0.0f) || std::isinf(repetition_penalty))
      return Status::error("repetition_penalty must be a finite number > 0, got " + std::to_string(repetition_penalty));
    if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
      return Status::error("frequency_penalty must be in [-2, 2], got " + std::to_string(frequency_penalty));
    if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
      return Status::error("presence_penalty must be in [-2, 2], got " + std::to_string(presence_penalty));
    if (logprobs < -1 || logprobs > kMaxLogprobs)
      return Status::error("logprobs must be in [0, " + std::to_string(kMaxLogprobs) + "] (or -1 for none), got " +
                           std::to_string(logprobs));
    return Status::ok();
  }
};

}  // namespace folio
