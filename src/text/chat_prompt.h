// A chat turned into a model's prompt tokens, the one way `folio run --chat`, the server's chat
// completions and /tokenize do it: the chat template rendered with the tokenizer's BOS / EOS
// texts, then tokenized without adding BOS again (the template writes it where it wants it) and
// with the special-token texts the template wrote read as the tokens they name.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace folio {

Expected<std::vector<int32_t>> chat_prompt_tokens(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                                  std::span<const ChatMessage> messages, bool add_generation_prompt);

}  // namespace folio
