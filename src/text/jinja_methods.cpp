// Python str and dict methods that chat templates call, and the globals Hugging Face's
// renderer defines (jinja2's range/namespace/dict plus raise_exception and strftime_now).
#include <algorithm>
#include <cctype>
#include <ctime>

#include "text/jinja_builtins.h"
#include "text/jinja_try.h"

namespace folio::jinja {
namespace {

using Strings = std::vector<std::string>;

Value strings_to_list(Strings parts) {
  List list;
  for (std::string& part : parts) list.emplace_back(std::move(part));
  return Value(std::move(list));
}

// str.split / str.rsplit. sep == nullptr splits on whitespace runs and drops empty parts.
Expected<Strings> split(const std::string& s, const std::string* sep, int64_t max_split, bool from_right) {
  Strings parts;
  if (sep && sep->empty()) return Status::error("empty separator");
  if (max_split < 0) max_split = INT64_MAX;
  if (!sep) {
    // Walk code points so non-ASCII whitespace (U+3000, ...) splits as in Python.
    std::vector<char32_t> cps = decode_utf8(s);
    if (from_right) std::reverse(cps.begin(), cps.end());
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && is_python_space(cps[i])) ++i;
      if (i == cps.size()) break;
      size_t end = i;
      if (static_cast<int64_t>(parts.size()) == max_split) {
        end = cps.size();
        while (end > i && is_python_space(cps[end - 1])) --end;
      } else {
        while (end < cps.size() && !is_python_space(cps[end])) ++end;
      }
      std::u32string part(cps.begin() + static_cast<ptrdiff_t>(i), cps.begin() + static_cast<ptrdiff_t>(end));
      if (from_right) std::reverse(part.begin(), part.end());
      parts.push_back(encode_utf8(part));
      i = end;
    }
    if (from_right) std::reverse(parts.begin(), parts.end());
    return parts;
  }
  if (!from_right) {
    size_t start = 0;
    while (static_cast<int64_t>(parts.size()) < max_split) {
      const size_t found = s.find(*sep, start);
      if (found == std::string::npos) break;
      parts.push_back(s.substr(start, found - start));
      start = found + sep->size();
    }
    parts.push_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (static_cast<int64_t>(parts.size()) < max_split && end >= sep->size()) {
    const size_t found = s.rfind(*sep, end - sep->size());
    if (found == std::string::npos) break;
    parts.push_back(s.substr(found + sep->size(), end - found - sep->size()));
    end = found;
  }
  parts.push_back(s.substr(0, end));
  std::reverse(parts.begin(), parts.end());
  return parts;
}

Expected<bool> affix_match(const std::string& s, const Value& affix, bool prefix) {
  // startswith/endswith accept one string or a tuple (list) of them.
  const List options = affix.is_list() ? affix.as_list() : List{affix};
  for (const Value& option : options) {
    if (!option.is_string()) {
      return Status::error(std::string(prefix ? "startswith" : "endswith") +
                           " first arg must be str or a tuple of str, not " + option.type_name());
    }
    const std::string& a = option.as_string();
    if (a.size() <= s.size() &&
        (prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0))
      return true;
  }
  return false;
}

bool every_char(const std::string& s, int (*predicate)(int)) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [&](char c) { return predicate(static_cast<unsigned char>(c)) != 0; });
}

