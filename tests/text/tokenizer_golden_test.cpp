// Every golden string must tokenize exactly as llama.cpp does, for the five reference
// vocabularies, with parse_special off and on (add_special as the model's metadata says).
#include <gtest/gtest.h>

#include <sstream>

#include "tokenizer_fixtures.h"

namespace folio {
namespace {

using testing::golden_corpus;
using testing::golden_dir;
using testing::read_jsonl;

std::string format_ids(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? "," : "") << ids[i];
  return out.str();
}

std::string printable(const std::string& bytes) {
  std::ostringstream out;
  for (const unsigned char c : bytes) {
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out << c;
    } else {
      static const char* kHex = "0123456789abcdef";
      out << "\\x" << kHex[c >> 4] << kHex[c & 15];
    }
  }
  return out.str();
}

class TokenizerGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerGoldenTest, MatchesLlamaCpp) {
  const std::string vocab = GetParam();
  FOLIO_LOAD_TOKENIZER_OR_FAIL(tokenizer, vocab);
  const auto& corpus = golden_corpus();
  ASSERT_GE(corpus.size(), 220u) << "corpus missing: run scripts/make-tokenizer-goldens.py";
  const std::vector<nlohmann::json> golden = read_jsonl(golden_dir() + "/" + vocab + ".jsonl");
  ASSERT_EQ(golden.size(), corpus.size() + 1) << "stale goldens: rerun scripts/make-tokenizer-goldens.py";

  const nlohmann::json& meta = golden[0].at("meta");
  EXPECT_EQ(tokenizer->vocab_size(), meta.at("n_tokens").get<int32_t>());
  EXPECT_EQ(tokenizer->bos_id(), meta.at("bos").get<int32_t>());
  EXPECT_EQ(tokenizer->eos_id(), meta.at("eos").get<int32_t>());
  EXPECT_EQ(tokenizer->add_bos(), meta.at("add_bos").get<bool>());
  EXPECT_EQ(tokenizer->add_eos(), meta.at("add_eos").get<bool>());
  EXPECT_EQ(tokenizer->end_of_generation_ids(), meta.at("eog").get<std::vector<int32_t>>());

  int matched = 0;
  int reported = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const nlohmann::json& record = golden[i + 1];
    ASSERT_EQ(record.at("id").get<int>(), corpus[i].id);
    bool ok = true;
    for (const bool parse_special : {false, true}) {
      const auto expected = record.at(parse_special ? "special" : "plain").get<std::vector<int32_t>>();
      const std::vector<int32_t> actual = tokenizer->encode(corpus[i].bytes, true, parse_special);
      if (actual == expected) continue;
      ok = false;
      if (++reported <= 10) {
        ADD_FAILURE() << vocab << " #" << corpus[i].id << " (" << corpus[i].kind << ", parse_special=" << parse_special
                      << ") \"" << printable(corpus[i].bytes) << "\"\n  expected " << format_ids(expected)
                      << "\n  actual   " << format_ids(actual);
      }
    }
    matched += ok;
  }
  std::printf("[ golden ] %s: %d/%zu strings match llama.cpp\n", vocab.c_str(), matched, corpus.size());
  EXPECT_EQ(matched, static_cast<int>(corpus.size()));
}

INSTANTIATE_TEST_SUITE_P(Vocabs, TokenizerGoldenTest,
                         ::testing::Values("smollm2", "llama-bpe", "qwen2", "llama-spm", "gemma3"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

}  // namespace
}  // namespace folio
