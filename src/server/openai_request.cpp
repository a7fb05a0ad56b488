#include "server/openai_request.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>

namespace folio::server {
namespace {

using nlohmann::json;

// A field's value, or nullptr when absent or JSON null (OpenAI's "not given").
const json* field(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

Status type_error(const char* key, const char* expected) {
  return Status::error(std::string("'") + key + "' must be " + expected);
}

// Reads a number in [lo, hi] into out; absent leaves out alone.
Status read_number(const json& object, const char* key, double lo, double hi, float& out) {
  const json* value = field(object, key);
  if (value == nullptr) return Status::ok();
  if (!value->is_number()) return type_error(key, "a number");
  const double x = value->get<double>();
  if (!(x >= lo && x <= hi)) {
    return Status::error("'" + std::string(key) + "' must be in [" + json(lo).dump() + ", " + json(hi).dump() +
                         "], got " + value->dump());
  }
  out = static_cast<float>(x);
  return Status::ok();
}

// An integer in [lo, hi]; 3.0 counts as an integer, 3.5 does not.
Expected<std::optional<int64_t>> read_integer(const json& object, const char* key, int64_t lo, int64_t hi) {
  const json* value = field(object, key);
  if (value == nullptr) return std::optional<int64_t>();
  int64_t x = 0;
  if (value->is_number_unsigned()) {
    const uint64_t u = value->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return Status::error("'" + std::string(key) + "' is out of range, got " + value->dump());
    }
    x = static_cast<int64_t>(u);
  } else if (value->is_number_integer()) {
    x = value->get<int64_t>();
  } else if (value->is_number_float()) {
    const double d = value->get<double>();
    if (!(std::trunc(d) == d && std::fabs(d) < 9.0e18)) return type_error(key, "an integer");
    x = static_cast<int64_t>(d);
  } else {
    return type_error(key, "an integer");
  }
  if (x < lo || x > hi) {
    return Status::error("'" + std::string(key) + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "], got " + value->dump());
  }
  return std::optional<int64_t>(x);
}

Status read_bool(const json& object, const char* key, bool& out) {
  const json* value = field(object, key);
  if (value == nullptr) return Status::ok();
  if (!value->is_boolean()) return type_error(key, "a boolean");
  out = value->get<bool>();
  return Status::ok();
}

Status read_stop(const json& object, std::vector<std::string>& out) {
  const json* value = field(object, "stop");
  if (value == nullptr) return Status::ok();
  if (value->is_string()) {
    out.push_back(value->get<std::string>());
  } else if (value->is_array()) {
    if (value->size() > kMaxStopStrings) {
      return Status::error("'stop' may hold at most " + std::to_string(kMaxStopStrings) + " strings");
    }
    for (const json& s : *value) {
      if (!s.is_string()) return type_error("stop", "a string or a list of strings");
      out.push_back(s.get<std::string>());
    }
  } else {
    return type_error("stop", "a string or a list of strings");
  }
  for (const std::string& s : out) {
    if (s.empty()) return Status::error("'stop' strings must not be empty");
  }
  return Status::ok();
}

Expected<std::vector<int32_t>> read_token_ids(const json& array, const char* key) {
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (const json& t : array) {
    if (!t.is_number_integer()) return type_error(key, "a list of token ids (integers)");
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return Status::error("'" + std::string(key) + "' holds an out-of-range token id " + t.dump());
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

// Fields folio does not implement: refused, so a client never gets less than it asked for.
Status refuse_unsupported(const json& body) {
  for (const char* key : {"suffix", "tools", "functions", "logit_bias"}) {
    if (field(body, key) != nullptr) return Status::error("'" + std::string(key) + "' is not supported");
  }
  const json* best_of = field(body, "best_of");
  if (best_of != nullptr && !(best_of->is_number_integer() && best_of->get<int64_t>() == 1)) {
    return Status::error("'best_of' other than 1 is not supported; use 'n'");
  }
  return Status::ok();
}

// Completions: "logprobs": N (the sampled token's logprob and the N most likely), "echo".
// Chat: "logprobs": true, "top_logprobs": N. Both become the sampler's logprobs = N.
Status read_logprobs(const json& body, bool chat, GenerationOptions& options) {
  int& logprobs = options.params.sampling.logprobs;
  const int64_t max = SamplingParams::kMaxLogprobs;
  if (!chat) {
    Expected<std::optional<int64_t>> n = read_integer(body, "logprobs", 0, max);
    if (!n) return n.status();
    if (*n) logprobs = static_cast<int>(**n);
    if (field(body, "top_logprobs") != nullptr)
      return Status::error("'top_logprobs' is a chat field; use 'logprobs': N");
    if (Status s = read_bool(body, "echo", options.echo); !s) return s;
    if (options.echo && logprobs >= 0) {
      return Status::error("'echo' together with 'logprobs' (prompt logprobs) is not supported");
    }
    return Status::ok();
  }
  bool wanted = false;
  if (Status s = read_bool(body, "logprobs", wanted); !s) return s;
  Expected<std::optional<int64_t>> top = read_integer(body, "top_logprobs", 0, max);
  if (!top) return top.status();
  if (*top && !wanted) return Status::error("'top_logprobs' needs 'logprobs': true");
  if (wanted) logprobs = static_cast<int>(top->value_or(0));
  if (field(body, "echo") != nullptr) return Status::error("'echo' is a completions field");
  return Status::ok();
}

Expected<GenerationOptions> parse_options(const json& body, bool chat, const SamplingParams& defaults) {
  if (Status s = refuse_unsupported(body); !s) return s;
  GenerationOptions options;
  options.params.sampling = defaults;
  if (Status s = read_logprobs(body, chat, options); !s) return s;
  if (const json* model = field(body, "model")) {
    if (!model->is_string()) return type_error("model", "a string");
    options.model = model->get<std::string>();
  }
  if (const json* user = field(body, "user"); user != nullptr && !user->is_string())
    return type_error("user", "a string");

  SamplingParams& sampling = options.params.sampling;
  if (Status s = read_number(body, "temperature", 0.0, 2.0, sampling.temperature); !s) return s;
  if (Status s = read_number(body, "top_p", 0.0, 1.0, sampling.top_p); !s) return s;
  if (sampling.top_p == 0.0f) return Status::error("'top_p' must be in (0, 1], got 0");
  if (Status s = read_number(body, "min_p", 0.0, 1.0, sampling.min_p); !s) return s;
  if (Status s = read_number(body, "presence_penalty", -2.0, 2.0, sampling.presence_penalty); !s) return s;
  if (Status s = read_number(body, "frequency_penalty", -2.0, 2.0, sampling.frequency_penalty); !s) return s;
  if (Status s = read_number(body, "repetition_penalty", 0.0, 100.0, sampling.repetition_penalty); !s) return s;
  if (!(sampling.repetition_penalty > 0.0f)) return Status::error("'repetition_penalty' must be > 0");

  Expected<std::optional<int64_t>> top_k = read_integer(body, "top_k", -1, std::numeric_limits<int32_t>::max());
  if (!top_k) return top_k.status();
  if (*top_k) sampling.top_k = static_cast<int>(**top_k);
  Expected<std::optional<int64_t>> seed =
      read_integer(body, "seed", std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  if (!seed) return seed.status();
  if (*seed) sampling.seed = static_cast<uint64_t>(**seed);
  Expected<std::optional<int64_t>> n = read_integer(body, "n", 1, kMaxParallelSamples);
  if (!n) return n.status();
  if (*n) options.params.n = static_cast<int32_t>(**n);

  // Chat prefers max_completion_tokens; max_tokens is its deprecated spelling.
  static constexpr const char* kMaxTokenKeys[] = {"max_tokens", "max_completion_tokens"};
  for (const char* key : std::span(kMaxTokenKeys, chat ? 2 : 1)) {
    Expected<std::optional<int64_t>> max_tokens = read_integer(body, key, 1, kMaxRequestTokens);
    if (!max_tokens) return max_tokens.status();
    if (*max_tokens) options.max_tokens = static_cast<int32_t>(**max_tokens);
  }

  if (Status s = read_stop(body, options.params.stop); !s) return s;
  if (const json* ids = field(body, "stop_token_ids")) {
    if (!ids->is_array()) return type_error("stop_token_ids", "a list of token ids (integers)");
    Expected<std::vector<int32_t>> tokens = read_token_ids(*ids, "stop_token_ids");
    if (!tokens) return tokens.status();
    options.params.stop_token_ids = std::move(tokens).value();
  }
  if (Status s = read_bool(body, "ignore_eos", options.params.ignore_eos); !s) return s;
  if (Status s = read_bool(body, "stream", options.stream); !s) return s;
  if (const json* stream_options = field(body, "stream_options")) {
    if (!stream_options->is_object()) return type_error("stream_options", "an object");
    if (!options.stream) return Status::error("'stream_options' is only allowed when 'stream' is true");
    if (Status s = read_bool(*stream_options, "include_usage", options.include_usage); !s) return s;
  }
  if (Status s = sampling.validate(); !s) return s;
  return options;
}

Expected<json> parse_body(std::string_view body) {
  // A raw NUL is never valid JSON (inside strings it must be escaped), and nlohmann's lexer
  // would take it for the end of the input, accepting whatever follows it.
  if (const size_t nul = body.find('\0'); nul != std::string_view::npos) {
    return Status::error("the request body is not valid JSON (a NUL byte at offset " + std::to_string(nul) + ")");
  }
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Status::error("the request body is not valid JSON");
  if (!parsed.is_object()) return Status::error("the request body must be a JSON object");
  return parsed;
}

Expected<std::string> message_content(const json& message, size_t i) {
  const std::string where = "'messages[" + std::to_string(i) + "].content'";
  const json* content = field(message, "content");
  if (content == nullptr) return std::string();  // an assistant turn may have none
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) return Status::error(where + " must be a string or a list of text parts");
  std::string text;
  for (const json& part : *content) {
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (type == nullptr || !type->is_string() || type->get<std::string>() != "text") {
      return Status::error(where + ": only parts of type 'text' are supported");
    }
    const json* part_text = field(part, "text");
    if (part_text == nullptr || !part_text->is_string())
      return Status::error(where + ": a text part needs a string 'text'");
    if (!text.empty()) text += "\n";
    text += part_text->get<std::string>();
  }
  return text;
}

Expected<std::vector<ChatMessage>> read_messages(const json& object) {
  const json* messages = field(object, "messages");
  if (messages == nullptr) return Status::error("'messages' is required");
  if (!messages->is_array() || messages->empty()) return type_error("messages", "a non-empty list of messages");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    if (!message.is_object()) return Status::error("'messages[" + std::to_string(i) + "]' must be an object");
    const json* role = field(message, "role");
    if (role == nullptr || !role->is_string()) {
      return Status::error("'messages[" + std::to_string(i) + "].role' must be a string");
    }
    Expected<std::string> content = message_content(message, i);
    if (!content) return content.status();
    out.push_back({role->get<std::string>(), std::move(content).value()});
  }
  return out;
}

}  // namespace

Expected<CompletionRequest> parse_completion_request(std::string_view body, const SamplingParams& defaults) {
  Expected<json> parsed = parse_body(body);
  if (!parsed) return parsed.status();
  const json& object = *parsed;
  Expected<GenerationOptions> options = parse_options(object, /*chat=*/false, defaults);
  if (!options) return options.status();
  CompletionRequest request;
  request.options = std::move(options).value();

  const json* prompt = field(object, "prompt");
  if (prompt == nullptr) return Status::error("'prompt' is required");
  // One prompt: a string or a list of token ids. Several: a list of those.
  auto read_one = [](const json& p) -> Expected<CompletionPrompt> {
    CompletionPrompt one;
    if (p.is_string()) {
      one.text = p.get<std::string>();
      if (one.text->empty()) return Status::error("'prompt' must not be empty");
      return one;
    }
    if (p.is_array() && !p.empty() && p[0].is_number()) {
      Expected<std::vector<int32_t>> tokens = read_token_ids(p, "prompt");
      if (!tokens) return tokens.status();
      one.tokens = std::move(tokens).value();
      return one;
    }
    return type_error("prompt", "a non-empty string, a list of token ids, or a list of those");
  };
  const bool batch = prompt->is_array() && !prompt->empty() && ((*prompt)[0].is_string() || (*prompt)[0].is_array());
  if (!batch) {
    Expected<CompletionPrompt> one = read_one(*prompt);
    if (!one) return one.status();
    request.prompts.push_back(std::move(one).value());
  } else {
    if (prompt->size() > kMaxPrompts) {
      return Status::error("'prompt' may hold at most " + std::to_string(kMaxPrompts) + " prompts");
    }
    for (const json& p : *prompt) {
      Expected<CompletionPrompt> one = read_one(p);
      if (!one) return one.status();
      request.prompts.push_back(std::move(one).value());
    }
  }
  if (static_cast<int64_t>(request.prompts.size()) * request.options.params.n > kMaxChoices) {
    return Status::error("prompts x n may be at most " + std::to_string(kMaxChoices));
  }
  return request;
}

Expected<ChatCompletionRequest> parse_chat_completion_request(std::string_view body, const SamplingParams& defaults) {
  Expected<json> parsed = parse_body(body);
  if (!parsed) return parsed.status();
  const json& object = *parsed;
  Expected<GenerationOptions> options = parse_options(object, /*chat=*/true, defaults);
  if (!options) return options.status();
  ChatCompletionRequest request;
  request.options = std::move(options).value();

  Expected<std::vector<ChatMessage>> messages = read_messages(object);
  if (!messages) return messages.status();
  request.messages = std::move(messages).value();
  return request;
}

Expected<TokenizeRequest> parse_tokenize_request(std::string_view body) {
  Expected<json> parsed = parse_body(body);
  if (!parsed) return parsed.status();
  const json& object = *parsed;
  TokenizeRequest request;
  if (const json* model = field(object, "model")) {
    if (!model->is_string()) return type_error("model", "a string");
    request.model = model->get<std::string>();
  }
  if (Status s = read_bool(object, "add_special_tokens", request.add_special_tokens); !s) return s;
  if (Status s = read_bool(object, "add_generation_prompt", request.add_generation_prompt); !s) return s;
  if (Status s = read_bool(object, "return_token_strs", request.return_token_strs); !s) return s;
  const json* prompt = field(object, "prompt");
  const bool has_messages = field(object, "messages") != nullptr;
  if ((prompt != nullptr) == has_messages) return Status::error("give exactly one of 'prompt' and 'messages'");
  if (prompt != nullptr) {
    if (!prompt->is_string()) return type_error("prompt", "a string");
    request.prompt = prompt->get<std::string>();
    return request;
  }
  Expected<std::vector<ChatMessage>> messages = read_messages(object);
  if (!messages) return messages.status();
  request.messages = std::move(messages).value();
  return request;
}

Expected<DetokenizeRequest> parse_detokenize_request(std::string_view body) {
  Expected<json> parsed = parse_body(body);
  if (!parsed) return parsed.status();
  const json& object = *parsed;
  DetokenizeRequest request;
  if (const json* model = field(object, "model")) {
    if (!model->is_string()) return type_error("model", "a string");
    request.model = model->get<std::string>();
  }
  const json* tokens = field(object, "tokens");
  if (tokens == nullptr) return Status::error("'tokens' is required");
  if (!tokens->is_array()) return type_error("tokens", "a list of token ids (integers)");
  Expected<std::vector<int32_t>> ids = read_token_ids(*tokens, "tokens");
  if (!ids) return ids.status();
  request.tokens = std::move(ids).value();
  return request;
}

}  // namespace folio::server
