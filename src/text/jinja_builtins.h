// Jinja2's built-in filters, tests and operators, the Python str/dict methods templates call,
// and the globals Hugging Face adds (raise_exception, strftime_now, namespace, dict). The
// interpreter resolves names here; nothing here knows about the syntax tree.
#pragma once

#include <initializer_list>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "text/jinja_value.h"

namespace folio::jinja {

// Results bigger than this ('x' * 10**9, range(10**9)) are refused instead of allocated.
inline constexpr size_t kMaxCollectionSize = 1'000'000;

bool has_filter(std::string_view name);
bool has_test(std::string_view name);
Expected<Value> apply_filter(std::string_view name, const Value& operand, CallArgs& args);
Expected<bool> apply_test(std::string_view name, const Value& operand, CallArgs& args);

// Methods of str and dict (`s.strip()`, `d.items()`). `found` is false when the object has
// no such method, so the caller can fall back to attribute lookup.
Expected<Value> call_method(const Value& object, std::string_view name, CallArgs& args, bool& found);

// +, -, *, /, //, %, ** with Python's semantics (floor division and modulo round toward
// -inf, int overflow is an error rather than a wrap).
Expected<Value> binary_operator(std::string_view op, const Value& a, const Value& b);
// `a in b`.
Expected<bool> contains(const Value& container, const Value& item);

// range, namespace, dict, raise_exception, strftime_now.
Dict make_globals();

// Turns a list/dict/string/undefined into the sequence a for loop walks (dict -> keys,
// string -> characters, undefined -> nothing).
Expected<List> iterate(const Value& value);

// Python-style binding of call arguments to named parameters with defaults.
struct Param {
  const char* name;
  Value default_value;  // Undefined with hint "required" marks a required parameter
};
Value required();
Expected<std::vector<Value>> bind_args(std::string_view function, const CallArgs& args,
                                       std::initializer_list<Param> params);

// Attribute or item lookup as `value.name` does it on dicts and namespaces.
Value get_attribute(const Value& object, std::string_view name);

}  // namespace folio::jinja
