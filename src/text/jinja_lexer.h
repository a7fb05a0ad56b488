// Jinja2 lexer, configured the way Hugging Face renders chat templates: trim_blocks=True,
// lstrip_blocks=True, keep_trailing_newline=False, default delimiters.
//
// Whitespace rules, all applied here so the parser only sees the final text:
//   {%- / {{- / {#-   strip all whitespace (newlines included) before the tag
//   -%} / -}} / -#}   strip all whitespace after the tag
//   lstrip_blocks     whitespace between a line start and {% or {# is dropped ({%+ keeps it)
//   trim_blocks       the one newline right after %} or #} is dropped (+%} / +#} keep it)
//   the source's \r\n and \r become \n and one trailing newline is dropped, as jinja2 3.x
//   does.
// {% raw %}...{% endraw %} comes out as one text token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace folio::jinja {

enum class TokenType {
  kText,           // template data between tags
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,  // text holds the unescaped value
  kInteger,
  kFloat,
  kOperator,  // text holds the operator: "+", "//", "(", "|", ...
  kEnd,
};

struct Token {
  TokenType type = TokenType::kEnd;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
  int column = 1;
};

// Errors carry "line L, column C". The last token is always kEnd.
Expected<std::vector<Token>> tokenize(std::string_view source);

}  // namespace folio::jinja
