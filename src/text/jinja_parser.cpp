#include "text/jinja_parser.h"

#include "text/jinja_parser_impl.h"

namespace folio::jinja {
namespace detail {

Expected<StmtList> Parser::parse_body(std::initializer_list<std::string_view> end_tags, std::string& matched) {
  DepthGuard guard(depth_);
  JINJA_RETURN_IF_ERROR(check_depth());
  StmtList body;
  while (true) {
    const Token& token = current();
    if (token.type == TokenType::kEnd) {
      if (end_tags.size() == 0) return body;
      return error("unexpected end of template, expected '" + std::string(*end_tags.begin()) + "'");
    }
    if (token.type == TokenType::kText) {
      auto stmt = std::make_unique<Stmt>();
      stmt->kind = StmtKind::kText;
      stmt->line = token.line;
      stmt->text = advance().text;
      body.push_back(std::move(stmt));
    } else if (token.type == TokenType::kVariableBegin) {
      advance();
      auto stmt = std::make_unique<Stmt>();
      stmt->kind = StmtKind::kOutput;
      stmt->line = token.line;
      JINJA_ASSIGN_OR_RETURN(stmt->expr, parse_expression());
      if (current().type != TokenType::kVariableEnd) {
        return error("expected end of print statement '}}', got " + describe(current()));
      }
      advance();
      body.push_back(std::move(stmt));
    } else if (token.type == TokenType::kBlockBegin) {
      const Token& name = peek();
      if (name.type == TokenType::kName && std::find(end_tags.begin(), end_tags.end(), name.text) != end_tags.end()) {
        advance();
        matched = advance().text;
        return body;
      }
      advance();
      JINJA_ASSIGN_OR_RETURN(auto stmt, parse_statement());
      body.push_back(std::move(stmt));
    } else {
      return error("unexpected " + describe(token));
    }
  }
}

Expected<std::unique_ptr<Stmt>> Parser::parse_statement() {
  if (current().type != TokenType::kName) return error("expected a tag name, got " + describe(current()));
  const int line = current().line;
  const std::string tag = advance().text;
  if (tag == "if") return parse_if(line);
  if (tag == "for") return parse_for(line);
  if (tag == "set") return parse_set(line);
  if (tag == "macro") return parse_macro(line);
  auto stmt = std::make_unique<Stmt>();
  stmt->line = line;
  std::string end;
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) return error("'" + tag + "' outside of a for loop");
    stmt->kind = tag == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    JINJA_RETURN_IF_ERROR(expect_block_end());
    return stmt;
  }
  if (tag == "filter") {
    stmt->kind = StmtKind::kFilterBlock;
    JINJA_ASSIGN_OR_RETURN(stmt->expr, parse_filter_chain(nullptr));
    JINJA_RETURN_IF_ERROR(expect_block_end());
    JINJA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endfilter"}, end));
    JINJA_RETURN_IF_ERROR(expect_block_end());
    return stmt;
  }
  if (tag == "generation") {
    stmt->kind = StmtKind::kGeneration;
    JINJA_RETURN_IF_ERROR(expect_block_end());
    JINJA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endgeneration"}, end));
    JINJA_RETURN_IF_ERROR(expect_block_end());
    return stmt;
  }
  pos_--;  // point the error at the tag name
  return error("unknown or unsupported tag '" + tag + "'");
}

Expected<std::unique_ptr<Stmt>> Parser::parse_if(int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::kIf;
  stmt->line = line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr condition, parse_expression());
  JINJA_RETURN_IF_ERROR(expect_block_end());
  std::string end;
  while (true) {
    JINJA_ASSIGN_OR_RETURN(StmtList body, parse_body({"elif", "else", "endif"}, end));
    stmt->branches.emplace_back(std::move(condition), std::move(body));
    if (end == "elif") {
      JINJA_ASSIGN_OR_RETURN(condition, parse_expression());
      JINJA_RETURN_IF_ERROR(expect_block_end());
      continue;
    }
    JINJA_RETURN_IF_ERROR(expect_block_end());
    if (end == "else") {
      JINJA_ASSIGN_OR_RETURN(StmtList otherwise, parse_body({"endif"}, end));
      stmt->branches.emplace_back(nullptr, std::move(otherwise));
      JINJA_RETURN_IF_ERROR(expect_block_end());
    }
    return stmt;
  }
}

Expected<std::vector<std::string>> Parser::parse_targets() {
  // `x`, `k, v`, or `(k, v)`.
  const bool parenthesized = at_op("(");
  if (parenthesized) advance();
  std::vector<std::string> targets;
  while (true) {
    JINJA_ASSIGN_OR_RETURN(std::string name, expect_identifier());
    targets.push_back(std::move(name));
    if (!at_op(",")) break;
    advance();
  }
  if (parenthesized) {
    JINJA_RETURN_IF_ERROR(expect_op(")"));
  }
  return targets;
}

