// Internal to the Jinja interpreter: the recursive-descent parser's class, split over
// jinja_parser.cpp (statements) and jinja_expression_parser.cpp (expressions).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja_ast.h"
#include "text/jinja_lexer.h"
#include "text/jinja_parser.h"
#include "text/jinja_try.h"

namespace folio::jinja::detail {

// The parser's state and grammar, shared by jinja_parser.cpp (statements) and
// jinja_expression_parser.cpp (expressions). Internal to the interpreter.
class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  Expected<StmtList> parse_all() {
    std::string end_tag;
    JINJA_ASSIGN_OR_RETURN(StmtList body, parse_body({}, end_tag));
    return body;
  }

 private:
  // ---- token helpers ----
  const Token& current() const { return tokens_[pos_]; }
  const Token& peek(size_t ahead = 1) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  bool at_name(std::string_view name) const { return current().type == TokenType::kName && current().text == name; }
  bool at_op(std::string_view op) const { return current().type == TokenType::kOperator && current().text == op; }
  Token advance() { return tokens_[pos_ < tokens_.size() - 1 ? pos_++ : pos_]; }

  static std::string describe(const Token& token) {
    switch (token.type) {
      case TokenType::kEnd: return "end of template";
      case TokenType::kBlockEnd: return "'%}'";
      case TokenType::kVariableEnd: return "'}}'";
      case TokenType::kBlockBegin: return "'{%'";
      case TokenType::kVariableBegin: return "'{{'";
      case TokenType::kText: return "template text";
      case TokenType::kString: return "string literal";
      default: return "'" + token.text + "'";
    }
  }
  Status error(const std::string& message) const {
    return Status::error("template syntax error at line " + std::to_string(current().line) + ", column " +
                         std::to_string(current().column) + ": " + message);
  }
  Status expect_op(std::string_view op) {
    if (!at_op(op)) return error("expected '" + std::string(op) + "', got " + describe(current()));
    advance();
    return Status::ok();
  }
  Status expect_name(std::string_view name) {
    if (!at_name(name)) {
      return error("expected '" + std::string(name) + "', got " + describe(current()));
    }
    advance();
    return Status::ok();
  }
  Status expect_block_end() {
    if (current().type != TokenType::kBlockEnd) {
      return error("expected end of block tag '%}', got " + describe(current()));
    }
    advance();
    return Status::ok();
  }
  Expected<std::string> expect_identifier() {
    if (current().type != TokenType::kName) return error("expected a name, got " + describe(current()));
    return advance().text;
  }

  ExprPtr make_expr(ExprKind kind, int line) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->line = line;
    return expr;
  }

  // Depth guard shared by statements and expressions.
  struct DepthGuard {
    explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
    ~DepthGuard() { --depth_; }
    int& depth_;
  };
  Status check_depth() const {
    return depth_ > kMaxParseDepth ? error("template nests deeper than " + std::to_string(kMaxParseDepth) + " levels")
                                   : Status::ok();
  }

  // ---- statements ----
  Expected<StmtList> parse_body(std::initializer_list<std::string_view> end_tags, std::string& matched);
  Expected<std::unique_ptr<Stmt>> parse_statement();
  Expected<std::unique_ptr<Stmt>> parse_if(int line);
  Expected<std::unique_ptr<Stmt>> parse_for(int line);
  Expected<std::unique_ptr<Stmt>> parse_set(int line);
  Expected<std::unique_ptr<Stmt>> parse_macro(int line);
  Expected<std::vector<std::string>> parse_targets();
  Expected<ExprPtr> parse_filter_chain(ExprPtr operand);

  // ---- expressions, loosest binding first ----
  Expected<ExprPtr> parse_expression(bool with_condition = true);
  Expected<ExprPtr> parse_or();
  Expected<ExprPtr> parse_and();
  Expected<ExprPtr> parse_not();
  Expected<ExprPtr> parse_compare();
  Expected<ExprPtr> parse_binary(int level);
  Expected<ExprPtr> parse_unary(bool with_filter);
  Expected<ExprPtr> parse_primary();
  Expected<ExprPtr> parse_postfix(ExprPtr node);
  Expected<ExprPtr> parse_filters_and_tests(ExprPtr node);
  Status parse_call_args(Expr& call);

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;  // break/continue are only valid inside a for body
};

}  // namespace folio::jinja::detail