Expected<Value> string_method(const std::string& s, std::string_view name, CallArgs& args, bool& found) {
  found = true;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args(name, args, {{"chars", Value(None{})}}));
    const std::string chars = a[0].is_string() ? a[0].as_string() : std::string();
    return Value(python_strip(s, a[0].is_string() ? &chars : nullptr, name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> a,
                           bind_args(name, args, {{"sep", Value(None{})}, {"maxsplit", Value(-1)}}));
    const std::string sep = a[0].is_string() ? a[0].as_string() : std::string();
    JINJA_ASSIGN_OR_RETURN(Strings parts, split(s, a[0].is_string() ? &sep : nullptr,
                                                a[1].is_int() ? a[1].as_int() : -1, name == "rsplit"));
    return strings_to_list(std::move(parts));
  }
  if (name == "splitlines") {
    Strings lines;
    size_t start = 0;
    while (start < s.size()) {
      const size_t nl = std::min(s.find('\n', start), s.size());
      std::string line = s.substr(start, nl - start);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
      start = nl + 1;
    }
    return strings_to_list(std::move(lines));
  }
  if (name == "startswith" || name == "endswith") {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args(name, args, {{"affix", required()}}));
    JINJA_ASSIGN_OR_RETURN(bool match, affix_match(s, a[0], name == "startswith"));
    return Value(match);
  }
  if (name == "upper") return Value(change_case(s, CaseMapping::kUpper));
  if (name == "lower") return Value(change_case(s, CaseMapping::kLower));
  if (name == "title") return Value(change_case(s, CaseMapping::kTitle));
  if (name == "capitalize") return Value(change_case(s, CaseMapping::kCapitalize));
  if (name == "replace") {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> a,
                           bind_args(name, args, {{"old", required()}, {"new", required()}, {"count", Value(-1)}}));
    if (!a[0].is_string() || !a[1].is_string()) return Status::error("replace() arguments must be str");
    const std::string& from = a[0].as_string();
    const std::string& to = a[1].as_string();
    int64_t remaining = a[2].is_int() && a[2].as_int() >= 0 ? a[2].as_int() : INT64_MAX;
    std::string out;
    size_t start = 0;
    if (from.empty()) {  // Python inserts `to` between every character
      const std::vector<char32_t> cps = decode_utf8(s);
      for (char32_t c : cps) {
        if (remaining-- > 0) out += to;
        append_utf8(out, c);
        if (out.size() > kMaxStringBytes) return Status::error("replace result is too large");
      }
      if (remaining > 0) out += to;
      return Value(std::move(out));
    }
    while (remaining-- > 0) {
      const size_t found = s.find(from, start);
      if (found == std::string::npos) break;
      out.append(s, start, found - start);
      out += to;
      start = found + from.size();
      if (out.size() > kMaxStringBytes) return Status::error("replace result is too large");
    }
    out.append(s, start, std::string::npos);
    return Value(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "count") {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args(name, args, {{"sub", required()}}));
    if (!a[0].is_string()) return Status::error(std::string(name) + "() argument must be str");
    const std::string& sub = a[0].as_string();
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(count_code_points(s) + 1));
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value(n);
    }
    const size_t at = name == "find" ? s.find(sub) : s.rfind(sub);
    if (at == std::string::npos) return Value(-1);
    return Value(static_cast<int64_t>(count_code_points(std::string_view(s).substr(0, at))));
  }
  if (name == "join") {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args(name, args, {{"iterable", required()}}));
    JINJA_ASSIGN_OR_RETURN(List items, iterate(a[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        return Status::error("sequence item " + std::to_string(i) + ": expected str instance, " + items[i].type_name() +
                             " found");
      }
      if (i > 0) out += s;
      out += items[i].as_string();
    }
    return Value(std::move(out));
  }
  if (name == "isdigit") return Value(every_char(s, isdigit));
  if (name == "isalpha") return Value(every_char(s, isalpha));
  if (name == "isalnum") return Value(every_char(s, isalnum));
  if (name == "isspace") return Value(every_char(s, isspace));
  if (name == "isupper" || name == "islower") {
    bool any = false, all = true;
    for (char c : s) {
      const auto u = static_cast<unsigned char>(c);
      if (!std::isalpha(u)) continue;
      any = true;
      all = all && (name == "isupper" ? std::isupper(u) : std::islower(u));
    }
    return Value(any && all);
  }
  found = false;
  return Value();
}

Expected<Value> dict_method(const Dict& dict, std::string_view name, CallArgs& args, bool& found) {
  found = true;
  if (name == "items" || name == "keys" || name == "values") {
    JINJA_RETURN_IF_ERROR(bind_args(name, args, {}).status());
    List out;
    for (const auto& [key, item] : dict.items) {
      if (name == "items")
        out.push_back(Value(List{Value(key), item}));
      else if (name == "keys")
        out.emplace_back(key);
      else
        out.push_back(item);
    }
    return Value(std::move(out));
  }
  if (name == "get") {
    JINJA_ASSIGN_OR_RETURN(std::vector<Value> a,
                           bind_args(name, args, {{"key", required()}, {"default", Value(None{})}}));
    if (!a[0].is_string()) return a[1];
    const Value* item = dict.find(a[0].as_string());
    return item ? *item : a[1];
  }
  found = false;
  return Value();
}

