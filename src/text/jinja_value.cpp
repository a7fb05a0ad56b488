#include "text/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace folio::jinja {

const Value* Dict::find(std::string_view key) const {
  // Linear: template dicts (messages, tool calls) hold a handful of keys.
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : items) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

namespace {
uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX / 2 - b ? UINT64_MAX / 2 : a + b;
}
}  // namespace

Value::Value(List list) {
  for (const Value& item : list) {
    depth_ = std::max(depth_, item.depth_);
    contains_namespace_ = contains_namespace_ || item.contains_namespace_;
    tree_size_ = saturating_add(tree_size_, item.tree_size_);
  }
  ++depth_;
  data_ = std::make_shared<const List>(std::move(list));
}

Value::Value(Dict dict) {
  for (const auto& [key, item] : dict.items) {
    depth_ = std::max(depth_, item.depth_);
    contains_namespace_ = contains_namespace_ || item.contains_namespace_;
    tree_size_ = saturating_add(tree_size_, item.tree_size_);
  }
  ++depth_;
  data_ = std::make_shared<const Dict>(std::move(dict));
}

Value::Value(Namespace ns) {
  for (const auto& [key, item] : ns.attributes->items) {
    depth_ = std::max(depth_, item.depth_);
    tree_size_ = saturating_add(tree_size_, item.tree_size_);
  }
  ++depth_;
  contains_namespace_ = true;
  data_ = std::move(ns);
}

Expected<Value> Value::from_json(const nlohmann::ordered_json& json, int depth) {
  using Json = nlohmann::ordered_json;
  if (depth > kMaxValueDepth) {
    return Status::error("context JSON is nested deeper than " + std::to_string(kMaxValueDepth) + " levels");
  }
  switch (json.type()) {
    case Json::value_t::null: return Value(None{});
    case Json::value_t::boolean: return Value(json.get<bool>());
    case Json::value_t::number_integer: return Value(json.get<int64_t>());
    case Json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      // Beyond int64 only a float can hold it (Python would keep a big int).
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case Json::value_t::number_float: return Value(json.get<double>());
    case Json::value_t::string: return Value(json.get<std::string>());
    case Json::value_t::array: {
      List list;
      list.reserve(json.size());
      for (const auto& item : json) {
        Expected<Value> value = from_json(item, depth + 1);
        if (!value) return value;
        list.push_back(std::move(*value));
      }
      return Value(std::move(list));
    }
    case Json::value_t::object: {
      Dict dict;
      dict.items.reserve(json.size());
      for (const auto& [key, item] : json.items()) {
        Expected<Value> value = from_json(item, depth + 1);
        if (!value) return value;
        dict.items.emplace_back(key, std::move(*value));
      }
      return Value(std::move(dict));
    }
    default: return Value(None{});  // binary / discarded: nothing a template can use
  }
}

double Value::as_float() const {
  if (is_float()) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return as_bool();
    case Kind::kInt: return as_int() != 0;
    case Kind::kFloat: return as_float() != 0.0;
    case Kind::kString: return !as_string().empty();
    case Kind::kList: return !as_list().empty();
    case Kind::kDict: return !as_dict().items.empty();
    case Kind::kNamespace:
    case Kind::kFunction: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::kUndefined: return "Undefined";
    case Kind::kNone: return "NoneType";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "str";
    case Kind::kList: return "list";
    case Kind::kDict: return "dict";
    case Kind::kNamespace: return "Namespace";
    case Kind::kFunction: return "function";
  }
  return "object";
}

// ---------------------------------------------------------------------------------------------
// str(), repr(), json.dumps()

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  // Shortest round-trip digits from to_chars, laid out the way Python's repr does: plain
  // notation for decimal exponents in [-4, 16), scientific with a 2-digit exponent otherwise.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  const size_t e_pos = sci.find('e');
  const bool negative = sci[0] == '-';
  std::string digits;
  for (size_t i = negative ? 1 : 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string out = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    char exp_buffer[16];
    std::snprintf(exp_buffer, sizeof exp_buffer, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return out + exp_buffer;
  }
  if (exponent < 0) {
    return out + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  }
  const size_t integer_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= integer_digits) {
    return out + digits + std::string(integer_digits - digits.size(), '0') + ".0";
  }
  return out + digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
}

namespace {

// Python str.isprintable() for the code points a chat template is likely to meet: control
// characters, non-ASCII spaces, line/paragraph separators and the common format characters
// are escaped by repr(); everything else prints as itself.
bool repr_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0)) return false;
  if (c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || c == 0x3000 || c == 0xFEFF || (c >= 0xD800 && c <= 0xDFFF))
    return false;
  return true;
}

std::string repr_string(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decode_utf8(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!repr_printable(c)) {
      char buffer[16];
      if (c <= 0xFF)
        std::snprintf(buffer, sizeof buffer, "\\x%02x", static_cast<unsigned>(c));
      else if (c <= 0xFFFF)
        std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buffer, sizeof buffer, "\\U%08x", static_cast<unsigned>(c));
      out += buffer;
    } else {
      append_utf8(out, c);
    }
  }
  out += quote;
  return out;
}

void json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : decode_utf8(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char buffer[16];
        if (c < 0x20 || (ensure_ascii && c > 0x7E && c <= 0xFFFF)) {
          std::snprintf(buffer, sizeof buffer, "\\u%04x", static_cast<unsigned>(c));
          out += buffer;
        } else if (ensure_ascii && c > 0xFFFF) {
          const char32_t v = c - 0x10000;
          std::snprintf(buffer, sizeof buffer, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                        static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          out += buffer;
        } else {
          append_utf8(out, c);
        }
      }
    }
  }
  out += '"';
}

