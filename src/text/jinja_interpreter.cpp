#include "text/jinja_interpreter.h"

#include <unordered_map>

#include "text/jinja_builtins.h"
#include "text/jinja_try.h"

namespace folio::jinja {
namespace {

class Interpreter {
 public:
  explicit Interpreter(const RenderLimits& limits) : limits_(limits) {}

  Expected<std::string> run(const StmtList& program, const Dict& context) {
    scopes_.emplace_back();
    for (auto& [name, value] : make_globals().items) scopes_.back()[name] = std::move(value);
    scopes_.emplace_back();
    for (const auto& [name, value] : context.items) scopes_.back()[name] = value;
    std::string output;
    out_ = &output;
    JINJA_RETURN_IF_ERROR(exec_list(program).status());
    return output;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = std::unordered_map<std::string, Value>;

  // RAII for the depth counter and for scopes, so every early error return unwinds them.
  struct DepthGuard {
    explicit DepthGuard(int& depth) : depth_(depth) { ++depth_; }
    ~DepthGuard() { --depth_; }
    int& depth_;
  };
  struct ScopeGuard {
    ScopeGuard(std::vector<Scope>& scopes, Scope scope) : scopes_(scopes) { scopes_.push_back(std::move(scope)); }
    ~ScopeGuard() { scopes_.pop_back(); }
    std::vector<Scope>& scopes_;
  };

  Status check_depth() const {
    if (depth_ <= limits_.max_depth) return Status::ok();
    return Status::error("template recursion deeper than " + std::to_string(limits_.max_depth) + " levels");
  }
  // Prefixes the first error on its way out with the line of the innermost node that failed.
  Status locate(const Status& status, int line) {
    if (located_) return status;
    located_ = true;
    return Status::error("template error at line " + std::to_string(line) + ": " + status.message());
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      const auto found = it->find(name);
      if (found != it->end()) return found->second;
    }
    return Value::undefined("'" + name + "' is undefined");
  }

  Status append(std::string_view text) {
    out_->append(text);
    if (out_->size() > limits_.max_output_bytes) {
      return Status::error("template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
    return Status::ok();
  }

  Expected<std::string> capture(const StmtList& body) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    Expected<Flow> flow = exec_list(body);
    out_ = saved;
    if (!flow) return flow.status();
    return buffer;
  }

  Status bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& value) {
    if (targets.size() == 1) {
      scope[targets[0]] = value;
      return Status::ok();
    }
    JINJA_ASSIGN_OR_RETURN(List items, iterate(value));
    if (items.size() != targets.size()) {
      return Status::error(items.size() > targets.size()
                               ? "too many values to unpack (expected " + std::to_string(targets.size()) + ")"
                               : "not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                                     std::to_string(items.size()) + ")");
    }
    for (size_t i = 0; i < targets.size(); ++i) scope[targets[i]] = std::move(items[i]);
    return Status::ok();
  }

  Expected<Flow> exec_list(const StmtList& body) {
    for (const auto& stmt : body) {
      JINJA_ASSIGN_OR_RETURN(Flow flow, exec(*stmt));
      if (flow != Flow::kNormal) return flow;
    }
    return Flow::kNormal;
  }

  Expected<Flow> exec(const Stmt& stmt) {
    DepthGuard guard(depth_);
    Expected<Flow> flow = check_depth().is_ok() ? exec_inner(stmt) : Expected<Flow>(check_depth());
    if (!flow) return locate(flow.status(), stmt.line);
    return flow;
  }

  Expected<Flow> exec_inner(const Stmt& stmt);
  Expected<Flow> exec_for(const Stmt& stmt);
  Expected<Value> call_macro(const Stmt& macro, CallArgs& args);

