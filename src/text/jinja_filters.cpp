// Jinja2's built-in filters (jinja2/filters.py), plus Hugging Face's tojson.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "text/jinja_builtins.h"
#include "text/jinja_try.h"

namespace folio::jinja {
namespace {

using FilterFn = std::function<Expected<Value>(const Value&, const CallArgs&)>;

std::string lower(const std::string& s) {
  return change_case(s, CaseMapping::kLower);
}

// `attribute="a.b"` as jinja's make_attrgetter reads it: dotted path, integer parts index.
Value get_path(const Value& item, const std::string& path) {
  Value current = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = std::min(path.find('.', start), path.size());
    const std::string part = path.substr(start, dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    if (numeric && current.is_list()) {
      const size_t index = std::stoul(part);
      current = index < current.as_list().size() ? current.as_list()[index] : Value::undefined("no item " + part);
    } else {
      current = get_attribute(current, part);
    }
    start = dot + 1;
  }
  return current;
}

// For sort/unique/min/max: strings compare case-insensitively unless asked otherwise.
Value sort_key(const Value& item, const Value& attribute, bool case_sensitive) {
  Value key = attribute.is_string() ? get_path(item, attribute.as_string()) : item;
  if (!case_sensitive && key.is_string()) return Value(lower(key.as_string()));
  return key;
}

CallArgs rest_args(const CallArgs& args, size_t skip) {
  CallArgs rest;
  for (size_t i = skip; i < args.positional.size(); ++i) rest.positional.push_back(args.positional[i]);
  rest.keyword = args.keyword;
  return rest;
}

Expected<Value> select_filter(const Value& seq, const CallArgs& args, bool by_attribute, bool keep_matches) {
  JINJA_ASSIGN_OR_RETURN(List items, iterate(seq));
  size_t next = 0;
  std::string attribute;
  if (by_attribute) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return Status::error("selectattr/rejectattr need an attribute name");
    }
    attribute = args.positional[next++].as_string();
  }
  std::string test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) return Status::error("test name must be a string");
    test = args.positional[next++].as_string();
  }
  CallArgs test_args = rest_args(args, next);
  List out;
  for (const Value& item : items) {
    const Value subject = by_attribute ? get_path(item, attribute) : item;
    bool match = subject.truthy();
    if (!test.empty()) {
      JINJA_ASSIGN_OR_RETURN(match, apply_test(test, subject, test_args));
    }
    if (match == keep_matches) out.push_back(item);
  }
  return Value(std::move(out));
}

Expected<Value> tojson_filter(const Value& v, const CallArgs& args) {
  // Hugging Face replaces jinja's tojson with json.dumps(x, ensure_ascii=False, indent=None,
  // separators=None, sort_keys=False): no HTML escaping, keys in insertion order.
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args("tojson", args,
                                                         {{"ensure_ascii", Value(false)},
                                                          {"indent", Value(None{})},
                                                          {"separators", Value(None{})},
                                                          {"sort_keys", Value(false)}}));
  JsonOptions options;
  options.ensure_ascii = a[0].truthy();
  if (a[1].is_int()) options.indent = static_cast<int>(std::clamp<int64_t>(a[1].as_int(), 0, 64));
  if (a[1].is_string()) options.indent_string = a[1].as_string();
  if (a[1].is_string() && a[1].as_string().empty()) options.indent = 0;
  if (a[2].is_list() && a[2].as_list().size() == 2 && a[2].as_list()[0].is_string() && a[2].as_list()[1].is_string()) {
    options.item_separator = a[2].as_list()[0].as_string();
    options.key_separator = a[2].as_list()[1].as_string();
  }
  options.sort_keys = a[3].truthy();
  JINJA_ASSIGN_OR_RETURN(std::string json, to_json(v, options));
  return Value(std::move(json));
}

Expected<Value> int_filter(const Value& v, const CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args("int", args, {{"default", Value(0)}, {"base", Value(10)}}));
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    const double f = v.as_float();
    if (!std::isfinite(f) || std::fabs(f) > 9.2e18) return a[0];
    return Value(static_cast<int64_t>(f));
  }
  if (v.is_string()) {
    const std::string text = python_strip(v.as_string(), nullptr, true, true);
    const int base = a[1].is_int() ? static_cast<int>(a[1].as_int()) : 10;
    if (!text.empty() && base >= 2 && base <= 36) {
      char* end = nullptr;
      errno = 0;
      const long long parsed = std::strtoll(text.c_str(), &end, base);
      if (errno == 0 && end && *end == '\0') return Value(static_cast<int64_t>(parsed));
      const double as_float = std::strtod(text.c_str(), &end);
      if (end && *end == '\0' && std::isfinite(as_float) && std::fabs(as_float) < 9.2e18)
        return Value(static_cast<int64_t>(as_float));
    }
  }
  return a[0];
}

