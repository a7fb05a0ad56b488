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

Request::Request(RequestId request_id, std::vector<int32_t> prompt, RequestParams request_params,
                 const Tokenizer& tokenizer)
    : id(request_id),
      parent_id(request_id),
      prompt_tokens(std::move(prompt)),
      params(std::move(request_params)),
      sampler(params.sampling),
      detokenizer(tokenizer),
      arrival_time(Clock::now()),
      last_token_time(arrival_time) {}

int32_t Request::token_at(int32_t position) const {
  const int32_t prompt_size = static_cast<int32_t>(prompt_tokens.size());
  return position < prompt_size ? prompt_tokens[position] : output_tokens[position - prompt_size];
}

std::vector<int32_t> Request::all_tokens() const {
  std::vector<int32_t> tokens = prompt_tokens;
  tokens.insert(tokens.end(), output_tokens.begin(), output_tokens.end());
  return tokens;
}

}  // namespace folio
