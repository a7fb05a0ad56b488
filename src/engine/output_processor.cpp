#include "engine/output_processor.h"

#include <algorithm>
#include <chrono>

namespace folio {

bool OutputProcessor::is_stop_token(const RequestParams& params, int32_t token) const {
  return (!params.ignore_eos && tokenizer_.is_end_of_generation(token)) ||
         std::find(params.stop_token_ids.begin(), params.stop_token_ids.end(), token) != params.stop_token_ids.end();
}

FinishReason OutputProcessor::append_token(Request& request, int32_t token) {
  request.tokens.push_back(token);
  const auto now = Clock::now();
  if (!request.first_token_time) request.first_token_time = now;
  request.last_token_time = now;
  const RequestParams& params = request.params();
  if (is_stop_token(params, token)) {
    request.output_text += request.detokenizer.flush();
    return FinishReason::kStop;
  }
  request.output_text += request.detokenizer.push(token);
  for (const std::string& stop : params.stop) {
    if (stop.empty()) continue;
    // Only the newly added text can complete a stop string.
    const size_t from = request.emitted_text > stop.size() ? request.emitted_text - stop.size() : 0;
    const size_t at = request.output_text.find(stop, from);
    if (at != std::string::npos) {
      request.output_text.resize(at);
      return FinishReason::kStop;
    }
  }
  if (request.num_output_tokens() >= params.max_tokens || request.num_tokens() >= max_model_len_) {
    request.output_text += request.detokenizer.flush();
    return FinishReason::kLength;
  }
  return FinishReason::kNone;
}

RequestOutput OutputProcessor::emit(Request& request, const SampleResult* sample) const {
  RequestOutput out;
  out.id = request.parent_id;
  out.index = request.index;
  if (sample != nullptr) {
    out.new_tokens.push_back(sample->token);
    if (request.params().sampling.logprobs >= 0) out.new_samples.push_back(*sample);
  }
  size_t hold_back = 0;
  if (!request.finished()) {
    for (const std::string& stop : request.params().stop) {
      hold_back = std::max(hold_back, stop.empty() ? 0 : stop.size() - 1);
    }
  }
  size_t end = request.output_text.size() > hold_back ? request.output_text.size() - hold_back : 0;
  // Never split a UTF-8 character: back up over continuation bytes.
  while (end > request.emitted_text && end < request.output_text.size() &&
         (static_cast<unsigned char>(request.output_text[end]) & 0xC0) == 0x80) {
    --end;
  }
  if (end > request.emitted_text) {
    out.text_delta = request.output_text.substr(request.emitted_text, end - request.emitted_text);
    request.emitted_text = end;
  }
  out.finished = request.finished();
  out.finish_reason = request.finish_reason;
  const int32_t num_output = request.num_output_tokens();
  if (out.finished && request.first_token_time) {
    out.time_to_first_token_s = std::chrono::duration<double>(*request.first_token_time - request.arrival_time).count();
    if (num_output > 1) {
      out.time_per_output_token_s =
          std::chrono::duration<double>(request.last_token_time - *request.first_token_time).count() /
          static_cast<double>(num_output - 1);
    }
  }
  out.num_prompt_tokens = request.num_prompt_tokens;
  out.num_output_tokens = num_output;
  return out;
}

}  // namespace folio