Expected<Value> float_filter(const Value& v, const CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args("float", args, {{"default", Value(0.0)}}));
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    const std::string text = python_strip(v.as_string(), nullptr, true, true);
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    if (!text.empty() && end && *end == '\0') return Value(parsed);
  }
  return a[0];
}

Expected<Value> round_filter(const Value& v, const CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> a,
                         bind_args("round", args, {{"precision", Value(0)}, {"method", Value("common")}}));
  if (!v.is_number()) return Status::error("round filter needs a number");
  const int64_t precision = a[0].is_int() ? std::clamp<int64_t>(a[0].as_int(), -308, 308) : 0;
  const std::string method = a[1].is_string() ? a[1].as_string() : "common";
  const double x = v.as_float();
  if (method == "common" && precision >= 0 && std::isfinite(x)) {
    // Python rounds the exact binary value half-to-even (round(2.675, 2) == 2.67); printf's
    // %.*f does the same, which a multiply-by-100 shortcut would not.
    char buffer[512];
    std::snprintf(buffer, sizeof buffer, "%.*f", static_cast<int>(std::min<int64_t>(precision, 100)), x);
    return Value(std::strtod(buffer, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double scaled = x * scale;
  const double r = method == "ceil"    ? std::ceil(scaled)
                   : method == "floor" ? std::floor(scaled)
                                       : std::nearbyint(scaled);
  return Value(r / scale);
}

Expected<Value> length_filter(const Value& v, const CallArgs&) {
  switch (v.kind()) {
    case Value::Kind::kString: return Value(static_cast<int64_t>(count_code_points(v.as_string())));
    case Value::Kind::kList: return Value(static_cast<int64_t>(v.as_list().size()));
    case Value::Kind::kDict: return Value(static_cast<int64_t>(v.as_dict().items.size()));
    case Value::Kind::kUndefined: return Value(0);
    default: return Status::error("object of type '" + v.type_name() + "' has no len()");
  }
}

Expected<Value> sort_filter(const Value& v, const CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(
      std::vector<Value> a,
      bind_args("sort", args,
                {{"reverse", Value(false)}, {"case_sensitive", Value(false)}, {"attribute", Value(None{})}}));
  JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& item : items) keyed.emplace_back(sort_key(item, a[2], a[1].truthy()), std::move(item));
  Status failure;
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    Expected<bool> less = a[0].truthy() ? less_than(y.first, x.first) : less_than(x.first, y.first);
    if (!less) failure = less.status();
    return less && *less;
  });
  if (!failure) return failure;
  List out;
  for (auto& [key, item] : keyed) out.push_back(std::move(item));
  return Value(std::move(out));
}

Expected<Value> min_max(const Value& v, const CallArgs& args, bool want_max) {
  JINJA_ASSIGN_OR_RETURN(
      std::vector<Value> a,
      bind_args(want_max ? "max" : "min", args, {{"case_sensitive", Value(false)}, {"attribute", Value(None{})}}));
  JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
  if (items.empty()) return Value::undefined("no items in an empty sequence");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    const Value key = sort_key(items[i], a[1], a[0].truthy());
    const Value best_key = sort_key(items[best], a[1], a[0].truthy());
    JINJA_ASSIGN_OR_RETURN(bool better, want_max ? less_than(best_key, key) : less_than(key, best_key));
    if (better) best = i;
  }
  return items[best];
}

Expected<Value> map_filter(const Value& v, const CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
  List out;
  for (const auto& [name, value] : args.keyword) {
    if (name != "attribute") continue;
    const Value* fallback = nullptr;
    for (const auto& kw : args.keyword) {
      if (kw.first == "default") fallback = &kw.second;
    }
    for (const Value& item : items) {
      Value mapped = get_path(item, to_str(value));
      out.push_back(mapped.is_undefined() && fallback ? *fallback : std::move(mapped));
    }
    return Value(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return Status::error("map needs a filter name or attribute=");
  }
  CallArgs filter_args = rest_args(args, 1);
  for (const Value& item : items) {
    JINJA_ASSIGN_OR_RETURN(Value mapped, apply_filter(args.positional[0].as_string(), item, filter_args));
    out.push_back(std::move(mapped));
  }
  return Value(std::move(out));
}

Expected<Value> unique_filter(const Value& v, const CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(std::vector<Value> a,
                         bind_args("unique", args, {{"case_sensitive", Value(false)}, {"attribute", Value(None{})}}));
  JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
  List out, keys;
  for (const Value& item : items) {
    Value key = sort_key(item, a[1], a[0].truthy());
    if (std::none_of(keys.begin(), keys.end(), [&](const Value& k) { return equals(k, key); })) {
      keys.push_back(std::move(key));
      out.push_back(item);
    }
  }
  return Value(std::move(out));
}

Expected<Value> indent_filter(const Value& v, const CallArgs& args) {
  JINJA_ASSIGN_OR_RETURN(
      std::vector<Value> a,
      bind_args("indent", args, {{"width", Value(4)}, {"first", Value(false)}, {"blank", Value(false)}}));
  const std::string indentation =
      a[0].is_string() ? a[0].as_string()
                       : std::string(static_cast<size_t>(std::clamp<int64_t>(a[0].as_int(), 0, 256)), ' ');
  // jinja2: every line after the first gets the indentation; blank lines only with blank=True.
  std::vector<std::string> lines;
  const std::string s = to_str(v);
  size_t start = 0;
  while (start <= s.size()) {
    const size_t nl = std::min(s.find('\n', start), s.size());
    lines.push_back(s.substr(start, nl - start));
    start = nl + 1;
  }
  if (!s.empty() && s.back() == '\n') lines.pop_back();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += '\n';
    const bool indent = (i > 0 || a[1].truthy()) && (a[2].truthy() || !lines[i].empty());
    if (indent) out += indentation;
    out += lines[i];
  }
  if (!s.empty() && s.back() == '\n') out += '\n';
  return Value(std::move(out));
}

