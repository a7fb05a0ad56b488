#include "engine/request_limits.h"

#include <algorithm>
#include <string>

namespace folio {

Status check_token_ids(std::span<const int32_t> tokens, int32_t vocab_size) {
  for (int32_t id : tokens) {
    if (id < 0 || id >= vocab_size) {
      return Status::error("token id " + std::to_string(id) + " is out of range (vocabulary size " +
                           std::to_string(vocab_size) + ")");
    }
  }
  return Status::ok();
}

Status check_request_length(int64_t num_prompt_tokens, std::optional<int64_t> max_tokens, int64_t context_tokens) {
  if (num_prompt_tokens == 0) return Status::error("the prompt is empty");
  if (num_prompt_tokens >= context_tokens) {
    return Status::error("this model's maximum context length is " + std::to_string(context_tokens) +
                         " tokens, but the prompt has " + std::to_string(num_prompt_tokens) + " tokens");
  }
  if (max_tokens && *max_tokens > context_tokens - num_prompt_tokens) {
    return Status::error("this model's maximum context length is " + std::to_string(context_tokens) +
                         " tokens; you requested " + std::to_string(num_prompt_tokens + *max_tokens) + " tokens (" +
                         std::to_string(num_prompt_tokens) + " in the prompt, " + std::to_string(*max_tokens) +
                         " in the completion)");
  }
  return Status::ok();
}

Status check_request_fits_kv_pool(int64_t num_prompt_tokens, int64_t max_tokens, int64_t max_model_len,
                                  int64_t pool_tokens) {
  const int64_t total = num_prompt_tokens + max_tokens;
  if (std::min(total, max_model_len) > pool_tokens) {
    return Status::error("prompt plus max_tokens (" + std::to_string(total) + " tokens) exceed the KV cache (" +
                         std::to_string(pool_tokens) + " tokens)");
  }
  return Status::ok();
}

}  // namespace folio
