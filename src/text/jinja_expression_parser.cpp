// Expressions, loosest binding first, following jinja2's parser.py.
#include "text/jinja_parser_impl.h"

namespace folio::jinja::detail {

Expected<ExprPtr> Parser::parse_expression(bool with_condition) {
  DepthGuard guard(depth_);
  JINJA_RETURN_IF_ERROR(check_depth());
  JINJA_ASSIGN_OR_RETURN(ExprPtr node, parse_or());
  while (with_condition && at_name("if")) {
    const int line = current().line;
    advance();
    auto conditional = make_expr(ExprKind::kCondition, line);
    JINJA_ASSIGN_OR_RETURN(ExprPtr condition, parse_or());
    ExprPtr otherwise;
    if (at_name("else")) {
      advance();
      JINJA_ASSIGN_OR_RETURN(otherwise, parse_expression());
    }
    conditional->args.push_back(std::move(node));
    conditional->args.push_back(std::move(condition));
    conditional->args.push_back(std::move(otherwise));
    node = std::move(conditional);
  }
  return node;
}

Expected<ExprPtr> Parser::parse_or() {
  JINJA_ASSIGN_OR_RETURN(ExprPtr left, parse_and());
  while (at_name("or")) {
    auto node = make_expr(ExprKind::kBinary, advance().line);
    node->op = "or";
    JINJA_ASSIGN_OR_RETURN(ExprPtr right, parse_and());
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

Expected<ExprPtr> Parser::parse_and() {
  JINJA_ASSIGN_OR_RETURN(ExprPtr left, parse_not());
  while (at_name("and")) {
    auto node = make_expr(ExprKind::kBinary, advance().line);
    node->op = "and";
    JINJA_ASSIGN_OR_RETURN(ExprPtr right, parse_not());
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

Expected<ExprPtr> Parser::parse_not() {
  if (!at_name("not")) return parse_compare();
  DepthGuard guard(depth_);
  JINJA_RETURN_IF_ERROR(check_depth());
  auto node = make_expr(ExprKind::kUnary, advance().line);
  node->op = "not";
  JINJA_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
  node->args.push_back(std::move(operand));
  return node;
}

Expected<ExprPtr> Parser::parse_compare() {
  const int line = current().line;
  JINJA_ASSIGN_OR_RETURN(ExprPtr first, parse_binary(0));
  ExprPtr compare;
  while (true) {
    std::string op;
    if (current().type == TokenType::kOperator &&
        (at_op("==") || at_op("!=") || at_op("<") || at_op("<=") || at_op(">") || at_op(">="))) {
      op = advance().text;
    } else if (at_name("in")) {
      advance();
      op = "in";
    } else if (at_name("not") && peek().type == TokenType::kName && peek().text == "in") {
      advance();
      advance();
      op = "not in";
    } else {
      break;
    }
    if (!compare) {
      compare = make_expr(ExprKind::kCompare, line);
      compare->args.push_back(std::move(first));
    }
    JINJA_ASSIGN_OR_RETURN(ExprPtr operand, parse_binary(0));
    compare->ops.push_back(std::move(op));
    compare->args.push_back(std::move(operand));
  }
  return compare ? std::move(compare) : std::move(first);
}

// jinja2's arithmetic levels, loosest first: + -, then ~, then * / // %, then **.
Expected<ExprPtr> Parser::parse_binary(int level) {
  static const std::vector<std::vector<std::string_view>> kLevels = {{"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
  if (level == static_cast<int>(kLevels.size())) return parse_unary(true);
  JINJA_ASSIGN_OR_RETURN(ExprPtr left, parse_binary(level + 1));
  while (current().type == TokenType::kOperator &&
         std::find(kLevels[level].begin(), kLevels[level].end(), current().text) != kLevels[level].end()) {
    auto node = make_expr(ExprKind::kBinary, current().line);
    node->op = advance().text;
    JINJA_ASSIGN_OR_RETURN(ExprPtr right, parse_binary(level + 1));
    node->args.push_back(std::move(left));
    node->args.push_back(std::move(right));
    left = std::move(node);
  }
  return left;
}

Expected<ExprPtr> Parser::parse_unary(bool with_filter) {
  DepthGuard guard(depth_);
  JINJA_RETURN_IF_ERROR(check_depth());
  ExprPtr node;
  if (at_op("-") || at_op("+")) {
    node = make_expr(ExprKind::kUnary, current().line);
    node->op = advance().text;
    JINJA_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
    node->args.push_back(std::move(operand));
  } else {
    JINJA_ASSIGN_OR_RETURN(node, parse_primary());
  }
  JINJA_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
  if (with_filter) return parse_filters_and_tests(std::move(node));
  return node;
}

Expected<ExprPtr> Parser::parse_primary() {
  const Token& token = current();
  const int line = token.line;
  if (token.type == TokenType::kName) {
    advance();
    auto node = make_expr(ExprKind::kLiteral, line);
    if (token.text == "true" || token.text == "True") {
      node->literal = Value(true);
    } else if (token.text == "false" || token.text == "False") {
      node->literal = Value(false);
    } else if (token.text == "none" || token.text == "None") {
      node->literal = Value(None{});
    } else {
      node->kind = ExprKind::kName;
      node->name = token.text;
    }
    return node;
  }
  if (token.type == TokenType::kString) {
    std::string text;
    while (current().type == TokenType::kString) text += advance().text;  // 'a' 'b' == 'ab'
    auto node = make_expr(ExprKind::kLiteral, line);
    node->literal = Value(std::move(text));
    return node;
  }
  if (token.type == TokenType::kInteger || token.type == TokenType::kFloat) {
    auto node = make_expr(ExprKind::kLiteral, line);
    node->literal = token.type == TokenType::kInteger ? Value(token.int_value) : Value(token.float_value);
    advance();
    return node;
  }
  if (at_op("(")) {
    advance();
    auto tuple = make_expr(ExprKind::kList, line);
    bool is_tuple = at_op(")");  // () is an empty tuple
    while (!at_op(")")) {
      JINJA_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
      tuple->args.push_back(std::move(item));
      if (!at_op(",")) break;
      advance();
      is_tuple = true;
    }
    JINJA_RETURN_IF_ERROR(expect_op(")"));
    if (!is_tuple) return std::move(tuple->args[0]);  // plain parentheses
    return tuple;
  }
  if (at_op("[") || at_op("{")) {
    const bool is_dict = at_op("{");
    const std::string close = is_dict ? "}" : "]";
    advance();
    auto node = make_expr(is_dict ? ExprKind::kDict : ExprKind::kList, line);
    while (!at_op(close)) {
      JINJA_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
      node->args.push_back(std::move(item));
      if (is_dict) {
        JINJA_RETURN_IF_ERROR(expect_op(":"));
        JINJA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
        node->args.push_back(std::move(value));
      }
      if (!at_op(",")) break;
      advance();
    }
    JINJA_RETURN_IF_ERROR(expect_op(close));
    return node;
  }
  return error("unexpected " + describe(token));
}

Expected<ExprPtr> Parser::parse_postfix(ExprPtr node) {
  while (true) {
    const int line = current().line;
    if (at_op(".")) {
      advance();
      if (current().type == TokenType::kInteger) {  // foo.0 is foo[0]
        auto item = make_expr(ExprKind::kGetItem, line);
        auto index = make_expr(ExprKind::kLiteral, line);
        index->literal = Value(advance().int_value);
        item->args.push_back(std::move(node));
        item->args.push_back(std::move(index));
        node = std::move(item);
        continue;
      }
      auto attr = make_expr(ExprKind::kGetAttr, line);
      JINJA_ASSIGN_OR_RETURN(attr->name, expect_identifier());
      attr->args.push_back(std::move(node));
      node = std::move(attr);
    } else if (at_op("[")) {
      advance();
      std::vector<ExprPtr> parts(3);  // start, stop, step
      int colons = 0;
      while (!at_op("]")) {
        if (at_op(":")) {
          if (++colons > 2) return error("too many ':' in slice");
          advance();
          continue;
        }
        if (parts[colons]) return error("expected ':' or ']' in subscript");
        JINJA_ASSIGN_OR_RETURN(parts[colons], parse_expression());
      }
      advance();
      if (colons == 0) {
        if (!parts[0]) return error("empty subscript");
        auto item = make_expr(ExprKind::kGetItem, line);
        item->args.push_back(std::move(node));
        item->args.push_back(std::move(parts[0]));
        node = std::move(item);
      } else {
        auto slice = make_expr(ExprKind::kSlice, line);
        slice->args.push_back(std::move(node));
        for (auto& part : parts) slice->args.push_back(std::move(part));
        node = std::move(slice);
      }
    } else if (at_op("(")) {
      auto call = make_expr(ExprKind::kCall, line);
      call->args.push_back(std::move(node));
      JINJA_RETURN_IF_ERROR(parse_call_args(*call));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

Status Parser::parse_call_args(Expr& call) {
  JINJA_RETURN_IF_ERROR(expect_op("("));
  while (!at_op(")")) {
    if (at_op("*") || at_op("**")) return error("*args and **kwargs in calls are not supported");
    if (current().type == TokenType::kName && peek().type == TokenType::kOperator && peek().text == "=") {
      std::string name = advance().text;
      advance();
      JINJA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      call.kwargs.emplace_back(std::move(name), std::move(value));
    } else {
      if (!call.kwargs.empty()) return error("positional argument follows keyword argument");
      JINJA_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
      call.args.push_back(std::move(value));
    }
    if (!at_op(",")) break;
    advance();
  }
  return expect_op(")");
}

Expected<ExprPtr> Parser::parse_filters_and_tests(ExprPtr node) {
  while (true) {
    if (at_op("|")) {
      JINJA_ASSIGN_OR_RETURN(node, parse_filter_chain(std::move(node)));
    } else if (at_name("is")) {
      auto test = make_expr(ExprKind::kTest, advance().line);
      if (at_name("not")) {
        advance();
        test->negated = true;
      }
      JINJA_ASSIGN_OR_RETURN(test->name, expect_identifier());
      test->args.push_back(std::move(node));
      const TokenType type = current().type;
      if (at_op("(")) {
        JINJA_RETURN_IF_ERROR(parse_call_args(*test));
      } else if ((type == TokenType::kName || type == TokenType::kString || type == TokenType::kInteger ||
                  type == TokenType::kFloat || at_op("[") || at_op("{")) &&
                 !at_name("else") && !at_name("or") && !at_name("and")) {
        // `x is divisibleby 3`, `x is sameas none`: one argument without parentheses.
        JINJA_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
        JINJA_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
        test->args.push_back(std::move(arg));
      }
      node = std::move(test);
    } else if (at_op("(")) {
      auto call = make_expr(ExprKind::kCall, current().line);
      call->args.push_back(std::move(node));
      JINJA_RETURN_IF_ERROR(parse_call_args(*call));
      node = std::move(call);
    } else {
      return node;
    }
  }
}

}  // namespace folio::jinja::detail
