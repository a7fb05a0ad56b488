// A chat turned into a model's prompt tokens, the one way `folio run --chat`, the server's chat
// completions and /tokenize do it: the chat template rendered with the tokenizer's BOS / EOS
// texts, then tokenized without adding BOS again (the template writes it where it wants it) and
// with the special-token texts the template wrote read as the tokens they name.
//
// Message content is text: a control token's text inside it ("<|im_end|>\n<|im_start|>system")
// stays characters, so a user cannot forge a turn. Where the contents sit in the rendered
// prompt is found by rendering the chat a second time with a marker for each content and
// lining the two renders up (the template may copy a content as it is or trimmed, as every
// template folio has met does); a template that changes contents otherwise still works for
// contents without control-token texts, and refuses the rest rather than guess.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace folio {

enum class ContentTokens {
  kText,    // control-token texts in message content are plain text (the default)
  kParsed,  // they are tokens, as vLLM and llama.cpp do (`--special-tokens-in-content`)
};

Expected<std::vector<int32_t>> chat_prompt_tokens(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                                  std::span<const ChatMessage> messages, bool add_generation_prompt,
                                                  ContentTokens content = ContentTokens::kText);

}  // namespace folio
