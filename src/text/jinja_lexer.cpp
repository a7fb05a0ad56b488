#include "text/jinja_lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <string>

#include "text/jinja_value.h"

namespace folio::jinja {
namespace {

// jinja2 (3.x) splits the source on \r\n, \r and \n, joins the lines with \n and, with
// keep_trailing_newline=False, drops one trailing newline.
std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      out += '\n';
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Length in bytes of the Python whitespace character at text[i], or 0.
size_t space_length(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c < 0x80) return is_python_space(c) ? 1 : 0;
  const size_t length = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 0;
  if (length == 0 || i + length > text.size()) return 0;
  const std::vector<char32_t> cp = decode_utf8(text.substr(i, length));
  return cp.size() == 1 && is_python_space(cp[0]) ? length : 0;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Expected<std::vector<Token>> run();

 private:
  Status error_at(size_t offset, const std::string& message) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    const size_t line = static_cast<size_t>(it - line_starts_.begin()) + 1;
    const size_t column = offset - *it + 1;
    return Status::error("template syntax error at line " + std::to_string(line) + ", column " +
                         std::to_string(column) + ": " + message);
  }
  Token make(TokenType type, size_t offset, std::string text = {}) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
    Token token;
    token.type = type;
    token.text = std::move(text);
    token.line = static_cast<int>(it - line_starts_.begin()) + 1;
    token.column = static_cast<int>(offset - *it) + 1;
    return token;
  }
  size_t skip_spaces(size_t pos) const {
    while (pos < src_.size()) {
      const size_t length = space_length(src_, pos);
      if (length == 0) break;
      pos += length;
    }
    return pos;
  }
  void emit_text(std::string text, size_t offset) {
    if (!text.empty()) tokens_.push_back(make(TokenType::kText, offset, std::move(text)));
  }
  // Applies {%- / lstrip_blocks to the text before a tag.
  std::string strip_before_tag(std::string text, size_t text_begin, char modifier, bool is_variable) const;
  // Lexes the inside of {{ }} or {% %} starting at pos; returns the offset after the closer
  // and sets strip_after when the closer was -}} / -%}.
  Expected<size_t> lex_tag(size_t pos, bool is_block, size_t tag_offset, char& close_modifier);
  Expected<size_t> lex_string(size_t pos);
  size_t lex_number(size_t pos);
  Expected<size_t> lex_raw(size_t pos);

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

std::string Lexer::strip_before_tag(std::string text, size_t text_begin, char modifier, bool is_variable) const {
  if (modifier == '-') {
    return python_strip(text, nullptr, false, true);
  }
  if (modifier == '+' || is_variable) return text;
  // lstrip_blocks: whitespace between the line start and the tag is dropped. The line starts inside
  // this text after its last newline, or at its beginning when the text itself starts a line
  // (template start, or right after a consumed newline).
  const size_t newline = text.rfind('\n');
  const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
  const bool line_starting = text_begin == 0 || src_[text_begin - 1] == '\n';
  if (newline == std::string::npos && !line_starting) return text;
  // jinja2 checks the rest of the line against \s+, i.e. any Unicode whitespace.
  for (size_t i = line_begin; i < text.size();) {
    const size_t length = space_length(text, i);
    if (length == 0) return text;
    i += length;
  }
  text.resize(line_begin);
  return text;
}

Expected<std::vector<Token>> Lexer::run() {
  size_t pos = 0;
  while (pos < src_.size()) {
    size_t tag = src_.find('{', pos);
    while (tag != std::string::npos && tag + 1 < src_.size() && src_[tag + 1] != '{' && src_[tag + 1] != '%' &&
           src_[tag + 1] != '#') {
      tag = src_.find('{', tag + 1);
    }
    if (tag == std::string::npos || tag + 1 >= src_.size()) {
      emit_text(src_.substr(pos), pos);
      break;
    }
    const char kind = src_[tag + 1];
    const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
    const bool has_modifier = modifier == '-' || modifier == '+';
    emit_text(strip_before_tag(src_.substr(pos, tag - pos), pos, has_modifier ? modifier : '\0', kind == '{'), pos);
    size_t inner = tag + 2 + (has_modifier ? 1 : 0);

    if (kind == '#') {
      const size_t close = src_.find("#}", inner);
      if (close == std::string::npos) return error_at(tag, "comment is not closed with #}");
      pos = close + 2;
      const char close_modifier = close > inner ? src_[close - 1] : '\0';
      if (close_modifier == '-') {
        pos = skip_spaces(pos);
      } else if (close_modifier != '+' && pos < src_.size() && src_[pos] == '\n') {
        ++pos;  // trim_blocks
      }
      continue;
    }

    const bool is_block = kind == '%';
    const size_t first_token = tokens_.size();
    tokens_.push_back(make(is_block ? TokenType::kBlockBegin : TokenType::kVariableBegin, tag));
    char close_modifier = '\0';
    Expected<size_t> after = lex_tag(inner, is_block, tag, close_modifier);
    if (!after) return after.status();
    pos = *after;
    // {% raw %}: the lexer owns it; the parser never sees the tag. jinja2 applies no
    // trim_blocks to the opening raw tag, only -%}.
    const bool raw = is_block && tokens_.size() == first_token + 3 &&
                     tokens_[first_token + 1].type == TokenType::kName && tokens_[first_token + 1].text == "raw";
    if (close_modifier == '-') {
      pos = skip_spaces(pos);
    } else if (is_block && !raw && close_modifier != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;  // trim_blocks
    }
    if (raw) {
      tokens_.resize(first_token);
      Expected<size_t> raw_end = lex_raw(pos);
      if (!raw_end) return raw_end.status();
      pos = *raw_end;
    }
  }
  tokens_.push_back(make(TokenType::kEnd, src_.size()));
  return std::move(tokens_);
}

