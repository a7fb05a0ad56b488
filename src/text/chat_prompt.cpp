#include "text/chat_prompt.h"

namespace folio {

Expected<std::vector<int32_t>> chat_prompt_tokens(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                                  std::span<const ChatMessage> messages, bool add_generation_prompt) {
  const nlohmann::json extra = {
      {"bos_token", tokenizer.bos_id() >= 0 ? tokenizer.token_to_piece(tokenizer.bos_id()) : std::string()},
      {"eos_token", tokenizer.eos_id() >= 0 ? tokenizer.token_to_piece(tokenizer.eos_id()) : std::string()}};
  Expected<std::string> text = chat_template.render(messages, add_generation_prompt, extra);
  if (!text) return Status::error("the chat template failed on these messages: " + text.error());
  return tokenizer.encode(*text, /*add_special=*/false, /*parse_special=*/true);
}

}  // namespace folio
