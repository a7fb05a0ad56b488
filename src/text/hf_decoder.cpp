#include "text/hf_decoder.h"

#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/hf_normalizer.h"
#include "text/unicode_utf8.h"

namespace folio::hf {
namespace {

using nlohmann::json;

std::string type_of(const json& spec) {
  const auto it = spec.find("type");
  return it != spec.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "<0xAB>" -> 0xAB.
std::optional<uint8_t> byte_of(const std::string& token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return std::nullopt;
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(token[3]), lo = hex(token[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

// Rust's String::from_utf8_lossy: each maximal ill-formed subpart becomes one U+FFFD.
std::string lossy(const std::string& bytes) {
  return is_valid_utf8(bytes) ? bytes : sanitize_utf8(bytes);
}

}  // namespace

Status Decoder::add(const json& spec, std::vector<Step>& steps) {
  if (spec.is_null()) return Status::ok();
  if (!spec.is_object()) return Status::error("decoder: expected an object, got " + spec.dump());
  const std::string type = type_of(spec);
  if (type == "Sequence") {
    const auto it = spec.find("decoders");
    if (it == spec.end() || !it->is_array()) return Status::error("decoder Sequence: no decoders array");
    for (const json& child : *it) {
      if (Status s = add(child, steps); !s) return s;
    }
    return Status::ok();
  }
  Step step{};
  if (type == "ByteLevel") {
    step.kind = Step::Kind::kByteLevel;
  } else if (type == "Replace") {
    step.kind = Step::Kind::kReplace;
    const auto pattern = spec.find("pattern");
    Expected<TextRegex> regex = Status::error("decoder Replace: no pattern");
    if (pattern != spec.end() && pattern->contains("String") && (*pattern)["String"].is_string()) {
      regex = TextRegex::literal((*pattern)["String"].get<std::string>());
    } else if (pattern != spec.end() && pattern->contains("Regex") && (*pattern)["Regex"].is_string()) {
      regex = TextRegex::compile_oniguruma((*pattern)["Regex"].get<std::string>());
    }
    if (!regex) return regex.status();
    step.pattern = std::move(regex).value();
    if (!spec.contains("content") || !spec["content"].is_string()) return Status::error("decoder Replace: no content");
    step.text = spec["content"].get<std::string>();
  } else if (type == "ByteFallback") {
    step.kind = Step::Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Step::Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Step::Kind::kStrip;
    step.text = spec.value("content", std::string(" "));
    if (decode_utf8_lenient(step.text).size() != 1) return Status::error("decoder Strip: content is not one character");
    step.start = spec.value("start", size_t{0});
    step.stop = spec.value("stop", size_t{0});
  } else if (type == "Metaspace") {
    step.kind = Step::Kind::kMetaspace;
    step.text = spec.value("replacement", std::string("\xE2\x96\x81"));
    step.prepends = spec.value("prepend_scheme", std::string("always")) != "never" &&
                    !(spec.contains("add_prefix_space") && spec["add_prefix_space"] == false);
  } else {
    return Status::error(
        "decoder '" + (type.empty() ? spec.dump() : type) +
        "' is not supported (folio implements Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip, "
        "Metaspace)");
  }
  steps.push_back(std::move(step));
  return Status::ok();
}

Expected<Decoder> Decoder::parse(const json& spec) {
  Decoder d;
  if (Status s = add(spec, d.steps_); !s) return s;
  return d;
}

std::string Decoder::piece(const std::string& token) const {
  // A lone ByteLevel decoder (every byte-level vocabulary): the token's bytes, or the text
  // itself when it is spelled outside the alphabet.
  if (steps_.size() == 1 && steps_[0].kind == Step::Kind::kByteLevel) {
    bool all = true;
    for (const char32_t cp : decode_utf8_lenient(token)) all = all && unicode_to_byte(cp).has_value();
    return all ? byte_level_to_bytes(token) : token;
  }
  return decode({token}, Mode::kPiece);
}

std::string Decoder::decode(std::vector<std::string> tokens, Mode mode) const {
  const bool text_mode = mode == Mode::kText;
  if (steps_.empty()) {
    // tokenizers joins the tokens with spaces when there is no decoder.
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i > 0 ? " " : "") + tokens[i];
    return out;
  }
  bool fused = false;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Step::Kind::kByteLevel: {
        // Every token to bytes, then one string (a token spelled outside the alphabet stays as
        // it is, as in tokenizers).
        std::string bytes;
        for (const std::string& t : tokens) {
          const std::vector<char32_t> cps = decode_utf8_lenient(t);
          bool all = true;
          for (const char32_t cp : cps) all = all && unicode_to_byte(cp).has_value();
          bytes += all ? byte_level_to_bytes(t) : t;
        }
        tokens.assign(1, text_mode ? lossy(bytes) : bytes);
        fused = true;
        break;
      }
      case Step::Kind::kReplace:
        for (std::string& t : tokens) {
          Expected<std::string> r = replace_all(*step.pattern, t, step.text);
          if (r) t = std::move(r).value();
        }
        break;
      case Step::Kind::kByteFallback: {
        std::vector<std::string> out;
        std::string pending;
        size_t pending_tokens = 0;
        const auto flush = [&] {
          if (pending_tokens == 0) return;
          if (!text_mode || is_valid_utf8(pending)) {
            out.push_back(pending);
          } else {
            // tokenizers: bytes that do not form UTF-8 give one U+FFFD per byte token.
            for (size_t i = 0; i < pending_tokens; ++i) out.push_back("\xEF\xBF\xBD");
          }
          pending.clear();
          pending_tokens = 0;
        };
        for (std::string& t : tokens) {
          if (const std::optional<uint8_t> b = byte_of(t)) {
            pending.push_back(static_cast<char>(*b));
            ++pending_tokens;
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case Step::Kind::kFuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        fused = true;
        break;
      }
      case Step::Kind::kStrip: {
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string& t = tokens[i];
          // A piece is not where a text starts: the start strip of a fused text is not its.
          const size_t start = (!text_mode && i == 0 && fused) ? 0 : step.start;
          size_t begin = 0, end = t.size();
          for (size_t n = 0; n < start && t.compare(begin, step.text.size(), step.text) == 0; ++n) {
            begin += step.text.size();
          }
          for (size_t n = 0; n < step.stop && end >= begin + step.text.size() &&
                             t.compare(end - step.text.size(), step.text.size(), step.text) == 0;
               ++n) {
            end -= step.text.size();
          }
          t = t.substr(begin, end - begin);
        }
        break;
      }
      case Step::Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string& t = tokens[i];
          const bool drop = i == 0 && step.prepends && text_mode;
          std::string out;
          for (size_t at = 0; at < t.size();) {
            if (t.compare(at, step.text.size(), step.text) == 0) {
              if (!drop) out.push_back(' ');
              at += step.text.size();
            } else {
              out.push_back(t[at++]);
            }
          }
          t = std::move(out);
        }
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return text_mode ? lossy(out) : out;
}

}  // namespace folio::hf