std::shared_ptr<const Function> make_function(std::string name, std::function<Expected<Value>(CallArgs&)> call) {
  return std::make_shared<const Function>(Function{std::move(name), std::move(call)});
}

}  // namespace

Expected<Value> call_method(const Value& object, std::string_view name, CallArgs& args, bool& found) {
  found = false;
  if (object.is_string()) return string_method(object.as_string(), name, args, found);
  if (object.is_dict()) return dict_method(object.as_dict(), name, args, found);
  if (object.is_list() && (name == "append" || name == "extend" || name == "pop" || name == "insert" ||
                           name == "remove" || name == "clear" || name == "sort" || name == "reverse")) {
    found = true;
    // What Hugging Face's ImmutableSandboxedEnvironment answers as well.
    return Status::error("access to attribute '" + std::string(name) + "' of 'list' object is unsafe.");
  }
  return Value();
}

Dict make_globals() {
  Dict globals;
  globals.set("range", make_function("range", [](CallArgs& args) -> Expected<Value> {
                if (!args.keyword.empty() || args.positional.empty() || args.positional.size() > 3)
                  return Status::error("range expected 1 to 3 integer arguments");
                for (const Value& v : args.positional) {
                  if (!v.is_int() && !v.is_bool()) return Status::error("range() arguments must be integers");
                }
                const auto& p = args.positional;
                const int64_t start = p.size() == 1 ? 0 : p[0].as_int();
                const int64_t stop = p.size() == 1 ? p[0].as_int() : p[1].as_int();
                const int64_t step = p.size() == 3 ? p[2].as_int() : 1;
                if (step == 0) return Status::error("range() arg 3 must not be zero");
                List out;
                for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
                  if (out.size() >= kMaxCollectionSize) return Status::error("range() is too long");
                  out.emplace_back(i);
                  if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
                }
                return Value(std::move(out));
              }));
  globals.set("namespace", make_function("namespace", [](CallArgs& args) -> Expected<Value> {
                auto attributes = std::make_shared<Dict>();
                for (const Value& v : args.positional) {
                  if (!v.is_dict()) return Status::error("namespace() positional argument must be a dict");
                  for (const auto& [key, item] : v.as_dict().items) attributes->set(key, item);
                }
                for (const auto& [key, item] : args.keyword) attributes->set(key, item);
                for (const auto& [key, item] : attributes->items) {
                  // Keeps the one mutable kind of value free of cycles and unbounded chains.
                  if (item.contains_namespace()) {
                    return Status::error("a namespace cannot be stored inside a namespace");
                  }
                }
                return Value(Namespace{std::move(attributes)});
              }));
  globals.set("dict", make_function("dict", [](CallArgs& args) -> Expected<Value> {
                Dict out;
                for (const Value& v : args.positional) {
                  if (!v.is_dict()) return Status::error("dict() positional argument must be a dict");
                  for (const auto& [key, item] : v.as_dict().items) out.set(key, item);
                }
                for (const auto& [key, item] : args.keyword) out.set(key, item);
                return Value(std::move(out));
              }));
  globals.set("raise_exception", make_function("raise_exception", [](CallArgs& args) -> Expected<Value> {
                // The template's own message is the whole error: it is written for the end user.
                return Status::error(args.positional.empty() ? "raise_exception() called" : to_str(args.positional[0]));
              }));
  globals.set("strftime_now", make_function("strftime_now", [](CallArgs& args) -> Expected<Value> {
                JINJA_ASSIGN_OR_RETURN(std::vector<Value> a, bind_args("strftime_now", args, {{"format", required()}}));
                const std::time_t now = std::time(nullptr);
                std::tm local{};
                localtime_r(&now, &local);
                char buffer[512];
                const size_t n = std::strftime(buffer, sizeof buffer, to_str(a[0]).c_str(), &local);
                return Value(std::string(buffer, n));
              }));
  return globals;
}

}  // namespace folio::jinja
