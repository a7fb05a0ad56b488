// The checks every entry point makes on a prompt before it reaches the engine (the engine's
// add_request, the server's planner, the sequence runner), written once so that they agree and
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

}  // namespace folio