  Expected<Value> eval(const Expr& expr) {
    DepthGuard guard(depth_);
    Expected<Value> value = check_depth().is_ok() ? eval_inner(expr) : Expected<Value>(check_depth());
    // Bounds on what a value may grow to, so that walks over it (print, ==, tojson) and its
    // destruction stay bounded in stack and time.
    if (value && value->depth() > kMaxValueDepth) {
      value = Status::error("value nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
    } else if (value && value->tree_size() > kMaxValueNodes) {
      value = Status::error("value has more than " + std::to_string(kMaxValueNodes) + " elements");
    }
    if (!value) return locate(value.status(), expr.line);
    return value;
  }
  Expected<Value> eval_inner(const Expr& expr);
  Expected<Value> eval_call(const Expr& expr);
  Expected<Value> eval_filter(const Expr& expr, const Value* block_input);
  Expected<Value> eval_subscript(const Expr& expr);
  Expected<CallArgs> eval_args(const Expr& expr, size_t first_positional);

  RenderLimits limits_;
  std::vector<Scope> scopes_;  // [0] builtins, [1] render context, then loop/macro scopes
  std::string* out_ = nullptr;
  int depth_ = 0;
  int64_t iterations_ = 0;
  bool located_ = false;
};

Expected<Interpreter::Flow> Interpreter::exec_inner(const Stmt& stmt) {
  switch (stmt.kind) {
    case StmtKind::kText: JINJA_RETURN_IF_ERROR(append(stmt.text)); return Flow::kNormal;
    case StmtKind::kOutput: {
      JINJA_ASSIGN_OR_RETURN(Value value, eval(*stmt.expr));
      JINJA_RETURN_IF_ERROR(append(to_str(value)));
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      for (const auto& [condition, body] : stmt.branches) {
        bool taken = condition == nullptr;
        if (!taken) {
          JINJA_ASSIGN_OR_RETURN(Value value, eval(*condition));
          taken = value.truthy();
        }
        if (taken) return exec_list(body);
      }
      return Flow::kNormal;
    case StmtKind::kFor: return exec_for(stmt);
    case StmtKind::kSet: {
      JINJA_ASSIGN_OR_RETURN(Value value, eval(*stmt.expr));
      if (!stmt.attribute.empty()) {
        Value target = lookup(stmt.targets[0]);
        if (!target.is_namespace()) {
          return Status::error("cannot assign attribute on non-namespace object '" + stmt.targets[0] + "'");
        }
        if (value.contains_namespace()) {
          return Status::error("a namespace cannot be stored inside a namespace");
        }
        target.namespace_attributes().set(stmt.attribute, std::move(value));
        return Flow::kNormal;
      }
      JINJA_RETURN_IF_ERROR(bind_targets(scopes_.back(), stmt.targets, value));
      return Flow::kNormal;
    }
    case StmtKind::kSetBlock: {
      JINJA_ASSIGN_OR_RETURN(std::string text, capture(stmt.body));
      Value value(std::move(text));
      if (stmt.expr) {
        JINJA_ASSIGN_OR_RETURN(value, eval_filter(*stmt.expr, &value));
      }
      scopes_.back()[stmt.targets[0]] = std::move(value);
      return Flow::kNormal;
    }
    case StmtKind::kMacro: {
      const Stmt* macro = &stmt;
      scopes_.back()[stmt.name] = Value(std::make_shared<const Function>(
          Function{stmt.name, [this, macro](CallArgs& args) { return call_macro(*macro, args); }}));
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      JINJA_ASSIGN_OR_RETURN(std::string text, capture(stmt.body));
      const Value input(std::move(text));
      JINJA_ASSIGN_OR_RETURN(Value value, eval_filter(*stmt.expr, &input));
      JINJA_RETURN_IF_ERROR(append(to_str(value)));
      return Flow::kNormal;
    }
    case StmtKind::kBreak: return Flow::kBreak;
    case StmtKind::kContinue: return Flow::kContinue;
    case StmtKind::kGeneration: return exec_list(stmt.body);
  }
  return Flow::kNormal;
}

Expected<Interpreter::Flow> Interpreter::exec_for(const Stmt& stmt) {
  JINJA_ASSIGN_OR_RETURN(Value iterable, eval(*stmt.expr));
  JINJA_ASSIGN_OR_RETURN(List items, iterate(iterable));
  if (stmt.condition) {
    // The inline `if` filters before the loop runs, so loop.index/length/last count only
    // the items that pass (jinja2 does the same).
    List kept;
    for (Value& item : items) {
      Scope scope;
      JINJA_RETURN_IF_ERROR(bind_targets(scope, stmt.targets, item));
      ScopeGuard guard(scopes_, std::move(scope));
      JINJA_ASSIGN_OR_RETURN(Value pass, eval(*stmt.condition));
      if (pass.truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec_list(stmt.else_body);

  auto index = std::make_shared<int64_t>(0);
  const Value cycle(std::make_shared<const Function>(
      Function{"cycle", [index](CallArgs& args) -> Expected<Value> {
                 if (args.positional.empty()) return Status::error("loop.cycle() needs at least one value");
                 return args.positional[static_cast<size_t>(*index) % args.positional.size()];
               }}));
  const int64_t length = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < length; ++i) {
    if (++iterations_ > limits_.max_loop_iterations) {
      return Status::error("template loops ran more than " + std::to_string(limits_.max_loop_iterations) +
                           " iterations");
    }
    *index = i;
    Dict loop;
    loop.items = {{"index", Value(i + 1)},
                  {"index0", Value(i)},
                  {"revindex", Value(length - i)},
                  {"revindex0", Value(length - i - 1)},
                  {"first", Value(i == 0)},
                  {"last", Value(i == length - 1)},
                  {"length", Value(length)},
                  {"depth", Value(1)},
                  {"depth0", Value(0)},
                  {"cycle", cycle}};
    if (i > 0) loop.items.emplace_back("previtem", items[static_cast<size_t>(i - 1)]);
    if (i + 1 < length) loop.items.emplace_back("nextitem", items[static_cast<size_t>(i + 1)]);
    Scope scope;
    scope["loop"] = Value(std::move(loop));
    JINJA_RETURN_IF_ERROR(bind_targets(scope, stmt.targets, items[static_cast<size_t>(i)]));
    ScopeGuard guard(scopes_, std::move(scope));
    JINJA_ASSIGN_OR_RETURN(Flow flow, exec_list(stmt.body));
    if (flow == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Expected<Value> Interpreter::call_macro(const Stmt& macro, CallArgs& args) {
  DepthGuard guard(depth_);
  JINJA_RETURN_IF_ERROR(check_depth());
  if (args.positional.size() > macro.params.size()) {
    return Status::error("macro '" + macro.name + "' takes not more than " + std::to_string(macro.params.size()) +
                         " argument(s)");
  }
  Scope scope;
  std::vector<bool> given(macro.params.size(), false);
  for (size_t i = 0; i < args.positional.size(); ++i) {
    scope[macro.params[i].first] = args.positional[i];
    given[i] = true;
  }
  for (auto& [name, value] : args.keyword) {
    size_t i = 0;
    while (i < macro.params.size() && macro.params[i].first != name) ++i;
    if (i == macro.params.size()) {
      return Status::error("macro '" + macro.name + "' takes no keyword argument '" + name + "'");
    }
    scope[name] = value;
    given[i] = true;
  }
  for (size_t i = 0; i < macro.params.size(); ++i) {
    if (given[i]) continue;
    const auto& [name, default_expr] = macro.params[i];
    if (default_expr) {
      JINJA_ASSIGN_OR_RETURN(scope[name], eval(*default_expr));
    } else {
      scope[name] = Value::undefined("parameter '" + name + "' was not provided");
    }
  }
  ScopeGuard scope_guard(scopes_, std::move(scope));
  JINJA_ASSIGN_OR_RETURN(std::string text, capture(macro.body));
  return Value(std::move(text));
}

Expected<CallArgs> Interpreter::eval_args(const Expr& expr, size_t first_positional) {
  CallArgs args;
  for (size_t i = first_positional; i < expr.args.size(); ++i) {
    JINJA_ASSIGN_OR_RETURN(Value value, eval(*expr.args[i]));
    args.positional.push_back(std::move(value));
  }
  for (const auto& [name, value_expr] : expr.kwargs) {
    JINJA_ASSIGN_OR_RETURN(Value value, eval(*value_expr));
    args.keyword.emplace_back(name, std::move(value));
  }
  return args;
}

Expected<Value> Interpreter::eval_call(const Expr& expr) {
  const Expr& callee_expr = *expr.args[0];
  JINJA_ASSIGN_OR_RETURN(CallArgs args, eval_args(expr, 1));
  Value callee;
  if (callee_expr.kind == ExprKind::kGetAttr) {
    JINJA_ASSIGN_OR_RETURN(Value object, eval(*callee_expr.args[0]));
    if (object.is_undefined()) return Status::error(object.undefined_hint());
    bool found = false;
    Expected<Value> result = call_method(object, callee_expr.name, args, found);
    if (found) return result;
    callee = get_attribute(object, callee_expr.name);
  } else {
    JINJA_ASSIGN_OR_RETURN(callee, eval(callee_expr));
  }
  if (callee.is_function()) return callee.as_function().call(args);
  if (callee.is_undefined()) return Status::error(callee.undefined_hint());
  return Status::error("'" + callee.type_name() + "' object is not callable");
}

Expected<Value> Interpreter::eval_filter(const Expr& expr, const Value* block_input) {
  Value operand;
  if (!expr.args[0]) {
    operand = *block_input;  // {% filter %} / {% set x | f %}: the captured text
  } else if (block_input && expr.args[0]->kind == ExprKind::kFilter) {
    JINJA_ASSIGN_OR_RETURN(operand, eval_filter(*expr.args[0], block_input));
  } else {
    JINJA_ASSIGN_OR_RETURN(operand, eval(*expr.args[0]));
  }
  JINJA_ASSIGN_OR_RETURN(CallArgs args, eval_args(expr, 1));
  return apply_filter(expr.name, operand, args);
}

Expected<Value> Interpreter::eval_subscript(const Expr& expr) {
  JINJA_ASSIGN_OR_RETURN(Value object, eval(*expr.args[0]));
  if (object.is_undefined()) return Status::error(object.undefined_hint());
  if (expr.kind == ExprKind::kGetAttr) return get_attribute(object, expr.name);
  if (expr.kind == ExprKind::kGetItem) {
    JINJA_ASSIGN_OR_RETURN(Value index, eval(*expr.args[1]));
    if (index.is_string()) return get_attribute(object, index.as_string());
    if ((object.is_list() || object.is_string()) && (index.is_int() || index.is_bool())) {
      const bool is_list = object.is_list();
      const std::vector<char32_t> cps = is_list ? std::vector<char32_t>{} : decode_utf8(object.as_string());
      const int64_t size = is_list ? static_cast<int64_t>(object.as_list().size()) : static_cast<int64_t>(cps.size());
      int64_t i = index.as_int();
      if (i < 0) i += size;
      if (i < 0 || i >= size) {
        return Value::undefined("'" + object.type_name() + " object' has no element " + std::to_string(index.as_int()));
      }
      if (is_list) return object.as_list()[static_cast<size_t>(i)];
      std::string one;
      append_utf8(one, cps[static_cast<size_t>(i)]);
      return Value(std::move(one));
    }
    return Value::undefined("'" + object.type_name() + " object' has no element " + to_str(index));
  }
  // Slice: Python semantics, negative indices and steps included.
  int64_t bounds[3] = {0, 0, 1};
  bool given[3] = {false, false, false};
  for (int k = 0; k < 3; ++k) {
    if (!expr.args[k + 1]) continue;
    JINJA_ASSIGN_OR_RETURN(Value bound, eval(*expr.args[k + 1]));
    if (bound.is_none()) continue;
    if (!bound.is_int() && !bound.is_bool()) {
      return Status::error("slice indices must be integers or None");
    }
    bounds[k] = bound.as_int();
    given[k] = true;
  }
  const int64_t step = bounds[2];
  if (step == 0) return Status::error("slice step cannot be zero");
  if (!object.is_list() && !object.is_string()) {
    return Status::error("'" + object.type_name() + "' object is not subscriptable");
  }
  const std::vector<char32_t> cps = object.is_string() ? decode_utf8(object.as_string()) : std::vector<char32_t>{};
  const int64_t size =
      object.is_list() ? static_cast<int64_t>(object.as_list().size()) : static_cast<int64_t>(cps.size());
  auto clamp = [&](int64_t v, bool present, int64_t fallback) {
    if (!present) return fallback;
    if (v < 0) v += size;
    if (step > 0) return std::clamp<int64_t>(v, 0, size);
    return std::clamp<int64_t>(v, -1, size - 1);
  };
  const int64_t start = clamp(bounds[0], given[0], step > 0 ? 0 : size - 1);
  const int64_t stop = clamp(bounds[1], given[1], step > 0 ? size : -1);
  List list_out;
  std::u32string string_out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (object.is_list())
      list_out.push_back(object.as_list()[static_cast<size_t>(i)]);
    else
      string_out.push_back(cps[static_cast<size_t>(i)]);
  }
  if (object.is_list()) return Value(std::move(list_out));
  return Value(encode_utf8(string_out));
}

Expected<Value> Interpreter::eval_inner(const Expr& expr) {
  switch (expr.kind) {
    case ExprKind::kLiteral: return expr.literal;
    case ExprKind::kName: return lookup(expr.name);
    case ExprKind::kList: {
      List items;
      for (const auto& item : expr.args) {
        JINJA_ASSIGN_OR_RETURN(Value value, eval(*item));
        items.push_back(std::move(value));
      }
      return Value(std::move(items));
    }
    case ExprKind::kDict: {
      Dict dict;
      for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
        JINJA_ASSIGN_OR_RETURN(Value key, eval(*expr.args[i]));
        if (!key.is_string()) return Status::error("only string keys are supported in dict literals");
        JINJA_ASSIGN_OR_RETURN(Value value, eval(*expr.args[i + 1]));
        dict.set(key.as_string(), std::move(value));
      }
      return Value(std::move(dict));
    }
    case ExprKind::kGetAttr:
    case ExprKind::kGetItem:
    case ExprKind::kSlice: return eval_subscript(expr);
    case ExprKind::kCall: return eval_call(expr);
    case ExprKind::kFilter: return eval_filter(expr, nullptr);
    case ExprKind::kTest: {
      JINJA_ASSIGN_OR_RETURN(Value operand, eval(*expr.args[0]));
      JINJA_ASSIGN_OR_RETURN(CallArgs args, eval_args(expr, 1));
      JINJA_ASSIGN_OR_RETURN(bool result, apply_test(expr.name, operand, args));
      return Value(result != expr.negated);
    }
    case ExprKind::kUnary: {
      JINJA_ASSIGN_OR_RETURN(Value operand, eval(*expr.args[0]));
      if (expr.op == "not") return Value(!operand.truthy());
      if (operand.is_undefined()) return Status::error(operand.undefined_hint());
      if (!operand.is_number()) {
        return Status::error("bad operand type for unary " + expr.op + ": '" + operand.type_name() + "'");
      }
      if (expr.op == "+") return operand.is_float() ? operand : Value(operand.as_int());
      if (operand.is_float()) return Value(-operand.as_float());
      if (operand.as_int() == INT64_MIN) return Status::error("integer overflow in unary -");
      return Value(-operand.as_int());
    }
    case ExprKind::kBinary: {
      JINJA_ASSIGN_OR_RETURN(Value left, eval(*expr.args[0]));
      // Python's and/or return an operand, not a bool, and short-circuit.
      if (expr.op == "and" && !left.truthy()) return left;
      if (expr.op == "or" && left.truthy()) return left;
      JINJA_ASSIGN_OR_RETURN(Value right, eval(*expr.args[1]));
      if (expr.op == "and" || expr.op == "or") return right;
      if (expr.op == "~") {
        std::string text = to_str(left) + to_str(right);
        if (text.size() > limits_.max_output_bytes) return Status::error("string is too large");
        return Value(std::move(text));
      }
      return binary_operator(expr.op, left, right);
    }
    case ExprKind::kCompare: {
      JINJA_ASSIGN_OR_RETURN(Value left, eval(*expr.args[0]));
      for (size_t i = 0; i < expr.ops.size(); ++i) {
        JINJA_ASSIGN_OR_RETURN(Value right, eval(*expr.args[i + 1]));
        const std::string& op = expr.ops[i];
        bool result = false;
        if (op == "==" || op == "!=") {
          result = equals(left, right) == (op == "==");
        } else if (op == "in" || op == "not in") {
          JINJA_ASSIGN_OR_RETURN(bool found, contains(right, left));
          result = found == (op == "in");
        } else {
          if (left.is_undefined()) return Status::error(left.undefined_hint());
          if (right.is_undefined()) return Status::error(right.undefined_hint());
          const bool flip = op == ">" || op == "<=";
          JINJA_ASSIGN_OR_RETURN(bool less, flip ? less_than(right, left) : less_than(left, right));
          result = (op == "<" || op == ">") ? less : !less;
        }
        if (!result) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case ExprKind::kCondition: {
      JINJA_ASSIGN_OR_RETURN(Value condition, eval(*expr.args[1]));
      if (condition.truthy()) return eval(*expr.args[0]);
      if (expr.args[2]) return eval(*expr.args[2]);
      return Value::undefined("the inline if-expression evaluated to false and has no else");
    }
  }
  return Status::error("unknown expression");
}

}  // namespace

Expected<std::string> render(const StmtList& program, const Dict& context, const RenderLimits& limits) {
  Interpreter interpreter(limits);
  return interpreter.run(program, context);
}

}  // namespace folio::jinja
