// Filters, tests and operators. Each follows jinja2's filters.py / tests.py with Python
// semantics; what is left out is listed in chat_template.h.
#include "text/jinja_builtins.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>

#include "text/jinja_try.h"

namespace folio::jinja {

Value required() {
  return Value::undefined("required");
}

Expected<std::vector<Value>> bind_args(std::string_view function, const CallArgs& args,
                                       std::initializer_list<Param> params) {
  std::vector<Value> bound;
  std::vector<bool> given(params.size(), false);
  for (const Param& param : params) bound.push_back(param.default_value);
  if (args.positional.size() > params.size()) {
    return Status::error(std::string(function) + "() takes at most " + std::to_string(params.size()) + " arguments");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) {
    bound[i] = args.positional[i];
    given[i] = true;
  }
  for (const auto& [name, value] : args.keyword) {
    size_t i = 0;
    for (const Param& param : params) {
      if (name == param.name) break;
      ++i;
    }
    if (i == params.size()) {
      return Status::error(std::string(function) + "() got an unexpected keyword argument '" + name + "'");
    }
    bound[i] = value;
    given[i] = true;
  }
  size_t i = 0;
  for (const Param& param : params) {
    if (!given[i] && param.default_value.is_undefined() && param.default_value.undefined_hint() == "required") {
      return Status::error(std::string(function) + "() missing required argument '" + param.name + "'");
    }
    ++i;
  }
  return bound;
}

Expected<List> iterate(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return List{};
    case Value::Kind::kList: return value.as_list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& item : value.as_dict().items) keys.emplace_back(item.first);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t c : decode_utf8(value.as_string())) {
        std::string one;
        append_utf8(one, c);
        chars.emplace_back(std::move(one));
      }
      return chars;
    }
    default: return Status::error("'" + value.type_name() + "' object is not iterable");
  }
}

Value get_attribute(const Value& object, std::string_view name) {
  const Dict* dict = object.is_dict()        ? &object.as_dict()
                     : object.is_namespace() ? &object.namespace_attributes()
                                             : nullptr;
  if (dict) {
    if (const Value* found = dict->find(name)) return *found;
  }
  return Value::undefined("'" + object.type_name() + " object' has no attribute '" + std::string(name) + "'");
}

// ---------------------------------------------------------------------------------------------
// operators

namespace {

Status undefined_error(const Value& value) {
  const std::string& hint = value.undefined_hint();
  return Status::error(hint.empty() ? "undefined value used in an expression" : hint);
}

Expected<Value> repeat(const Value& sequence, int64_t times) {
  times = std::max<int64_t>(times, 0);
  if (sequence.is_string()) {
    const std::string& s = sequence.as_string();
    if (!s.empty() && static_cast<uint64_t>(times) > kMaxStringBytes / s.size())
      return Status::error("string repetition result is too large");
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += s;
    return Value(std::move(out));
  }
  const List& list = sequence.as_list();
  if (!list.empty() && static_cast<uint64_t>(times) > kMaxCollectionSize / list.size())
    return Status::error("list repetition result is too large");
  List out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), list.begin(), list.end());
  return Value(std::move(out));
}

}  // namespace

