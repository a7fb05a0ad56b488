// The syntax tree of a parsed template. Nodes are plain structs with one kind tag each; the
// few fields a kind uses are listed next to it. Every node keeps its source line for runtime
// error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja_value.h"

namespace folio::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtList = std::vector<std::unique_ptr<Stmt>>;

enum class ExprKind {
  kLiteral,    // literal
  kName,       // name
  kList,       // args = items (tuples are lists too)
  kDict,       // args = key0, value0, key1, value1, ...
  kGetAttr,    // args[0] = object, name = attribute
  kGetItem,    // args[0] = object, args[1] = index
  kSlice,      // args[0] = object, args[1..3] = start, stop, step (nullptr when absent)
  kCall,       // args[0] = callee, args[1..] = positional, kwargs = keyword arguments
  kFilter,     // args[0] = operand (nullptr inside {% filter %}), name, args[1..], kwargs
  kTest,       // args[0] = operand, name, args[1..], negated
  kUnary,      // op in {"not", "-", "+"}, args[0]
  kBinary,     // op in {"+", "-", "*", "/", "//", "%", "**", "~", "and", "or"}, args[0..1]
  kCompare,    // args[0] compared by ops[i] with args[i + 1]: a < b < c chains
  kCondition,  // args = {then, condition, otherwise (nullptr: undefined)}
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::string op;
  std::vector<std::string> ops;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
};

enum class StmtKind {
  kText,         // text
  kOutput,       // expr: {{ expr }}
  kIf,           // branches (condition, body); a final branch with a null condition is `else`
  kFor,          // targets, expr = iterable, condition = inline `if` filter, body, else_body
  kSet,          // targets (or attribute: targets = {namespace}, attribute), expr
  kSetBlock,     // targets[0], body; filter (optional) applied to the captured text
  kMacro,        // name, params (name, default or nullptr), body
  kFilterBlock,  // filter chain in expr (innermost operand nullptr), body
  kBreak,
  kContinue,
  kGeneration,  // HF's {% generation %}: renders its body unchanged
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr condition;
  std::vector<std::string> targets;
  std::string attribute;
  std::vector<std::pair<ExprPtr, StmtList>> branches;
  std::vector<std::pair<std::string, ExprPtr>> params;
  std::string name;
  StmtList body;
  StmtList else_body;
};

}  // namespace folio::jinja
