#include "server/generation_plan.h"

#include "engine/request_limits.h"
#include "text/chat_prompt.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

namespace folio::server {
namespace {

constexpr int32_t kDefaultCompletionMaxTokens = 16;  // OpenAI's default for /v1/completions

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A text of more bytes than the context's tokens can stand for is too long whatever its tokens:
// refused before anyone spends time tokenizing it.
Status check_prompt_bytes(size_t bytes, const ModelInfo& model) {
  const size_t limit = static_cast<size_t>(model.context_tokens) * model.tokenizer->max_token_bytes();
  if (bytes <= limit) return Status::ok();
  return Status::error("this model's maximum context length is " + std::to_string(model.context_tokens) +
                       " tokens, but the prompt has at least " +
                       std::to_string(bytes / model.tokenizer->max_token_bytes()) + " tokens (" +
                       std::to_string(bytes) + " bytes)");
}

// default_max_tokens: the endpoint's default; none means as much as the context leaves (for
// several prompts, the shortest leftover, so that one limit fits all).
Expected<GenerationPlan> finish_plan(std::vector<std::vector<int32_t>> prompts, const GenerationOptions& options,
                                     std::optional<int32_t> default_max_tokens, ApiKind kind, const ModelInfo& model) {
  if (model.default_max_tokens) default_max_tokens = model.default_max_tokens;
  std::optional<int32_t> max_tokens = options.max_tokens ? options.max_tokens : default_max_tokens;
  int64_t longest = 0;
  for (const std::vector<int32_t>& prompt : prompts)
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompt.size()));
  for (const std::vector<int32_t>& prompt : prompts) {
    // The endpoint's default shrinks to fit; a limit the client gave must fit as given.
    const std::optional<int32_t> asked = options.max_tokens;
    if (Status s = check_request_length(static_cast<int64_t>(prompt.size()), asked, model.context_tokens); !s) return s;
  }
  const int32_t room = static_cast<int32_t>(model.context_tokens - longest);
  GenerationPlan plan;
  plan.prompts = std::move(prompts);
  plan.params = options.params;
  plan.params.max_tokens = std::min(max_tokens.value_or(room), room);
  plan.identity.kind = kind;
  plan.identity.id = new_response_id(kind == ApiKind::kChat ? "chatcmpl-" : "cmpl-");
  plan.identity.created = unix_seconds();
  plan.identity.model = model.name;
  plan.identity.n = options.params.n;
  plan.identity.num_prompts = static_cast<int32_t>(plan.prompts.size());
  plan.identity.stream = options.stream;
  plan.identity.include_usage = options.include_usage;
  plan.identity.logprobs = options.params.sampling.logprobs;
  return plan;
}

}  // namespace

std::string new_response_id(const char* prefix) {
  static const uint64_t process_salt = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  static std::atomic<uint64_t> counter{0};
  const uint64_t n = counter.fetch_add(1);
  // splitmix64 of salt + counter: distinct for every counter value.
  uint64_t z = process_salt + n * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  char hex[32];
  std::snprintf(hex, sizeof(hex), "%016llx%08llx", static_cast<unsigned long long>(z),
                static_cast<unsigned long long>(n & 0xffffffffull));
  return std::string(prefix) + hex;
}

Expected<GenerationPlan> plan_completion(const CompletionRequest& request, const ModelInfo& model) {
  std::vector<std::vector<int32_t>> prompts;
  for (const CompletionPrompt& p : request.prompts) {
    if (!p.text) {
      if (Status s = check_token_ids(p.tokens, model.tokenizer->vocab_size()); !s) return s;
      prompts.push_back(p.tokens);
    } else {
      // As `folio run` encodes a prompt: BOS as the model's metadata says, special-token
      // texts kept as text.
      if (Status s = check_prompt_bytes(p.text->size(), model); !s) return s;
      prompts.push_back(model.tokenizer->encode(*p.text, /*add_special=*/true, /*parse_special=*/false));
    }
  }
  Expected<GenerationPlan> plan =
      finish_plan(std::move(prompts), request.options, kDefaultCompletionMaxTokens, ApiKind::kCompletion, model);
  // Echo gives each prompt back as sent: the text itself, or the token ids' text.
  if (plan && request.options.echo) {
    for (size_t i = 0; i < request.prompts.size(); ++i) {
      const CompletionPrompt& p = request.prompts[i];
      plan->identity.echo.push_back(p.text ? *p.text : model.tokenizer->decode(plan->prompts[i]));
    }
  }
  return plan;
}

Expected<std::vector<int32_t>> chat_prompt_tokens(const std::vector<ChatMessage>& messages, const ModelInfo& model,
                                                  bool add_generation_prompt) {
  if (!model.chat_template) return Status::error("the model has no chat template; use /v1/completions");
  return folio::chat_prompt_tokens(*model.chat_template, *model.tokenizer, messages, add_generation_prompt,
                                   model.content_tokens);
}

Expected<GenerationPlan> plan_chat_completion(const ChatCompletionRequest& request, const ModelInfo& model) {
  size_t content_bytes = 0;
  for (const ChatMessage& m : request.messages) content_bytes += m.content.size();
  if (Status s = check_prompt_bytes(content_bytes, model); !s) return s;
  Expected<std::vector<int32_t>> prompt = chat_prompt_tokens(request.messages, model, /*add_generation_prompt=*/true);
  if (!prompt) return prompt.status();
  // No max_tokens in a chat request: as much as the context leaves.
  std::vector<std::vector<int32_t>> prompts;
  prompts.push_back(std::move(prompt).value());
  return finish_plan(std::move(prompts), request.options, std::nullopt, ApiKind::kChat, model);
}

}  // namespace folio::server