Expected<std::unique_ptr<Stmt>> Parser::parse_for(int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::kFor;
  stmt->line = line;
  JINJA_ASSIGN_OR_RETURN(stmt->targets, parse_targets());
  JINJA_RETURN_IF_ERROR(expect_name("in"));
  // No inline if-expression here, so that `for x in xs if cond` is the loop filter.
  JINJA_ASSIGN_OR_RETURN(stmt->expr, parse_expression(/*with_condition=*/false));
  if (at_name("if")) {
    advance();
    JINJA_ASSIGN_OR_RETURN(stmt->condition, parse_expression());
  }
  if (at_name("recursive")) return error("recursive for loops are not supported");
  JINJA_RETURN_IF_ERROR(expect_block_end());
  std::string end;
  ++loop_depth_;
  auto body = parse_body({"endfor", "else"}, end);
  --loop_depth_;
  if (!body) return body.status();
  stmt->body = std::move(*body);
  JINJA_RETURN_IF_ERROR(expect_block_end());
  if (end == "else") {
    JINJA_ASSIGN_OR_RETURN(stmt->else_body, parse_body({"endfor"}, end));
    JINJA_RETURN_IF_ERROR(expect_block_end());
  }
  return stmt;
}

Expected<std::unique_ptr<Stmt>> Parser::parse_set(int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->line = line;
  if (current().type == TokenType::kName && peek().type == TokenType::kOperator && peek().text == ".") {
    stmt->targets.push_back(advance().text);  // `set ns.attr = value`
    advance();
    JINJA_ASSIGN_OR_RETURN(stmt->attribute, expect_identifier());
  } else {
    JINJA_ASSIGN_OR_RETURN(stmt->targets, parse_targets());
  }
  if (at_op("=")) {
    advance();
    stmt->kind = StmtKind::kSet;
    JINJA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
    if (at_op(",")) {  // `set a, b = 1, 2`: the right side is a tuple
      auto tuple = make_expr(ExprKind::kList, line);
      tuple->args.push_back(std::move(value));
      while (at_op(",")) {
        advance();
        JINJA_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
        tuple->args.push_back(std::move(item));
      }
      value = std::move(tuple);
    }
    stmt->expr = std::move(value);
    JINJA_RETURN_IF_ERROR(expect_block_end());
    return stmt;
  }
  // Block form: {% set x %}...{% endset %}, optionally {% set x | filter %}.
  if (stmt->targets.size() != 1 || !stmt->attribute.empty()) {
    return error("block assignment needs exactly one plain name");
  }
  stmt->kind = StmtKind::kSetBlock;
  if (at_op("|")) {
    JINJA_ASSIGN_OR_RETURN(stmt->expr, parse_filter_chain(nullptr));
  }
  JINJA_RETURN_IF_ERROR(expect_block_end());
  std::string end;
  JINJA_ASSIGN_OR_RETURN(stmt->body, parse_body({"endset"}, end));
  JINJA_RETURN_IF_ERROR(expect_block_end());
  return stmt;
}

Expected<std::unique_ptr<Stmt>> Parser::parse_macro(int line) {
  auto stmt = std::make_unique<Stmt>();
  stmt->kind = StmtKind::kMacro;
  stmt->line = line;
  JINJA_ASSIGN_OR_RETURN(stmt->name, expect_identifier());
  JINJA_RETURN_IF_ERROR(expect_op("("));
  while (!at_op(")")) {
    JINJA_ASSIGN_OR_RETURN(std::string param, expect_identifier());
    ExprPtr default_value;
    if (at_op("=")) {
      advance();
      JINJA_ASSIGN_OR_RETURN(default_value, parse_expression());
    }
    stmt->params.emplace_back(std::move(param), std::move(default_value));
    if (!at_op(",")) break;
    advance();
  }
  JINJA_RETURN_IF_ERROR(expect_op(")"));
  JINJA_RETURN_IF_ERROR(expect_block_end());
  std::string end;
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;  // a macro body is not inside the caller's loop
  auto body = parse_body({"endmacro"}, end);
  loop_depth_ = saved_loop_depth;
  if (!body) return body.status();
  stmt->body = std::move(*body);
  JINJA_RETURN_IF_ERROR(expect_block_end());
  return stmt;
}

Expected<ExprPtr> Parser::parse_filter_chain(ExprPtr operand) {
  // `name(args) | name ...` as in {% filter upper %} or {% set x | trim %}.
  bool first = operand == nullptr;
  ExprPtr node = std::move(operand);
  while (first || at_op("|")) {
    if (!first || at_op("|")) advance();
    first = false;
    auto filter = make_expr(ExprKind::kFilter, current().line);
    JINJA_ASSIGN_OR_RETURN(filter->name, expect_identifier());
    filter->args.push_back(std::move(node));
    if (at_op("(")) {
      JINJA_RETURN_IF_ERROR(parse_call_args(*filter));
    }
    node = std::move(filter);
  }
  return node;
}

}  // namespace detail

Expected<StmtList> parse_template(std::string_view source) {
  JINJA_ASSIGN_OR_RETURN(std::vector<Token> tokens, tokenize(source));
  detail::Parser parser(std::move(tokens));
  return parser.parse_all();
}

}  // namespace folio::jinja
