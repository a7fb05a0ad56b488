#include "text/chat_prompt.h"

#include <optional>
#include <string>
#include <string_view>

#include "text/jinja_unicode.h"

namespace folio {
namespace {

// Markers from Unicode's private use area: no template writes them and no tokenizer merges
// across them in a way that matters, since only their positions are used.
constexpr std::string_view kOpen = "\xEE\x80\x80";   // U+E000
constexpr std::string_view kClose = "\xEE\x80\x81";  // U+E001

std::string marker(size_t index) {
  return std::string(kOpen) + std::to_string(index) + std::string(kClose);
}

// A rendered chat, split where the markers were: pieces[0] marker[0] pieces[1] ... .
struct MarkedRender {
  std::vector<std::string> pieces;
  std::vector<size_t> messages;  // which message's content each marker stands for
};

std::optional<MarkedRender> split_markers(const std::string& text, size_t num_messages) {
  MarkedRender out;
  size_t pos = 0;
  out.pieces.emplace_back();
  while (pos < text.size()) {
    const size_t open = text.find(kOpen, pos);
    if (open == std::string::npos) break;
    const size_t close = text.find(kClose, open + kOpen.size());
    if (close == std::string::npos) return std::nullopt;
    out.pieces.back() += text.substr(pos, open - pos);
    const std::string digits = text.substr(open + kOpen.size(), close - open - kOpen.size());
    if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    const size_t index = std::stoul(digits);
    if (index >= num_messages) return std::nullopt;
    out.messages.push_back(index);
    out.pieces.emplace_back();
    pos = close + kClose.size();
  }
  out.pieces.back() += text.substr(pos);
  return out;
}

// If the template copied every content as given (or trimmed), the spans of the contents in the
// real render; else nothing.
std::optional<std::vector<TextSpan>> content_spans(const std::string& rendered, const MarkedRender& marked,
                                                   std::span<const ChatMessage> messages, bool trimmed) {
  std::string rebuilt;
  std::vector<TextSpan> spans;
  for (size_t i = 0; i < marked.messages.size(); ++i) {
    rebuilt += marked.pieces[i];
    const std::string& content = messages[marked.messages[i]].content;
    const std::string text = trimmed ? jinja::python_strip(content, nullptr, true, true) : content;
    if (!text.empty()) spans.push_back({rebuilt.size(), text.size()});
    rebuilt += text;
  }
  rebuilt += marked.pieces.back();
  if (rebuilt != rendered) return std::nullopt;
  return spans;
}

}  // namespace

Expected<std::vector<int32_t>> chat_prompt_tokens(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                                                  std::span<const ChatMessage> messages, bool add_generation_prompt,
                                                  ContentTokens content) {
  const nlohmann::json extra = {
      {"bos_token", tokenizer.bos_id() >= 0 ? tokenizer.token_to_piece(tokenizer.bos_id()) : std::string()},
      {"eos_token", tokenizer.eos_id() >= 0 ? tokenizer.token_to_piece(tokenizer.eos_id()) : std::string()}};
  Expected<std::string> rendered = chat_template.render(messages, add_generation_prompt, extra);
  if (!rendered) return Status::error("the chat template failed on these messages: " + rendered.error());
  bool any_control = false;
  for (const ChatMessage& m : messages) any_control = any_control || tokenizer.contains_control_text(m.content);
  // Nothing to keep apart (or the old behaviour asked for): the render is tokenized as it is.
  if (content == ContentTokens::kParsed || !any_control) {
    return tokenizer.encode(*rendered, /*add_special=*/false, /*parse_special=*/true);
  }
  std::vector<ChatMessage> marked_messages(messages.begin(), messages.end());
  bool markers_clash = false;
  for (size_t i = 0; i < marked_messages.size(); ++i) {
    const std::string& c = marked_messages[i].content;
    markers_clash = markers_clash || c.find(kOpen) != std::string::npos || c.find(kClose) != std::string::npos;
    marked_messages[i].content = marker(i);
  }
  const Status refused = Status::error(
      "a message holds a control token's text, and this chat template transforms message content in a way that "
      "keeps folio from telling it apart from the template's own control tokens (start the server with "
      "--special-tokens-in-content to read such texts as tokens)");
  if (markers_clash) return refused;
  Expected<std::string> with_markers = chat_template.render(marked_messages, add_generation_prompt, extra);
  if (!with_markers) return refused;
  const std::optional<MarkedRender> marked = split_markers(*with_markers, messages.size());
  if (!marked) return refused;
  for (const bool trimmed : {false, true}) {
    if (std::optional<std::vector<TextSpan>> spans = content_spans(*rendered, *marked, messages, trimmed)) {
      return tokenizer.encode(*rendered, /*add_special=*/false, /*parse_special=*/true, *spans);
    }
  }
  return refused;
}

}  // namespace folio
