// tokenizer.json files run by folio must give the `tokenizers` library's ids and decodes
// (tests/golden/hf/tokenizers, written by scripts/make-hf-goldens.py) on the GGUF golden corpus
// and the adversarial strings, with special tokens parsed and not, for every variant
// scripts/hf_test_models.py builds: the four converted vocabularies, the shapes real
// checkpoints use, and two real tokenizer.json files from PyPI. The same strings are also cut
// into words both ways (hand-written matchers and PCRE2), which must agree.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/test_paths.h"
#include "text/hf_pre_tokenizer.h"
#include "text/hf_tokenizer_files.h"
#include "text/tokenizer.h"
#include "text/unicode_utf8.h"

namespace folio {
namespace {

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(testing::read_file(path));
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

std::vector<std::string> hex_strings(const std::string& path) {
  std::vector<std::string> out;
  for (const nlohmann::json& record : read_jsonl(path)) {
    const std::string hex = record.at("hex");
    std::string bytes;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    out.push_back(bytes);
  }
  return out;
}

std::string tokenizer_dir(const std::string& variant) {
  return testing::models_dir() + "/hf/tokenizers/" + variant;
}

Expected<Tokenizer> load(const std::string& variant) {
  HfTokenizerFiles files;
  const std::string dir = tokenizer_dir(variant);
  files.name = dir + "/tokenizer.json";
  files.tokenizer_json = testing::read_file(files.name);
  if (std::filesystem::exists(dir + "/tokenizer_config.json")) {
    files.tokenizer_config_json = testing::read_file(dir + "/tokenizer_config.json");
  }
  return Tokenizer::from_hf(files);
}

std::string ids_text(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  return out.str();
}

const std::vector<std::string> kVariants = {
    "smollm2",          "smollm2-digits",      "llama-bpe",    "llama-bpe-bos",   "qwen2",     "qwen2-nfc", "llama-spm",
    "llama-spm-legacy", "llama-spm-metaspace", "added-tokens", "split-behaviors", "anthropic", "deepseek",  "gemma3"};

class HfTokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(HfTokenizerGolden, MatchesTokenizersLibrary) {
  const std::string variant = GetParam();
  if (!std::filesystem::exists(tokenizer_dir(variant) + "/tokenizer.json")) {
    GTEST_FAIL() << "missing " << tokenizer_dir(variant) << ": run scripts/hf_test_models.py (make test does)";
  }
  Expected<Tokenizer> tokenizer = load(variant);
  ASSERT_TRUE(tokenizer) << tokenizer.error();
  const std::string golden_dir = testing::source_dir() + "/tests/golden";
  const std::vector<std::string> corpus = hex_strings(golden_dir + "/tokenizer/corpus.jsonl");
  const std::vector<std::string> adversarial = hex_strings(golden_dir + "/hf/adversarial.jsonl");
  const std::vector<nlohmann::json> golden = read_jsonl(golden_dir + "/hf/tokenizers/" + variant + ".jsonl");
  ASSERT_EQ(golden.size(), 1 + corpus.size() + adversarial.size()) << "stale goldens: rerun scripts/make-hf-goldens.py";
  int mismatches = 0;
  for (size_t i = 1; i < golden.size(); ++i) {
    const nlohmann::json& record = golden[i];
    const bool from_corpus = record.at("source") == "corpus";
    const std::string& text = (from_corpus ? corpus : adversarial).at(record.at("id").get<size_t>());
    const auto plain = tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/false);
    const auto special = tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/true);
    const std::string decoded = tokenizer->decode(special, /*skip_special=*/false);
    const std::string decoded_skip = tokenizer->decode(special, /*skip_special=*/true);
    const bool ok = plain == record.at("plain").get<std::vector<int32_t>>() &&
                    special == record.at("special").get<std::vector<int32_t>>() &&
                    decoded == record.at("decode").get<std::string>() &&
                    decoded_skip == record.at("decode_skip").get<std::string>();
    if (!ok && ++mismatches <= 8) {
      ADD_FAILURE() << variant << " " << record.at("source") << " #" << record.at("id") << " "
                    << nlohmann::json(sanitize_utf8(text)).dump() << "\n  plain    folio " << ids_text(plain)
                    << "\n           lib   " << ids_text(record.at("plain")) << "\n  special  folio "
                    << ids_text(special) << "\n           lib   " << ids_text(record.at("special"))
                    << "\n  decode   folio " << nlohmann::json(sanitize_utf8(decoded)).dump() << "\n           lib   "
                    << record.at("decode").dump() << "\n  skip     folio "
                    << nlohmann::json(sanitize_utf8(decoded_skip)).dump() << "\n           lib   "
                    << record.at("decode_skip").dump();
    }
  }
  EXPECT_EQ(mismatches, 0) << variant << ": " << mismatches << " of " << golden.size() - 1 << " strings differ";
}

INSTANTIATE_TEST_SUITE_P(Variants, HfTokenizerGolden, ::testing::ValuesIn(kVariants), [](const auto& info) {
  std::string name = info.param;
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
});

// The hand-written matchers stand in for three regexes; on every golden string they must cut
// exactly where PCRE2 running the regex cuts.
TEST(HfPreTokenizer, FastMatchersAgreeWithPcre2) {
  const std::string golden_dir = testing::source_dir() + "/tests/golden";
  std::vector<std::string> strings = hex_strings(golden_dir + "/tokenizer/corpus.jsonl");
  for (std::string& s : hex_strings(golden_dir + "/hf/adversarial.jsonl")) strings.push_back(std::move(s));
  int checked = 0;
  for (const std::string variant : {"smollm2", "llama-bpe", "qwen2", "anthropic"}) {
    const std::string path = tokenizer_dir(variant) + "/tokenizer.json";
    if (!std::filesystem::exists(path)) GTEST_FAIL() << "missing " << path << ": run scripts/hf_test_models.py";
    const nlohmann::json spec = nlohmann::json::parse(testing::read_file(path));
    Expected<hf::PreTokenizer> pre = hf::PreTokenizer::parse(spec.at("pre_tokenizer"));
    ASSERT_TRUE(pre) << pre.error();
    RegexScratch scratch;
    for (const std::string& raw : strings) {
      const std::string text = sanitize_utf8(raw);
      std::vector<std::string> words[2];
      for (const bool fast : {true, false}) {
        hf::PieceList list;
        list.text = text;
        list.pieces.push_back({0, text.size(), true});
        ASSERT_TRUE(pre->run(list, scratch, fast));
        for (const auto& p : list.pieces) words[fast].emplace_back(list.view(p));
      }
      EXPECT_EQ(words[1], words[0]) << variant << ": " << nlohmann::json(text).dump();
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

}  // namespace
}  // namespace folio
