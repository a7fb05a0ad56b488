// From a parsed OpenAI request to what the engine runs: the prompt's token ids (the chat
// template rendered and tokenized), the engine's RequestParams with the endpoint's defaults,
// and the identity every response chunk repeats. Errors are the client's (400).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/request.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "text/chat_prompt.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace folio::server {

// What the planner needs to know about the model being served.
struct ModelInfo {
  const Tokenizer* tokenizer = nullptr;
  std::optional<ChatTemplate> chat_template;  // the model's; none: chat completions are refused
  std::string name;                           // what clients call it (--served-model-name)
  int32_t context_tokens = 0;                 // prompt + output may not exceed it
  // Control-token texts in chat message content: plain text (the default), or tokens as vLLM
  // and llama.cpp read them (`--special-tokens-in-content`).
  ContentTokens content_tokens = ContentTokens::kText;
  // What a request that does not say gets: the model's generation_config.json sampling values
  // and max_new_tokens (vLLM's --generation-config auto), else folio's defaults.
  SamplingParams default_sampling;
  std::optional<int32_t> default_max_tokens;
};

struct GenerationPlan {
  std::vector<std::vector<int32_t>> prompts;  // one sequence group (n samples) each
  RequestParams params;
  ResponseIdentity identity;
};

Expected<GenerationPlan> plan_completion(const CompletionRequest& request, const ModelInfo& model);
Expected<GenerationPlan> plan_chat_completion(const ChatCompletionRequest& request, const ModelInfo& model);

// The messages rendered by the model's chat template and tokenized, as a chat completion sees them.
Expected<std::vector<int32_t>> chat_prompt_tokens(const std::vector<ChatMessage>& messages, const ModelInfo& model,
                                                  bool add_generation_prompt);

// "cmpl-<24 hex digits>" / "chatcmpl-...": unique within the process, unpredictable across.
std::string new_response_id(const char* prefix);

}  // namespace folio::server