Expected<Value> binary_operator(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) return undefined_error(a);
  if (b.is_undefined()) return undefined_error(b);
  const std::string types = "'" + a.type_name() + "' and '" + b.type_name() + "'";
  if (a.is_number() && b.is_number()) {
    const bool integers = !a.is_float() && !b.is_float();
    const int64_t x = integers ? a.as_int() : 0, y = integers ? b.as_int() : 0;
    const double fx = a.as_float(), fy = b.as_float();
    int64_t r = 0;
    if (op == "+") {
      if (!integers) return Value(fx + fy);
      if (__builtin_add_overflow(x, y, &r)) return Status::error("integer overflow in +");
      return Value(r);
    }
    if (op == "-") {
      if (!integers) return Value(fx - fy);
      if (__builtin_sub_overflow(x, y, &r)) return Status::error("integer overflow in -");
      return Value(r);
    }
    if (op == "*") {
      if (!integers) return Value(fx * fy);
      if (__builtin_mul_overflow(x, y, &r)) return Status::error("integer overflow in *");
      return Value(r);
    }
    if (op == "/") {
      if (fy == 0.0) return Status::error("division by zero");
      return Value(fx / fy);
    }
    if (op == "//" || op == "%") {
      if (fy == 0.0) return Status::error(op == "//" ? "integer division or modulo by zero" : "modulo by zero");
      if (integers) {
        if (x == INT64_MIN && y == -1) return Status::error("integer overflow in " + std::string(op));
        int64_t quotient = x / y, remainder = x % y;
        if (remainder != 0 && ((remainder < 0) != (y < 0))) {
          --quotient;  // Python rounds toward -inf
          remainder += y;
        }
        return op == "//" ? Value(quotient) : Value(remainder);
      }
      if (op == "//") return Value(std::floor(fx / fy));
      double remainder = std::fmod(fx, fy);
      if (remainder != 0.0 && ((remainder < 0) != (fy < 0))) remainder += fy;
      return Value(remainder);
    }
    if (op == "**") {
      if (integers && y >= 0) {
        int64_t result = 1, base = x;
        for (int64_t e = y; e > 0; e >>= 1) {
          if ((e & 1) && __builtin_mul_overflow(result, base, &result)) return Status::error("integer overflow in **");
          if (e > 1 && __builtin_mul_overflow(base, base, &base)) return Status::error("integer overflow in **");
        }
        return Value(result);
      }
      return Value(std::pow(fx, fy));
    }
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      if (a.as_string().size() + b.as_string().size() > kMaxStringBytes)
        return Status::error("string concatenation result is too large");
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      if (a.as_list().size() + b.as_list().size() > kMaxCollectionSize)
        return Status::error("list concatenation result is too large");
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
    if (a.is_string()) {
      return Status::error("can only concatenate str (not \"" + b.type_name() + "\") to str");
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return repeat(b, a.as_int());
  }
  if (op == "%" && a.is_string()) {
    return Status::error("printf-style string formatting ('...' % x) is not supported");
  }
  return Status::error("unsupported operand type(s) for " + std::string(op) + ": " + types);
}

Expected<bool> contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kString:
      if (!item.is_string()) {
        return Status::error("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& element : container.as_list()) {
        if (equals(element, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      if (!item.is_string()) return false;
      const Dict& dict = container.is_dict() ? container.as_dict() : container.namespace_attributes();
      return dict.find(item.as_string()) != nullptr;
    }
    case Value::Kind::kUndefined: return false;
    default: return Status::error("argument of type '" + container.type_name() + "' is not iterable");
  }
}

// ---------------------------------------------------------------------------------------------
// tests

namespace {

using TestFn = std::function<Expected<bool>(const Value&, const CallArgs&)>;

Expected<Value> first_arg(std::string_view name, const CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> bound, bind_args(name, args, {{"other", required()}}));
  return bound[0];
}

TestFn compare_test(std::string_view op) {
  return [op](const Value& v, const CallArgs& args) -> Expected<bool> {
    JINJA_ASSIGN_OR_RETURN(Value other, first_arg(op, args));
    if (op == "==") return equals(v, other);
    if (op == "!=") return !equals(v, other);
    if (op == "<") return less_than(v, other);
    if (op == ">") return less_than(other, v);
    if (op == "<=") {
      JINJA_ASSIGN_OR_RETURN(bool greater, less_than(other, v));
      return !greater;
    }
    JINJA_ASSIGN_OR_RETURN(bool less, less_than(v, other));
    return !less;
  };
}

bool all_chars(const Value& v, int (*predicate)(int)) {
  if (!v.is_string()) return false;
  bool any_letter = false;
  for (char c : v.as_string()) {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      any_letter = true;
      if (!predicate(static_cast<unsigned char>(c))) return false;
    }
  }
  return any_letter;
}

