#include "text/hf_normalizer.h"

#include <utf8proc.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "text/unicode_categories.h"
#include "text/unicode_utf8.h"

namespace folio::hf {
namespace {

using nlohmann::json;

bool is_ascii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

std::string type_of(const json& spec) {
  const auto it = spec.find("type");
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A Replace or Split "pattern": {"String": "..."} or {"Regex": "..."}.
Expected<TextRegex> pattern_of(const json& spec, const char* where) {
  const auto it = spec.find("pattern");
  if (it == spec.end() || !it->is_object()) return Status::error(std::string(where) + ": no pattern object");
  if (it->contains("String") && (*it)["String"].is_string())
    return TextRegex::literal((*it)["String"].get<std::string>());
  if (it->contains("Regex") && (*it)["Regex"].is_string())
    return TextRegex::compile_oniguruma((*it)["Regex"].get<std::string>());
  return Status::error(std::string(where) + ": pattern " + it->dump() +
                       " is neither {\"String\": ...} nor {\"Regex\": ...}");
}

}  // namespace

Expected<std::string> unicode_normalize(std::string_view text, UnicodeForm form) {
  if (is_ascii(text)) return std::string(text);  // every form leaves ASCII alone
  int options = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeForm::kNfc: options |= UTF8PROC_COMPOSE; break;
    case UnicodeForm::kNfd: options |= UTF8PROC_DECOMPOSE; break;
    case UnicodeForm::kNfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case UnicodeForm::kNfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(options));
  if (n < 0) return Status::error(std::string("unicode normalization: ") + utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

Expected<std::string> replace_all(const TextRegex& regex, std::string_view text, std::string_view replacement) {
  Expected<std::vector<RegexMatch>> matches = regex.find_all(text);
  if (!matches) return matches.status();
  if (matches->empty()) return std::string(text);
  std::string out;
  out.reserve(text.size() + matches->size() * replacement.size());
  size_t at = 0;
  for (const RegexMatch& m : *matches) {
    out.append(text.substr(at, m.begin - at));
    out.append(replacement);
    at = m.end;
  }
  out.append(text.substr(at));
  return out;
}

Status Normalizer::add(const json& spec, std::vector<Step>& steps) {
  if (spec.is_null()) return Status::ok();
  if (!spec.is_object()) return Status::error("normalizer: expected an object, got " + spec.dump());
  const std::string type = type_of(spec);
  if (type == "Sequence") {
    const auto it = spec.find("normalizers");
    if (it == spec.end() || !it->is_array()) return Status::error("normalizer Sequence: no normalizers array");
    for (const json& child : *it) {
      if (Status s = add(child, steps); !s) return s;
    }
    return Status::ok();
  }
  Step step{};
  if (type == "NFC") {
    step.kind = Step::Kind::kNfc;
  } else if (type == "NFD") {
    step.kind = Step::Kind::kNfd;
  } else if (type == "NFKC") {
    step.kind = Step::Kind::kNfkc;
  } else if (type == "NFKD") {
    step.kind = Step::Kind::kNfkd;
  } else if (type == "Prepend") {
    step.kind = Step::Kind::kPrepend;
    if (!spec.contains("prepend") || !spec["prepend"].is_string())
      return Status::error("normalizer Prepend: no prepend string");
    step.text = spec["prepend"].get<std::string>();
  } else if (type == "Replace") {
    step.kind = Step::Kind::kReplace;
    Expected<TextRegex> regex = pattern_of(spec, "normalizer Replace");
    if (!regex) return regex.status();
    step.regex = std::move(regex).value();
    if (!spec.contains("content") || !spec["content"].is_string())
      return Status::error("normalizer Replace: no content string");
    step.text = spec["content"].get<std::string>();
  } else if (type == "Strip") {
    step.kind = Step::Kind::kStrip;
    step.left = spec.value("strip_left", false);
    step.right = spec.value("strip_right", false);
  } else {
    return Status::error(
        "normalizer '" + (type.empty() ? spec.dump() : type) +
        "' is not supported (folio implements Sequence, NFC, NFD, NFKC, NFKD, Prepend, Replace, Strip)");
  }
  steps.push_back(std::move(step));
  return Status::ok();
}

Expected<Normalizer> Normalizer::parse(const json& spec) {
  Normalizer n;
  if (Status s = add(spec, n.steps_); !s) return s;
  return n;
}

Expected<std::string> Normalizer::normalize(std::string_view text) const {
  std::string s(text);
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kNfc:
      case Step::Kind::kNfd:
      case Step::Kind::kNfkc:
      case Step::Kind::kNfkd: {
        const UnicodeForm form = step.kind == Step::Kind::kNfc    ? UnicodeForm::kNfc
                                 : step.kind == Step::Kind::kNfd  ? UnicodeForm::kNfd
                                 : step.kind == Step::Kind::kNfkc ? UnicodeForm::kNfkc
                                                                  : UnicodeForm::kNfkd;
        Expected<std::string> out = unicode_normalize(s, form);
        if (!out) return out.status();
        s = std::move(out).value();
        break;
      }
      case Step::Kind::kPrepend:
        if (!s.empty()) s.insert(0, step.text);  // tokenizers leaves an empty piece empty
        break;
      case Step::Kind::kReplace: {
        Expected<std::string> out = replace_all(*step.regex, s, step.text);
        if (!out) return out.status();
        s = std::move(out).value();
        break;
      }
      case Step::Kind::kStrip: {
        const std::vector<char32_t> cps = decode_utf8_lenient(s);
        size_t begin = 0, end = cps.size();
        if (step.left) {
          while (begin < end && is_unicode_whitespace(cps[begin])) ++begin;
        }
        if (step.right) {
          while (end > begin && is_unicode_whitespace(cps[end - 1])) --end;
        }
        std::string out;
        for (size_t i = begin; i < end; ++i) append_utf8(out, cps[i]);
        s = std::move(out);
        break;
      }
    }
  }
  return s;
}

}  // namespace folio::hf
