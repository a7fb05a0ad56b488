// jinja::Value: the dynamically typed values of our Jinja2 interpreter, with Python's
// semantics where templates can observe them (truthiness, ==, <, str(), repr(), json.dumps).
//
// Lists and dicts are immutable once built and shared by pointer, which is what Hugging
// Face's ImmutableSandboxedEnvironment guarantees too (list.append raises there). The one
// mutable object is namespace(), whose attributes `{% set ns.x = ... %}` assigns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/status.h"
#include "text/jinja_unicode.h"

namespace folio::jinja {

class Value;
using List = std::vector<Value>;

// Deepest nesting of lists/dicts a value may have. Tool schemas nest a dozen levels.
inline constexpr int kMaxValueDepth = 256;
// Most nodes a value may have when counted as a tree (shared sub-lists count each time they
// appear), which bounds every walk over it: printing, comparing, tojson.
inline constexpr uint64_t kMaxValueNodes = 10'000'000;
// Longest string any operation builds.
inline constexpr size_t kMaxStringBytes = 64u << 20;

// Insertion-ordered, like a Python dict; templates print and iterate dicts in that order.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;

  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);  // replaces an existing key in place
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

struct Function {
  std::string name;
  std::function<Expected<Value>(CallArgs&)> call;
};

// A variable or attribute that does not exist. Like jinja2's default Undefined it renders as
// "", is falsy and iterates as empty, but any attribute access on it is an error; `hint`
// says what was missing so that error can name it.
struct Undefined {
  std::string hint;
};
struct None {};
struct Namespace {
  std::shared_ptr<Dict> attributes;
};

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kNamespace, kFunction };

  Value() : data_(Undefined{}) {}
  Value(Undefined u) : data_(std::move(u)) {}       // NOLINT
  Value(None) : data_(None{}) {}                    // NOLINT
  Value(bool b) : data_(b) {}                       // NOLINT
  Value(int64_t i) : data_(i) {}                    // NOLINT
  Value(int i) : data_(static_cast<int64_t>(i)) {}  // NOLINT
  Value(double d) : data_(d) {}                     // NOLINT
  // Strings are shared like lists, so copying a Value never copies text: [s] * 100000 holds
  // one s, not 100000.
  Value(std::string s) : data_(std::make_shared<const std::string>(std::move(s))) {}  // NOLINT
  Value(const char* s) : Value(std::string(s)) {}                                     // NOLINT
  Value(List list);                                                                   // NOLINT
  Value(Dict dict);                                                                   // NOLINT
  Value(Namespace ns);                                                                // NOLINT
  Value(std::shared_ptr<const Function> f) : data_(std::move(f)) {}                   // NOLINT

  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  // Fails on JSON nested deeper than kMaxValueDepth.
  static Expected<Value> from_json(const nlohmann::ordered_json& json, int depth = 0);

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  // Python's bool is an int: True + 1 == 2.
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_function() const { return kind() == Kind::kFunction; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const { return is_bool() ? as_bool() : std::get<int64_t>(data_); }
  double as_float() const;  // any number
  const std::string& as_string() const { return *std::get<std::shared_ptr<const std::string>>(data_); }
  const List& as_list() const { return *std::get<std::shared_ptr<const List>>(data_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  Dict& namespace_attributes() const { return *std::get<Namespace>(data_).attributes; }
  const Function& as_function() const { return *std::get<std::shared_ptr<const Function>>(data_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(data_).hint; }

  bool truthy() const;
  // Containers nested inside this value, counting itself (scalars: 0). Values are immutable,
  // so this is exact and lets the interpreter refuse values nested so deep that printing,
  // comparing or destroying them would exhaust the stack. A namespace counts as 1 plus its
  // attributes when it was created.
  int depth() const { return depth_; }
  // Whether a namespace is inside. Namespaces may not hold namespaces, which rules out
  // reference cycles and unbounded chains through the one mutable kind of value.
  bool contains_namespace() const { return contains_namespace_; }
  // Nodes of the value counted as a tree (scalars: 1), saturating.
  uint64_t tree_size() const { return tree_size_; }
  // Python's type name, for error messages: "str", "int", "dict", ...
  std::string type_name() const;

 private:
  std::variant<Undefined, None, bool, int64_t, double, std::shared_ptr<const std::string>, std::shared_ptr<const List>,
               std::shared_ptr<const Dict>, Namespace, std::shared_ptr<const Function>>
      data_;
  int depth_ = 0;
  bool contains_namespace_ = false;
  uint64_t tree_size_ = 1;
};

// Python str(): what {{ value }} prints. Undefined prints as "".
std::string to_str(const Value& value);
// Python repr(): strings quoted, used inside printed lists and dicts.
std::string to_repr(const Value& value);
// Python float repr: shortest round-trip digits, "1.0", "1e-05", "1e+16".
std::string float_repr(double value);

struct JsonOptions {
  int indent = -1;             // < 0: one line
  std::string indent_string;   // used when not empty (json.dumps accepts a string indent)
  std::string item_separator;  // empty: Python's default for the indent mode
  std::string key_separator;
  bool sort_keys = false;
  bool ensure_ascii = false;
};
// Python json.dumps(value, ...). Fails on undefined and callables, as Python raises.
Expected<std::string> to_json(const Value& value, const JsonOptions& options);

// Python ==, which never fails: 1 == 1.0 == True, [1] == [1], dicts compare unordered.
bool equals(const Value& a, const Value& b);
// Python <, which fails between unrelated types (int < str).
Expected<bool> less_than(const Value& a, const Value& b);

}  // namespace folio::jinja
