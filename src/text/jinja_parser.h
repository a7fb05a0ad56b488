// Jinja2 parser: tokens -> statement tree. It follows jinja2's own grammar (parser.py) so
// that precedence matches: filters bind tighter than any operator (`a + b | trim` trims b),
// `not` binds looser than comparisons, ** is left-associative, `x if c` without else yields
// undefined.
#pragma once

#include <string_view>

#include "core/status.h"
#include "text/jinja_ast.h"

namespace folio::jinja {

// Nesting deeper than this (blocks inside blocks, or parentheses) is refused rather than
// risking the stack: chat templates nest a handful of levels.
inline constexpr int kMaxParseDepth = 128;

Expected<StmtList> parse_template(std::string_view source);

}  // namespace folio::jinja