Expected<size_t> Lexer::lex_raw(size_t pos) {
  // Find {% endraw %} (any whitespace control); everything before it is literal text.
  size_t search = pos;
  while (true) {
    const size_t tag = src_.find("{%", search);
    if (tag == std::string::npos) return error_at(pos, "{% raw %} is not closed by {% endraw %}");
    size_t i = tag + 2;
    const char modifier = i < src_.size() ? src_[i] : '\0';
    if (modifier == '-' || modifier == '+') ++i;
    while (i < src_.size() && std::isspace(static_cast<unsigned char>(src_[i]))) ++i;
    if (src_.compare(i, 6, "endraw") != 0) {
      search = tag + 2;
      continue;
    }
    i += 6;
    while (i < src_.size() && std::isspace(static_cast<unsigned char>(src_[i]))) ++i;
    char close = '\0';
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) close = src_[i++];
    if (src_.compare(i, 2, "%}") != 0) return error_at(i, "expected %} after endraw");
    emit_text(
        strip_before_tag(src_.substr(pos, tag - pos), pos, modifier == '-' || modifier == '+' ? modifier : '\0', false),
        pos);
    i += 2;
    if (close == '-') return skip_spaces(i);
    if (close != '+' && i < src_.size() && src_[i] == '\n') ++i;
    return i;
  }
}

Expected<size_t> Lexer::lex_tag(size_t pos, bool is_block, size_t tag_offset, char& close_modifier) {
  std::vector<char> brackets;  // closers we wait for; the tag can only end when empty
  const char* closer = is_block ? "%}" : "}}";
  while (true) {
    while (pos < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos]))) ++pos;
    if (pos >= src_.size()) {
      return error_at(tag_offset, is_block ? "block tag is not closed with %}" : "variable tag is not closed with }}");
    }
    if (brackets.empty()) {
      for (char modifier : {'-', '+', '\0'}) {
        if (modifier == '+' && !is_block) continue;
        const size_t at = pos + (modifier ? 1 : 0);
        if ((!modifier || src_[pos] == modifier) && src_.compare(at, 2, closer) == 0) {
          close_modifier = modifier;
          tokens_.push_back(make(is_block ? TokenType::kBlockEnd : TokenType::kVariableEnd, pos));
          return at + 2;
        }
      }
    }
    const char c = src_[pos];
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = pos;
      while (end < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[end])) || src_[end] == '_')) ++end;
      tokens_.push_back(make(TokenType::kName, pos, src_.substr(pos, end - pos)));
      pos = end;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      pos = lex_number(pos);
    } else if (c == '\'' || c == '"') {
      Expected<size_t> end = lex_string(pos);
      if (!end) return end.status();
      pos = *end;
    } else {
      static const char* kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
      std::string op(1, c);
      for (const char* two : kTwoChar) {
        if (src_.compare(pos, 2, two) == 0) op = two;
      }
      if (op.size() == 1 && std::string_view("+-*/%~<>=()[]{},.:|").find(c) == std::string_view::npos) {
        return error_at(pos, std::string("unexpected character '") + c + "'");
      }
      if (c == '(' || c == '[' || c == '{') {
        brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (c == ')' || c == ']' || c == '}') {
        if (brackets.empty() || brackets.back() != c) {
          return error_at(pos, std::string("unexpected '") + c + "'");
        }
        brackets.pop_back();
      }
      tokens_.push_back(make(TokenType::kOperator, pos, op));
      pos += op.size();
    }
  }
}