const std::map<std::string, TestFn, std::less<>>& tests() {
  static const auto* table = [] {
    auto* t = new std::map<std::string, TestFn, std::less<>>;
    auto simple = [&](const char* name, bool (*fn)(const Value&)) {
      (*t)[name] = [fn](const Value& v, const CallArgs&) -> Expected<bool> { return fn(v); };
    };
    simple("defined", [](const Value& v) { return !v.is_undefined(); });
    simple("undefined", [](const Value& v) { return v.is_undefined(); });
    simple("none", [](const Value& v) { return v.is_none(); });
    simple("boolean", [](const Value& v) { return v.is_bool(); });
    simple("true", [](const Value& v) { return v.is_bool() && v.as_bool(); });
    simple("false", [](const Value& v) { return v.is_bool() && !v.as_bool(); });
    simple("integer", [](const Value& v) { return v.is_int(); });
    simple("float", [](const Value& v) { return v.is_float(); });
    simple("number", [](const Value& v) { return v.is_number(); });
    simple("string", [](const Value& v) { return v.is_string(); });
    simple("mapping", [](const Value& v) { return v.is_dict(); });
    simple("iterable", [](const Value& v) { return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined(); });
    simple("sequence", [](const Value& v) { return v.is_list() || v.is_dict() || v.is_string(); });
    simple("callable", [](const Value& v) { return v.is_function(); });
    simple("escaped", [](const Value&) { return false; });
    simple("lower", [](const Value& v) { return all_chars(v, islower); });
    simple("upper", [](const Value& v) { return all_chars(v, isupper); });
    for (const char* name : {"odd", "even"}) {
      const bool odd = name[0] == 'o';
      (*t)[name] = [odd, name](const Value& v, const CallArgs&) -> Expected<bool> {
        if (!v.is_int() && !v.is_bool()) return Status::error(std::string(name) + " test needs an integer");
        return (v.as_int() % 2 != 0) == odd;
      };
    }
    (*t)["divisibleby"] = [](const Value& v, const CallArgs& args) -> Expected<bool> {
      JINJA_ASSIGN_OR_RETURN(Value n, first_arg("divisibleby", args));
      if (!v.is_number() || !n.is_number()) return Status::error("divisibleby needs numbers");
      if (n.as_float() == 0.0) return Status::error("divisibleby 0");
      if (v.is_float() || n.is_float()) return std::fmod(v.as_float(), n.as_float()) == 0.0;
      return v.as_int() % n.as_int() == 0;
    };
    for (const auto& [name, op] : std::vector<std::pair<const char*, const char*>>{{"==", "=="},
                                                                                   {"eq", "=="},
                                                                                   {"equalto", "=="},
                                                                                   {"!=", "!="},
                                                                                   {"ne", "!="},
                                                                                   {"<", "<"},
                                                                                   {"lt", "<"},
                                                                                   {"lessthan", "<"},
                                                                                   {"<=", "<="},
                                                                                   {"le", "<="},
                                                                                   {">", ">"},
                                                                                   {"gt", ">"},
                                                                                   {"greaterthan", ">"},
                                                                                   {">=", ">="},
                                                                                   {"ge", ">="}}) {
      (*t)[name] = compare_test(op);
    }
    (*t)["in"] = [](const Value& v, const CallArgs& args) -> Expected<bool> {
      JINJA_ASSIGN_OR_RETURN(Value seq, first_arg("in", args));
      return contains(seq, v);
    };
    (*t)["sameas"] = [](const Value& v, const CallArgs& args) -> Expected<bool> {
      JINJA_ASSIGN_OR_RETURN(Value other, first_arg("sameas", args));
      // Identity: exact for None/True/False, which is how templates use it.
      return v.kind() == other.kind() && equals(v, other);
    };
    return t;
  }();
  return *table;
}

}  // namespace

bool has_test(std::string_view name) {
  return tests().count(name) > 0;
}

Expected<bool> apply_test(std::string_view name, const Value& operand, CallArgs& args) {
  const auto it = tests().find(name);
  if (it == tests().end()) return Status::error("no test named '" + std::string(name) + "'");
  return it->second(operand, args);
}

}  // namespace folio::jinja