const std::map<std::string, FilterFn, std::less<>>& filters() {
  static const auto* table = [] {
    auto* f = new std::map<std::string, FilterFn, std::less<>>;
    auto& t = *f;
    t["abs"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      if (v.is_float()) return Value(std::fabs(v.as_float()));
      if (!v.is_number()) return Status::error("bad operand type for abs(): '" + v.type_name() + "'");
      if (v.as_int() == INT64_MIN) return Status::error("integer overflow in abs");
      return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    };
    t["attr"] = [](const Value& v, const CallArgs& args) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args("attr", args, {{"name", required()}}));
      return get_attribute(v, to_str(a[0]));
    };
    t["capitalize"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      return Value(change_case(to_str(v), CaseMapping::kCapitalize));
    };
    t["length"] = length_filter;
    t["count"] = length_filter;
    t["default"] = [](const Value& v, const CallArgs& args) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(std::vector<Value> a,
                             bind_args("default", args, {{"default_value", Value("")}, {"boolean", Value(false)}}));
      if (v.is_undefined() || (a[1].truthy() && !v.truthy())) return a[0];
      return v;
    };
    t["d"] = t["default"];
    t["dictsort"] = [](const Value& v, const CallArgs& args) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(
          std::vector<Value> a,
          bind_args("dictsort", args,
                    {{"case_sensitive", Value(false)}, {"by", Value("key")}, {"reverse", Value(false)}}));
      if (!v.is_dict()) return Status::error("dictsort needs a dict");
      std::vector<std::pair<std::string, Value>> items = v.as_dict().items;
      const bool by_value = to_str(a[1]) == "value";
      Status failure;
      std::stable_sort(items.begin(), items.end(), [&](const auto& x, const auto& y) {
        Value kx = sort_key(by_value ? x.second : Value(x.first), Value(None{}), a[0].truthy());
        Value ky = sort_key(by_value ? y.second : Value(y.first), Value(None{}), a[0].truthy());
        Expected<bool> less = a[2].truthy() ? less_than(ky, kx) : less_than(kx, ky);
        if (!less) failure = less.status();
        return less && *less;
      });
      if (!failure) return failure;
      List out;
      for (auto& [key, item] : items) out.push_back(Value(List{Value(key), item}));
      return Value(std::move(out));
    };
    t["escape"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      std::string out;
      for (char c : to_str(v)) {
        switch (c) {
          case '&': out += "&amp;"; break;
          case '<': out += "&lt;"; break;
          case '>': out += "&gt;"; break;
          case '"': out += "&#34;"; break;
          case '\'': out += "&#39;"; break;
          default: out += c;
        }
      }
      return Value(std::move(out));
    };
    t["e"] = t["escape"];
    t["first"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
      if (items.empty()) return Value::undefined("No first item, sequence was empty.");
      return items.front();
    };
    t["last"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
      if (items.empty()) return Value::undefined("No last item, sequence was empty.");
      return items.back();
    };
    t["float"] = float_filter;
    t["int"] = int_filter;
    t["items"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      if (v.is_undefined()) return Value(List{});
      if (!v.is_dict()) return Status::error("items filter needs a dict, got " + v.type_name());
      List out;
      for (const auto& [key, item] : v.as_dict().items) out.push_back(Value(List{Value(key), item}));
      return Value(std::move(out));
    };
    t["join"] = [](const Value& v, const CallArgs& args) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(std::vector<Value> a,
                             bind_args("join", args, {{"d", Value("")}, {"attribute", Value(None{})}}));
      JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
      std::string out;
      const std::string separator = to_str(a[0]);
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) out += separator;
        out += to_str(a[1].is_string() ? get_path(items[i], a[1].as_string()) : items[i]);
        if (out.size() > kMaxStringBytes) return Status::error("join result is too large");
      }
      return Value(std::move(out));
    };
    t["list"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
      return Value(std::move(items));
    };
    t["lower"] = [](const Value& v, const CallArgs&) -> Expected<Value> { return Value(lower(to_str(v))); };
    t["upper"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      return Value(change_case(to_str(v), CaseMapping::kUpper));
    };
    t["map"] = map_filter;
    t["max"] = [](const Value& v, const CallArgs& args) { return min_max(v, args, true); };
    t["min"] = [](const Value& v, const CallArgs& args) { return min_max(v, args, false); };
    t["select"] = [](const Value& v, const CallArgs& args) { return select_filter(v, args, false, true); };
    t["reject"] = [](const Value& v, const CallArgs& args) { return select_filter(v, args, false, false); };
    t["selectattr"] = [](const Value& v, const CallArgs& args) { return select_filter(v, args, true, true); };
    t["rejectattr"] = [](const Value& v, const CallArgs& args) { return select_filter(v, args, true, false); };
    t["replace"] = [](const Value& v, const CallArgs& args) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(
          std::vector<Value> a,
          bind_args("replace", args, {{"old", required()}, {"new", required()}, {"count", Value(None{})}}));
      CallArgs method_args;
      method_args.positional = {a[0], a[1]};
      if (a[2].is_int()) method_args.positional.push_back(a[2]);
      bool found = false;
      return call_method(Value(to_str(v)), "replace", method_args, found);
    };
    t["reverse"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      if (v.is_string()) {
        std::vector<char32_t> cps = decode_utf8(v.as_string());
        std::reverse(cps.begin(), cps.end());
        return Value(encode_utf8(std::u32string_view(cps.data(), cps.size())));
      }
      JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
      std::reverse(items.begin(), items.end());
      return Value(std::move(items));
    };
    t["round"] = round_filter;
    t["safe"] = [](const Value& v, const CallArgs&) -> Expected<Value> { return v; };
    t["sort"] = sort_filter;
    t["string"] = [](const Value& v, const CallArgs&) -> Expected<Value> { return Value(to_str(v)); };
    t["sum"] = [](const Value& v, const CallArgs& args) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(std::vector<Value> a,
                             bind_args("sum", args, {{"attribute", Value(None{})}, {"start", Value(0)}}));
      JINJA_ASSIGN_OR_RETURN(List items, iterate(v));
      Value total = a[1];
      for (const Value& item : items) {
        JINJA_ASSIGN_OR_RETURN(total,
                               binary_operator("+", total, a[0].is_string() ? get_path(item, a[0].as_string()) : item));
      }
      return total;
    };
    t["title"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      return Value(change_case(to_str(v), CaseMapping::kJinjaTitle));
    };
    t["tojson"] = tojson_filter;
    t["trim"] = [](const Value& v, const CallArgs& args) -> Expected<Value> {
      JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args("trim", args, {{"chars", Value(None{})}}));
      const std::string chars = a[0].is_string() ? a[0].as_string() : std::string();
      return Value(python_strip(to_str(v), a[0].is_string() ? &chars : nullptr, true, true));
    };
    t["unique"] = unique_filter;
    t["indent"] = indent_filter;
    t["wordcount"] = [](const Value& v, const CallArgs&) -> Expected<Value> {
      CallArgs none;
      bool found = false;
      JINJA_ASSIGN_OR_RETURN(Value words, call_method(Value(to_str(v)), "split", none, found));
      return Value(static_cast<int64_t>(words.as_list().size()));
    };
    return f;
  }();
  return *table;
}

}  // namespace

bool has_filter(std::string_view name) {
  return filters().count(name) > 0;
}

Expected<Value> apply_filter(std::string_view name, const Value& operand, CallArgs& args) {
  const auto it = filters().find(name);
  if (it == filters().end()) return Status::error("no filter named '" + std::string(name) + "'");
  // Most filters treat an undefined value as "" or an empty sequence, as jinja2's Undefined
  // does; these few raise in jinja2 instead.
  static constexpr std::string_view kStrict[] = {"abs", "dictsort", "float", "indent",
                                                 "int", "reverse",  "round", "tojson"};
  if (operand.is_undefined() && std::find(std::begin(kStrict), std::end(kStrict), name) != std::end(kStrict)) {
    const std::string& hint = operand.undefined_hint();
    return Status::error(hint.empty() ? "undefined value passed to " + std::string(name) : hint);
  }
  return it->second(operand, args);
}

}  // namespace folio::jinja
