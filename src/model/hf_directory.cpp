#include "model/hf_directory.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace folio {
namespace {

using nlohmann::json;

// The file's text; nullopt when it does not exist, an error when it exists but cannot be read.
Expected<std::optional<std::string>> read_optional(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::error("cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return std::optional<std::string>(text.str());
}

}  // namespace

static Expected<HfGenerationConfig> parse_generation_config_unchecked(const std::string& json_text,
                                                                      const std::string& name) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return Status::error(name + ": not a JSON object");
  HfGenerationConfig g;
  if (const auto eos = j.find("eos_token_id"); eos != j.end() && !eos->is_null()) {
    const json list = eos->is_array() ? *eos : json::array({*eos});
    for (const json& id : list) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 31)) {
        return Status::error(name + ": eos_token_id " + eos->dump() + " is not a token id or a list of them");
      }
      g.eos_token_ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
  }
  const auto number = [&](const char* key, std::optional<float>& out) -> Status {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::ok();
    if (!it->is_number()) return Status::error(name + ": '" + key + "' must be a number, got " + it->dump());
    out = it->get<float>();
    return Status::ok();
  };
  const auto integer = [&](const char* key, std::optional<int32_t>& out) -> Status {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) return Status::ok();
    if (!it->is_number_integer() || it->get<int64_t>() < -1 || it->get<int64_t>() > (int64_t{1} << 30)) {
      return Status::error(name + ": '" + key + "' must be an integer, got " + it->dump());
    }
    out = static_cast<int32_t>(it->get<int64_t>());
    return Status::ok();
  };
  for (const Status& s : {number("temperature", g.temperature), number("top_p", g.top_p), integer("top_k", g.top_k),
                          number("min_p", g.min_p), number("repetition_penalty", g.repetition_penalty),
                          integer("max_new_tokens", g.max_new_tokens)}) {
    if (!s) return s;
  }
  return g;
}

Expected<HfGenerationConfig> parse_hf_generation_config(const std::string& json_text, const std::string& name) {
  // nlohmann's typed reads (value(), get<>()) throw on a field of the wrong type; a bad file is an error, not a crash (found by fuzz/hf_tokenizer_fuzz.cpp).
  try {
    return parse_generation_config_unchecked(json_text, name);
  } catch (const nlohmann::json::exception& e) {
    return Status::error(name + ": " + e.what());
  }
}

static Expected<HfDirectory> read_hf_directory_unchecked(const std::string& dir) {
  HfDirectory d;
  d.dir = dir;
  Expected<HfModelConfig> model = read_hf_config(dir);
  if (!model) return model.status();
  d.model = std::move(model).value();

  Expected<HfTokenizerFiles> tokenizer = read_hf_tokenizer_files(dir);
  if (!tokenizer) return tokenizer.status();
  d.tokenizer = std::move(tokenizer).value();

  Expected<std::optional<std::string>> jinja = read_optional(dir + "/chat_template.jinja");
  if (!jinja) return jinja.status();
  if (*jinja) {
    d.chat_template = std::move(**jinja);
  } else if (!d.tokenizer.tokenizer_config_json.empty()) {
    const json c = json::parse(d.tokenizer.tokenizer_config_json, nullptr, /*allow_exceptions=*/false);
    if (!c.is_object()) return Status::error(dir + "/tokenizer_config.json: not a JSON object");
    if (const auto t = c.find("chat_template"); t != c.end() && !t->is_null()) {
      if (t->is_string()) {
        d.chat_template = t->get<std::string>();
      } else if (t->is_array()) {
        for (const json& named : *t) {
          if (named.is_object() && named.value("name", "") == "default" && named.contains("template") &&
              named["template"].is_string()) {
            d.chat_template = named["template"].get<std::string>();
          }
        }
        if (!d.chat_template) return Status::error(dir + "/tokenizer_config.json: chat_template lists no 'default'");
      } else {
        return Status::error(dir + "/tokenizer_config.json: chat_template is neither a string nor a list");
      }
    }
  }

  Expected<std::optional<std::string>> generation = read_optional(dir + "/generation_config.json");
  if (!generation) return generation.status();
  if (*generation) {
    Expected<HfGenerationConfig> g = parse_hf_generation_config(**generation, dir + "/generation_config.json");
    if (!g) return g.status();
    d.generation = std::move(g).value();
  }
  d.tokenizer.generation_eos_ids = d.generation.eos_token_ids;
  return d;
}

Expected<HfDirectory> read_hf_directory(const std::string& dir) {
  // nlohmann's typed reads (value(), get<>()) throw on a field of the wrong type; a bad file is an error, not a crash (found by fuzz/hf_tokenizer_fuzz.cpp).
  try {
    return read_hf_directory_unchecked(dir);
  } catch (const nlohmann::json::exception& e) {
    return Status::error(dir + ": " + e.what());
  }
}

Expected<HfTokenizerFiles> read_hf_tokenizer_files(const std::string& dir) {
  HfTokenizerFiles files;
  Expected<std::optional<std::string>> tokenizer = read_optional(dir + "/tokenizer.json");
  if (!tokenizer) return tokenizer.status();
  if (!*tokenizer) {
    return Status::error(dir +
                         ": no tokenizer.json (folio reads the fast tokenizer's file; a directory with only a "
                         "SentencePiece tokenizer.model can be converted by transformers' save_pretrained)");
  }
  files.name = dir + "/tokenizer.json";
  files.tokenizer_json = std::move(**tokenizer);
  Expected<std::optional<std::string>> config = read_optional(dir + "/tokenizer_config.json");
  if (!config) return config.status();
  if (*config) files.tokenizer_config_json = std::move(**config);
  Expected<std::optional<std::string>> generation = read_optional(dir + "/generation_config.json");
  if (!generation) return generation.status();
  if (*generation) {
    Expected<HfGenerationConfig> g = parse_hf_generation_config(**generation, dir + "/generation_config.json");
    if (!g) return g.status();
    files.generation_eos_ids = g->eos_token_ids;
  }
  return files;
}

}  // namespace folio
