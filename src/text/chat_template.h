// ChatTemplate: renders a model's Jinja2 chat template (tokenizer.chat_template in GGUF,
// chat_template in tokenizer_config.json) exactly as Hugging Face's apply_chat_template does,
// with our own small Jinja2 interpreter (src/text/jinja_*).
//
// What the template sees, as in transformers' render_jinja_template:
//   messages               list of {"role": ..., "content": ...}
//   add_generation_prompt  bool
//   tools, documents       none (unless extra_context sets them)
//   raise_exception(msg), strftime_now(fmt), namespace(...), dict(...), range(...)
//   everything in extra_context (bos_token, eos_token, ...), which may override the above.
//
// Supported Jinja2: {{ }}, {% %}, {# #}, whitespace control (-, +, trim_blocks,
// lstrip_blocks), if/elif/else, for (else, inline if filter, loop.*, unpacking), set
// (names, tuples, namespace attributes, block form), macro (positional/keyword/default
// parameters), filter blocks, break/continue, raw, generation; all expression operators with
// Python semantics, slices, inline if; filters abs attr capitalize count d default dictsort e
// escape first float indent int items join last length list lower map max min reject
// rejectattr replace reverse round safe select selectattr sort string sum title tojson trim
// unique upper wordcount; the usual tests; str methods (strip split startswith replace find
// join title ...) and dict methods (items keys values get).
//
// Not supported (parse or render fails with a Status naming the construct): extends/block/
// include/import, call blocks and caller(), recursive loops, with-blocks, macro
// *varargs/**kwargs, printf-style '%' formatting, the format filter and str.format, filters
// outside the list above, str methods outside the list (an unknown method is undefined, as
// a missing attribute). Known differences from jinja2: tuples are lists (they print as [..]
// not (..)); integers are 64-bit (overflow is an error); case mapping covers Latin, Greek and
// Cyrillic only; dict literal keys must be strings; a namespace may not be stored inside a
// namespace (that rules out reference cycles).
//
// Limits, all reported as errors: parse nesting 128, render recursion 512, 1M loop
// iterations, 64 MiB of output or of any one string, values nested 256 deep or holding 10M
// elements, context JSON nested 256 deep.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace folio {

namespace jinja {
struct Stmt;
}

struct ChatMessage {
  std::string role;
  std::string content;
};

class ChatTemplate {
 public:
  // Syntax errors come back with "line L, column C". Unknown filters and tests are reported
  // here too, as jinja2 does at compile time.
  static Expected<ChatTemplate> parse(std::string_view source);

  // extra_context: bos_token, eos_token and any other variable the template reads. Note that
  // nlohmann::json orders object keys alphabetically; pass ordered_json to render_context
  // when key order matters (tool schemas printed with tojson).
  Expected<std::string> render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                               const nlohmann::json& extra_context = {}) const;

  // Full control over the variables, e.g. messages with tool_calls: context must be an
  // object; it is rendered as is (no defaults are added).
  Expected<std::string> render_context(const nlohmann::ordered_json& context) const;

 private:
  struct Program;
  explicit ChatTemplate(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace folio
