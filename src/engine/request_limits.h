// The checks every entry point makes on token ids and request lengths (the engine's add_request,
// the server's planner and /detokenize, the sequence runner), written once so that they agree and
// say the same thing.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "core/status.h"

namespace folio {

// Every id in [0, vocab_size).
Status check_token_ids(std::span<const int32_t> tokens, int32_t vocab_size);

// A non-empty prompt shorter than the context, and, when max_tokens is given, room for that many
// more tokens: prompt + max_tokens <= context_tokens (the model's context, or the KV pool's
// tokens when those are fewer).
Status check_request_length(int64_t num_prompt_tokens, std::optional<int64_t> max_tokens, int64_t context_tokens);

// Room in a KV pool of pool_tokens for the whole request: the prompt and max_tokens more, or as
// many as max_model_len when the request stops there first. A request that cannot fit could never
// finish, since no preemption frees more than the pool.
Status check_request_fits_kv_pool(int64_t num_prompt_tokens, int64_t max_tokens, int64_t max_model_len,
                                  int64_t pool_tokens);

}  // namespace folio
