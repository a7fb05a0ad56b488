#include "engine/request.h"

namespace folio {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kNone: break;
  }
  return "none";
}

namespace {

std::optional<uint64_t> seed_of(const RequestParams& params, int32_t index) {
  if (!params.sampling.seed) return std::nullopt;
  return *params.sampling.seed + static_cast<uint64_t>(index);
}

}  // namespace

Request::Request(RequestId request_id, RequestId parent, int32_t sample_index,
                 std::shared_ptr<const RequestParams> params, std::vector<int32_t> all_tokens, int32_t prompt_length,
                 const Tokenizer& tokenizer)
    : id(request_id),
      parent_id(parent),
      index(sample_index),
      shared_params(std::move(params)),
      tokens(std::move(all_tokens)),
      num_prompt_tokens(prompt_length),
      sampler(shared_params->sampling, seed_of(*shared_params, sample_index)),
      detokenizer(tokenizer),
      arrival_time(Clock::now()),
      last_token_time(arrival_time) {}

std::optional<uint64_t> Request::seed() const {
  return seed_of(params(), index);
}

}  // namespace folio