size_t Lexer::lex_number(size_t pos) {
  // jinja2: digits with optional _ separators, then an optional fraction and/or exponent.
  auto digits = [&](size_t p) {
    while (p < src_.size() &&
           (std::isdigit(static_cast<unsigned char>(src_[p])) ||
            (src_[p] == '_' && p + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[p + 1])))))
      ++p;
    return p;
  };
  const size_t start = pos;
  size_t end = digits(pos);
  bool is_float = false;
  if (end + 1 < src_.size() && src_[end] == '.' && std::isdigit(static_cast<unsigned char>(src_[end + 1]))) {
    end = digits(end + 1);
    is_float = true;
  }
  if (end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
    size_t exp = end + 1;
    if (exp < src_.size() && (src_[exp] == '+' || src_[exp] == '-')) ++exp;
    if (exp < src_.size() && std::isdigit(static_cast<unsigned char>(src_[exp]))) {
      end = digits(exp);
      is_float = true;
    }
  }
  std::string text = src_.substr(start, end - start);
  std::erase(text, '_');
  Token token = make(is_float ? TokenType::kFloat : TokenType::kInteger, start, text);
  if (is_float) {
    token.float_value = std::strtod(text.c_str(), nullptr);
  } else {
    errno = 0;
    const unsigned long long value = std::strtoull(text.c_str(), nullptr, 10);
    // Python ints are unbounded; past int64 we fall back to a float rather than wrap.
    if (errno == ERANGE || value > static_cast<unsigned long long>(INT64_MAX)) {
      token.type = TokenType::kFloat;
      token.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      token.int_value = static_cast<int64_t>(value);
    }
  }
  tokens_.push_back(std::move(token));
  return end;
}

Expected<size_t> Lexer::lex_string(size_t pos) {
  // Python's unicode-escape decoding, which jinja2 applies to string literals: \n \t \\ \'
  // \xhh \uhhhh \Uhhhhhhhh \ooo ...; an unknown escape such as \d keeps its backslash.
  const char quote = src_[pos];
  std::string value;
  size_t i = pos + 1;
  auto hex = [&](size_t start, size_t count, char32_t& out) {
    if (start + count > src_.size()) return false;
    out = 0;
    for (size_t k = 0; k < count; ++k) {
      const char h = src_[start + k];
      if (!std::isxdigit(static_cast<unsigned char>(h))) return false;
      out = out * 16 +
            static_cast<char32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
    }
    return true;
  };
  while (i < src_.size() && src_[i] != quote) {
    if (src_[i] != '\\' || i + 1 >= src_.size()) {
      value += src_[i++];
      continue;
    }
    const char e = src_[i + 1];
    char32_t cp = 0;
    switch (e) {
      case '\n': i += 2; break;  // backslash-newline is a line continuation
      case '\\':
        value += '\\';
        i += 2;
        break;
      case '\'':
        value += '\'';
        i += 2;
        break;
      case '"':
        value += '"';
        i += 2;
        break;
      case 'a':
        value += '\a';
        i += 2;
        break;
      case 'b':
        value += '\b';
        i += 2;
        break;
      case 'f':
        value += '\f';
        i += 2;
        break;
      case 'n':
        value += '\n';
        i += 2;
        break;
      case 'r':
        value += '\r';
        i += 2;
        break;
      case 't':
        value += '\t';
        i += 2;
        break;
      case 'v':
        value += '\v';
        i += 2;
        break;
      case 'x':
      case 'u':
      case 'U': {
        const size_t count = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        if (!hex(i + 2, count, cp) || cp > 0x10FFFF) {
          return error_at(i, std::string("invalid \\") + e + " escape in string literal");
        }
        append_utf8(value, cp);
        i += 2 + count;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          size_t k = i + 1;
          while (k < src_.size() && k < i + 4 && src_[k] >= '0' && src_[k] <= '7') {
            cp = cp * 8 + static_cast<char32_t>(src_[k] - '0');
            ++k;
          }
          append_utf8(value, cp);
          i = k;
        } else {
          value += '\\';
          ++i;
        }
    }
  }
  if (i >= src_.size()) return error_at(pos, "string literal is not closed");
  tokens_.push_back(make(TokenType::kString, pos, std::move(value)));
  return i + 1;
}

}  // namespace

Expected<std::vector<Token>> tokenize(std::string_view source) {
  Lexer lexer(normalize_newlines(source));
  return lexer.run();
}

}  // namespace folio::jinja
