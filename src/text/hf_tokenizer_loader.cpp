// tokenizer.json (+ tokenizer_config.json) -> Tokenizer::State with its hf::Pipeline.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "text/hf_tokenizer.h"
#include "text/tokenizer_state.h"
#include "text/unicode_utf8.h"

namespace folio::hf {
namespace {

using nlohmann::json;

// tokenizer_config.json names tokens as a string or as {"content": "..."} (an AddedToken).
std::optional<std::string> config_token(const json& config, const char* key) {
  const auto it = config.find(key);
  if (it == config.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  return std::nullopt;
}

Status read_added_tokens(const json& spec, const std::string& name, std::vector<AddedToken>& out) {
  const auto it = spec.find("added_tokens");
  if (it == spec.end() || it->is_null()) return Status::ok();
  if (!it->is_array()) return Status::error(name + ": added_tokens is not an array");
  for (const json& t : *it) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
        !t["content"].is_string()) {
      return Status::error(name + ": added token " + t.dump() + " has no integer id and content string");
    }
    AddedToken a;
    const int64_t id = t["id"].get<int64_t>();
    if (id < 0 || id >= (int64_t{1} << 31))
      return Status::error(name + ": added token id " + t["id"].dump() + " is out of range");
    a.id = static_cast<int32_t>(id);
    a.content = t["content"].get<std::string>();
    if (!is_valid_utf8(a.content) || a.content.empty()) {
      return Status::error(name + ": added token " + std::to_string(id) + " has an empty or invalid text");
    }
    a.special = t.value("special", false);
    a.single_word = t.value("single_word", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.normalized = t.value("normalized", !a.special);
    out.push_back(std::move(a));
  }
  return Status::ok();
}

// The ids a post-processor puts before and after a single sequence.
Status read_post_processor(const json& spec, const std::string& name, const Vocab& vocab, std::vector<int32_t>& prefix,
                           std::vector<int32_t>& suffix) {
  if (spec.is_null()) return Status::ok();
  if (!spec.is_object()) return Status::error(name + ": post_processor is not an object");
  const std::string type = spec.value("type", std::string());
  if (type == "Sequence") {
    if (!spec.contains("processors") || !spec["processors"].is_array()) {
      return Status::error(name + ": post_processor Sequence has no processors");
    }
    for (const json& p : spec["processors"]) {
      if (Status s = read_post_processor(p, name, vocab, prefix, suffix); !s) return s;
    }
    return Status::ok();
  }
  if (type == "ByteLevel") return Status::ok();  // it only trims offsets
  if (type == "TemplateProcessing") {
    const auto single = spec.find("single");
    if (single == spec.end() || !single->is_array())
      return Status::error(name + ": TemplateProcessing has no single template");
    const json specials = spec.value("special_tokens", json::object());
    bool seen_sequence = false;
    for (const json& piece : *single) {
      if (piece.contains("Sequence")) {
        seen_sequence = true;
        continue;
      }
      if (!piece.contains("SpecialToken") || !piece["SpecialToken"].contains("id")) {
        return Status::error(name + ": TemplateProcessing piece " + piece.dump() +
                             " is neither a Sequence nor a SpecialToken");
      }
      const std::string token = piece["SpecialToken"]["id"].get<std::string>();
      if (!specials.contains(token) || !specials[token].contains("ids") || !specials[token]["ids"].is_array()) {
        return Status::error(name + ": TemplateProcessing names special token '" + token + "' without its ids");
      }
      for (const json& id : specials[token]["ids"]) {
        if (!id.is_number_integer() || !vocab.contains(static_cast<int32_t>(id.get<int64_t>()))) {
          return Status::error(name + ": TemplateProcessing id " + id.dump() + " of '" + token + "' is not a token");
        }
        (seen_sequence ? suffix : prefix).push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
    }
    return Status::ok();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      if (!spec.contains(key) || !spec[key].is_array() || spec[key].size() != 2 || !spec[key][1].is_number_integer()) {
        return Status::error(name + ": " + type + " has no " + key + " [text, id]");
      }
    }
    prefix.push_back(spec["cls"][1].get<int32_t>());
    suffix.push_back(spec["sep"][1].get<int32_t>());
    return Status::ok();
  }
  return Status::error(name + ": post_processor '" + type +
                       "' is not supported (folio implements TemplateProcessing, ByteLevel, Sequence, "
                       "RobertaProcessing, BertProcessing)");
}

// Texts that end generation when they are special tokens of the vocabulary (as the GGUF loader
// recognises them), besides eos_token and generation_config.json's eos ids.
constexpr std::string_view kEndOfTurn[] = {"<|eot_id|>",      "<|im_end|>",         "<|end|>",
                                           "<end_of_turn>",   "<|eom_id|>",         "<|endoftext|>",
                                           "<|end_of_text|>", "<end_of_utterance>", "<EOT>"};

}  // namespace

static Expected<std::shared_ptr<Tokenizer::State>> load_state_unchecked(const HfTokenizerFiles& files) {
  const std::string& name = files.name;
  const json spec = json::parse(files.tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (!spec.is_object()) return Status::error(name + ": not a JSON object");
  json config = json::object();
  if (!files.tokenizer_config_json.empty()) {
    config = json::parse(files.tokenizer_config_json, nullptr, /*allow_exceptions=*/false);
    if (!config.is_object()) return Status::error("tokenizer_config.json: not a JSON object");
  }
  // "truncation" and "padding" only shape training batches; serving ignores them, as vLLM does.

  auto pipeline = std::make_shared<Pipeline>();
  Pipeline& p = *pipeline;
  const auto with_name = [&](Status s) { return s ? s : Status::error(name + ": " + s.message()); };
  {
    Expected<Normalizer> n = Normalizer::parse(spec.value("normalizer", json()));
    if (!n) return with_name(n.status());
    p.normalizer = std::move(n).value();
    Expected<PreTokenizer> pre = PreTokenizer::parse(spec.value("pre_tokenizer", json()));
    if (!pre) return with_name(pre.status());
    p.pre_tokenizer = std::move(pre).value();
    if (!spec.contains("model")) return Status::error(name + ": no model");
    Expected<Bpe> model = Bpe::parse(spec["model"]);
    if (!model) return with_name(model.status());
    p.model = std::move(model).value();
    Expected<Decoder> d = Decoder::parse(spec.value("decoder", json()));
    if (!d) return with_name(d.status());
    p.decoder = std::move(d).value();
  }
  if (Status s = read_added_tokens(spec, name, p.added_tokens); !s) return s;

  auto state = std::make_shared<Tokenizer::State>();
  Tokenizer::State& s = *state;
  s.kind = TokenizerKind::kHuggingFace;
  // The vocabulary: the model's tokens and the added ones, by id; ids no token has are unused.
  int32_t size = 0;
  for (const auto& [text, id] : p.model.vocab()) size = std::max(size, id + 1);
  for (const AddedToken& a : p.added_tokens) size = std::max(size, a.id + 1);
  Vocab& vocab = s.vocab;
  vocab.texts.assign(static_cast<size_t>(size), std::string());
  vocab.scores.assign(static_cast<size_t>(size), 0.0f);
  vocab.attrs.assign(static_cast<size_t>(size), kAttrUnused);
  for (const auto& [text, id] : p.model.vocab()) {
    vocab.texts[id] = text;
    vocab.attrs[id] = kAttrNormal;
  }
  p.special.assign(static_cast<size_t>(size), false);
  for (const AddedToken& a : p.added_tokens) {
    vocab.texts[a.id] = a.content;  // decode uses the added token's text, as tokenizers does
    vocab.attrs[a.id] = a.special ? kAttrControl : kAttrUserDefined;
    p.special[a.id] = a.special;
  }
  if (p.model.byte_fallback()) {
    for (int b = 0; b < 256; ++b) {
      const int32_t id = p.model.byte_token(static_cast<uint8_t>(b));
      if (id >= 0 && !(vocab.attrs[id] & (kAttrControl | kAttrUserDefined))) vocab.attrs[id] = kAttrByte;
    }
  }
  if (const int32_t unk = p.model.unknown_id(); unk >= 0) {
    vocab.attrs[unk] |= kAttrUnknown;
    s.unknown_id = unk;
  }
  vocab.text_to_id.reserve(static_cast<size_t>(size));
  for (int32_t id = 0; id < size; ++id) {
    if (!vocab.texts[id].empty()) vocab.text_to_id.emplace(vocab.texts[id], id);
  }
  for (const AddedToken& a : p.added_tokens) vocab.text_to_id[a.content] = a.id;

  // Added-token matchers: raw texts, and normalized ones by their normalized form.
  std::vector<AddedToken> raw, normalized;
  std::vector<std::string> raw_patterns, normalized_patterns;
  for (const AddedToken& a : p.added_tokens) {
    if (a.normalized) {
      Expected<std::string> form = p.normalizer.normalize(a.content);
      if (!form) return with_name(form.status());
      normalized.push_back(a);
      normalized_patterns.push_back(std::move(form).value());
    } else {
      raw.push_back(a);
      raw_patterns.push_back(a.content);
    }
  }
  p.raw_matcher.build(raw, raw_patterns);
  p.normalized_matcher.build(normalized, normalized_patterns);

  if (Status st = read_post_processor(spec.value("post_processor", json()), name, vocab, p.prefix, p.suffix); !st) {
    return st;
  }
  // Special roles from tokenizer_config.json.
  const auto role = [&](const char* key, int32_t& id) -> Status {
    const std::optional<std::string> text = config_token(config, key);
    if (!text) return Status::ok();
    const int32_t found = vocab.find(*text);
    if (found < 0)
      return Status::error("tokenizer_config.json: " + std::string(key) + " '" + *text + "' is not a token");
    id = found;
    return Status::ok();
  };
  for (const auto& [key, id] : {std::pair{"bos_token", &s.bos_id}, std::pair{"eos_token", &s.eos_id},
                                std::pair{"pad_token", &s.padding_id}, std::pair{"unk_token", &s.unknown_id}}) {
    if (Status st = role(key, *id); !st) return st;
  }
  // transformers' Llama / Gemma tokenizers rebuild the template from add_bos_token /
  // add_eos_token when the config gives them; the template otherwise decides.
  const auto toggle = [&](const char* key, int32_t id, std::vector<int32_t>& ids, bool at_front) {
    const auto it = config.find(key);
    if (it == config.end() || !it->is_boolean() || id < 0) return;
    const bool want = it->get<bool>();
    const bool has = std::find(ids.begin(), ids.end(), id) != ids.end();
    if (want && !has) ids.insert(at_front ? ids.begin() : ids.end(), id);
    if (!want && has) ids.erase(std::remove(ids.begin(), ids.end(), id), ids.end());
  };
  toggle("add_bos_token", s.bos_id, p.prefix, true);
  toggle("add_eos_token", s.eos_id, p.suffix, false);
  s.add_bos = s.bos_id >= 0 && std::find(p.prefix.begin(), p.prefix.end(), s.bos_id) != p.prefix.end();
  s.add_eos = s.eos_id >= 0 && std::find(p.suffix.begin(), p.suffix.end(), s.eos_id) != p.suffix.end();
  s.add_space_prefix = false;

  std::set<int32_t> eog(files.generation_eos_ids.begin(), files.generation_eos_ids.end());
  if (s.eos_id >= 0) eog.insert(s.eos_id);
  for (const std::string_view text : kEndOfTurn) {
    const int32_t id = vocab.find(text);
    if (id >= 0 && p.special[id]) {
      eog.insert(id);
      if (s.eot_id < 0 && text != "<|endoftext|>" && text != "<|end_of_text|>") s.eot_id = id;
    }
  }
  for (const int32_t id : eog) {
    if (!vocab.contains(id)) {
      return Status::error("generation_config.json: eos_token_id " + std::to_string(id) + " is not a token");
    }
  }
  s.end_of_generation_ids.assign(eog.begin(), eog.end());

  for (const AddedToken& a : p.added_tokens) s.partition_tokens.push_back(a.id);
  s.pieces.resize(static_cast<size_t>(size));
  for (int32_t id = 0; id < size; ++id) {
    if (vocab.attrs[id] & kAttrUnused) continue;
    s.pieces[id] = p.decoder.piece(vocab.texts[id]);
    s.max_piece_bytes = std::max(s.max_piece_bytes, s.pieces[id].size());
  }
  // Normalizers can shrink text (NFC composes "e" + U+0301 into one 2-byte character), so the
  // bytes-per-token bound that lets a far too long prompt be refused untokenized is widened.
  if (!p.normalizer.empty()) s.max_piece_bytes *= 3;
  s.hf = std::move(pipeline);
  return std::shared_ptr<Tokenizer::State>(std::move(state));
}

Expected<std::shared_ptr<Tokenizer::State>> load_state(const HfTokenizerFiles& files) {
  // nlohmann's typed reads (value(), get<>()) throw on a field of the wrong type; a bad file is an error, not a crash (found by fuzz/hf_tokenizer_fuzz.cpp).
  try {
    return load_state_unchecked(files);
  } catch (const nlohmann::json::exception& e) {
    return Status::error(files.name + ": " + e.what());
  }
}

}  // namespace folio::hf