Status json_value(std::string& out, const Value& value, const JsonOptions& options, int depth) {
  if (depth > 2 * kMaxValueDepth + 2) return Status::error("tojson: value nested too deeply");
  if (out.size() > kMaxStringBytes) return Status::error("tojson: result is too large");
  const bool pretty = options.indent >= 0 || !options.indent_string.empty();
  const std::string unit = !options.indent_string.empty()
                               ? options.indent_string
                               : std::string(static_cast<size_t>(std::max(options.indent, 0)), ' ');
  const std::string item_sep = !options.item_separator.empty() ? options.item_separator : (pretty ? "," : ", ");
  const std::string key_sep = !options.key_separator.empty() ? options.key_separator : ": ";
  auto newline = [&](int level) {
    out += '\n';
    for (int i = 0; i < level; ++i) out += unit;
  };
  switch (value.kind()) {
    case Value::Kind::kNone: out += "null"; return Status::ok();
    case Value::Kind::kBool: out += value.as_bool() ? "true" : "false"; return Status::ok();
    case Value::Kind::kInt: out += std::to_string(value.as_int()); return Status::ok();
    case Value::Kind::kFloat: {
      const double f = value.as_float();
      out += std::isnan(f) ? "NaN" : std::isinf(f) ? (f > 0 ? "Infinity" : "-Infinity") : float_repr(f);
      return Status::ok();
    }
    case Value::Kind::kString: json_string(out, value.as_string(), options.ensure_ascii); return Status::ok();
    case Value::Kind::kList: {
      const List& list = value.as_list();
      if (list.empty()) {
        out += "[]";
        return Status::ok();
      }
      out += '[';
      for (size_t i = 0; i < list.size(); ++i) {
        if (i > 0) out += item_sep;
        if (pretty) newline(depth + 1);
        if (Status s = json_value(out, list[i], options, depth + 1); !s) return s;
      }
      if (pretty) newline(depth);
      out += ']';
      return Status::ok();
    }
    case Value::Kind::kDict:
    case Value::Kind::kNamespace: {
      std::vector<const std::pair<std::string, Value>*> items;
      const Dict& dict = value.is_dict() ? value.as_dict() : value.namespace_attributes();
      for (const auto& item : dict.items) items.push_back(&item);
      if (options.sort_keys) {
        std::stable_sort(items.begin(), items.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      if (items.empty()) {
        out += "{}";
        return Status::ok();
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += item_sep;
        if (pretty) newline(depth + 1);
        json_string(out, items[i]->first, options.ensure_ascii);
        out += key_sep;
        if (Status s = json_value(out, items[i]->second, options, depth + 1); !s) return s;
      }
      if (pretty) newline(depth);
      out += '}';
      return Status::ok();
    }
    case Value::Kind::kUndefined: return Status::error("tojson: Object of type Undefined is not JSON serializable");
    case Value::Kind::kFunction: return Status::error("tojson: a function is not JSON serializable");
  }
  return Status::ok();
}

}  // namespace

Expected<std::string> to_json(const Value& value, const JsonOptions& options) {
  std::string out;
  if (Status s = json_value(out, value, options, 0); !s) return s;
  return out;
}

std::string to_repr(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kString: return repr_string(value.as_string());
    case Value::Kind::kList:
    case Value::Kind::kDict: {
      // Stops once past kMaxStringBytes: the caller's output limit rejects it anyway, and a
      // value that shares sub-lists could otherwise print to exponential size.
      std::string out = value.is_list() ? "[" : "{";
      if (value.is_list()) {
        const List& list = value.as_list();
        for (size_t i = 0; i < list.size() && out.size() <= kMaxStringBytes; ++i) {
          if (i > 0) out += ", ";
          out += to_repr(list[i]);
        }
      } else {
        bool first = true;
        for (const auto& [key, item] : value.as_dict().items) {
          if (out.size() > kMaxStringBytes) break;
          if (!first) out += ", ";
          first = false;
          out += repr_string(key) + ": " + to_repr(item);
        }
      }
      return out + (value.is_list() ? "]" : "}");
    }
    default: return to_str(value);
  }
}

std::string to_str(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kNone: return "None";
    case Value::Kind::kBool: return value.as_bool() ? "True" : "False";
    case Value::Kind::kInt: return std::to_string(value.as_int());
    case Value::Kind::kFloat: return float_repr(value.as_float());
    case Value::Kind::kString: return value.as_string();
    case Value::Kind::kList:
    case Value::Kind::kDict: return to_repr(value);
    case Value::Kind::kNamespace: {
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [key, item] : value.namespace_attributes().items) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(key) + ": " + to_repr(item);
      }
      return out + "}>";
    }
    case Value::Kind::kFunction: return "<function " + value.as_function().name + ">";
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// comparisons

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: return true;
    case Value::Kind::kString: return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!equals(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [key, item] : x.items) {
        const Value* other = y.find(key);
        if (!other || !equals(item, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace: return &a.namespace_attributes() == &b.namespace_attributes();
    case Value::Kind::kFunction: return &a.as_function() == &b.as_function();
    default: return false;
  }
}

Expected<bool> less_than(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  // UTF-8 byte order is code point order, which is how Python orders str.
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return Status::error("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

}  // namespace folio::jinja
