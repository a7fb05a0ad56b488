// tokenizer.json pieces on small hand-made files: what each rule does on a case small enough to
// work out by hand, and every malformed file refused with a message naming the problem. (The
// goldens in hf_tokenizer_golden_test.cpp check real files against the tokenizers library.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "text/hf_tokenizer_files.h"
#include "text/tokenizer.h"

namespace folio {
namespace {

using nlohmann::json;

// A character-level BPE over a few letters, with added tokens and byte fallback.
json base_spec() {
  return json::parse(R"({
    "version": "1.0",
    "added_tokens": [
      {"id": 10, "content": "<s>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false},
      {"id": 11, "content": "</s>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false},
      {"id": 12, "content": "<|im_end|>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false},
      {"id": 13, "content": "<unk>", "special": true, "normalized": false, "lstrip": false, "rstrip": false, "single_word": false}
    ],
    "normalizer": null,
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [10], "tokens": ["<s>"]}}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "_"}, "content": " "},
        {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
      "ignore_merges": false,
      "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "_": 5, "_a": 6, "<0xC3>": 7, "<0xA9>": 8, "<0x41>": 9,
                "<s>": 10, "</s>": 11, "<|im_end|>": 12, "<unk>": 13},
      "merges": [["a", "b"], ["ab", "c"], ["_", "a"]]}
  })");
}

Expected<Tokenizer> make(const json& spec, const std::string& config = "", std::vector<int32_t> eos = {}) {
  HfTokenizerFiles files;
  files.name = "test/tokenizer.json";
  files.tokenizer_json = spec.dump();
  files.tokenizer_config_json = config;
  files.generation_eos_ids = std::move(eos);
  return Tokenizer::from_hf(files);
}

using Ids = std::vector<int32_t>;

TEST(HfTokenizer, MergesByRankAndTemplateAddsBos) {
  Expected<Tokenizer> t = make(base_spec());
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->kind(), TokenizerKind::kHuggingFace);
  EXPECT_EQ(t->vocab_size(), 14);
  EXPECT_EQ(t->encode("abc", true, true), (Ids{10, 4}));
  EXPECT_EQ(t->encode("abcab_a", false, true), (Ids{4, 3, 6}));
  EXPECT_EQ(t->encode("ba", false, true), (Ids{1, 0}));
}

TEST(HfTokenizer, BothMergeFormsAgree) {
  json strings = base_spec();
  strings["model"]["merges"] = json::array({"a b", "ab c", "_ a"});
  Expected<Tokenizer> a = make(base_spec()), b = make(strings);
  ASSERT_TRUE(a && b);
  for (const char* text : {"abc", "abab_abc", "cab"})
    EXPECT_EQ(a->encode(text, false, true), b->encode(text, false, true));
}

TEST(HfTokenizer, ByteFallbackFuseUnkAndDecoding) {
  Expected<Tokenizer> t = make(base_spec());
  ASSERT_TRUE(t) << t.error();
  // é is C3 A9: two byte tokens. A has a byte token; "x" and "y" have nothing: one fused unknown.
  EXPECT_EQ(t->encode("\xC3\xA9"
                      "A",
                      false, true),
            (Ids{7, 8, 9}));
  EXPECT_EQ(t->encode("xya", false, true), (Ids{13, 0}));
  // The decoder's Strip removes the text's leading space; a piece keeps it (it continues a text).
  EXPECT_EQ(t->decode(Ids{5, 0, 1}), "ab");
  EXPECT_EQ(t->token_to_piece(5), " ");
  // Byte tokens that do not form UTF-8: one U+FFFD each in a decode, the raw byte as a piece.
  EXPECT_EQ(t->decode(Ids{0, 7}), "a\xEF\xBF\xBD");
  EXPECT_EQ(t->token_to_piece(7), "\xC3");
  EXPECT_EQ(t->decode(Ids{7, 8}), "\xC3\xA9");
  EXPECT_EQ(t->decode(Ids{10, 0, 11}, /*skip_special=*/true), "a");
  EXPECT_EQ(t->decode(Ids{10, 0, 11}), "<s>a</s>");
}

TEST(HfTokenizer, SpecialTokensParsedOnlyWhereAllowed) {
  Expected<Tokenizer> t = make(base_spec());
  ASSERT_TRUE(t) << t.error();
  const std::string text = "a<|im_end|>b";
  EXPECT_EQ(t->encode(text, false, true), (Ids{0, 12, 1}));
  EXPECT_NE(t->encode(text, false, false), (Ids{0, 12, 1}));
  EXPECT_TRUE(t->contains_control_text(text));
  EXPECT_FALSE(t->contains_control_text("ab"));
  // Inside a literal span (a user's message) the marker is characters.
  const TextSpan literal[] = {{1, 10}};
  const Ids ids = t->encode(text, false, true, literal);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 12), 0);
  const std::string two = "<|im_end|>a<|im_end|>";
  const TextSpan second[] = {{11, 10}};
  const Ids some = t->encode(two, false, true, second);
  EXPECT_EQ(some.front(), 12);
  EXPECT_EQ(std::count(some.begin(), some.end(), 12), 1);
}

TEST(HfTokenizer, ConfigAndGenerationSettings) {
  Expected<Tokenizer> t = make(base_spec(), R"({"bos_token": "<s>", "eos_token": {"content": "</s>"},
                                             "add_bos_token": false})",
                               {12});
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->bos_id(), 10);
  EXPECT_EQ(t->eos_id(), 11);
  EXPECT_FALSE(t->add_bos());
  EXPECT_EQ(t->encode("a", true, true), (Ids{0}));
  EXPECT_EQ(t->end_of_generation_ids(), (Ids{11, 12}));
  EXPECT_TRUE(t->is_special(12));
  Expected<Tokenizer> bad = make(base_spec(), R"({"eos_token": "<nope>"})");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("<nope>"), std::string::npos);
  Expected<Tokenizer> bad_eos = make(base_spec(), "", {99});
  ASSERT_FALSE(bad_eos);
  EXPECT_NE(bad_eos.error().find("99"), std::string::npos);
}

TEST(HfTokenizer, AddedTokenStripAndSingleWord) {
  json spec = base_spec();
  spec["added_tokens"].push_back({{"id", 14},
                                  {"content", "<m>"},
                                  {"special", true},
                                  {"normalized", false},
                                  {"lstrip", true},
                                  {"rstrip", true},
                                  {"single_word", false}});
  spec["added_tokens"].push_back({{"id", 15},
                                  {"content", "ca"},
                                  {"special", false},
                                  {"normalized", true},
                                  {"lstrip", false},
                                  {"rstrip", false},
                                  {"single_word", true}});
  Expected<Tokenizer> t = make(spec);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->encode("a  <m>  b", false, true), (Ids{0, 14, 1}));  // the spaces go with <m>
  EXPECT_EQ(t->encode("ca", false, true), (Ids{15}));
  EXPECT_EQ(t->encode("b ca", false, false), (Ids{1, 13, 15}));  // " " is unknown here
  EXPECT_NE(t->encode("cab", false, true)[0], 15);               // inside a word: not the token
}

TEST(HfTokenizer, RefusesMalformedFilesByName) {
  struct Case {
    std::function<void(json&)> edit;
    const char* message;
  };
  const Case cases[] = {
      {[](json& j) {
         j["model"]["merges"].push_back({"c", "zz"});
       },
       "merge 4"},
      {[](json& j) { j["model"]["merges"] = json::array({"a b c"}); }, "one space"},
      {[](json& j) { j["model"]["merges"] = json::array({42}); }, "neither"},
      {[](json& j) { j["model"]["type"] = "WordPiece"; }, "WordPiece"},
      {[](json& j) { j["model"]["unk_token"] = "<missing>"; }, "<missing>"},
      {[](json& j) { j["model"]["dropout"] = 0.1; }, "dropout"},
      {[](json& j) {
         j["normalizer"] = {{"type", "Precompiled"}};
       },
       "Precompiled"},
      {[](json& j) {
         j["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
       },
       "BertPreTokenizer"},
      {[](json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
       },
       "decoder 'WordPiece'"},
      {[](json& j) {
         j["post_processor"] = {{"type", "Unknown"}};
       },
       "post_processor 'Unknown'"},
      {[](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}, {"behavior", "Isolated"}, {"invert", false}};
       },
       "(unclosed"},
      {[](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Sideways"}, {"invert", false}};
       },
       "Sideways"},
      {[](json& j) { j["added_tokens"][0]["id"] = -3; }, "out of range"},
      {[](json& j) { j["model"]["vocab"]["q"] = "seven"; }, "'q'"},
      // Fields of the wrong type: nlohmann's typed reads throw, which used to end the process
      // (found by fuzz/hf_tokenizer_fuzz.cpp); now each is an error naming the file.
      {[](json& j) { j["added_tokens"][0]["special"] = "yes"; }, "type must be boolean"},
      {[](json& j) { j["model"]["byte_fallback"] = "true"; }, "type must be boolean"},
      {[](json& j) { j["model"]["type"] = 7; }, "type must be string"},
  };
  for (const Case& c : cases) {
    json spec = base_spec();
    c.edit(spec);
    Expected<Tokenizer> t = make(spec);
    ASSERT_FALSE(t) << c.message;
    EXPECT_NE(t.error().find(c.message), std::string::npos) << t.error();
    EXPECT_NE(t.error().find("tokenizer.json"), std::string::npos) << t.error();
  }
  HfTokenizerFiles garbage;
  garbage.tokenizer_json = "{ not json";
  EXPECT_FALSE(Tokenizer::from_hf(garbage));
}

TEST(HfTokenizer, InvalidUtf8BecomesReplacementCharacters) {
  json spec = base_spec();
  spec["model"]["vocab"]["\xEF\xBF\xBD"] = 16;
  Expected<Tokenizer> t = make(spec);
  ASSERT_TRUE(t) << t.error();
  EXPECT_EQ(t->encode("a\xFF"
                      "b",
                      false, true),
            (Ids{0, 16, 1}));
  const TextSpan literal[] = {{2, 10}};
  const Ids ids = t->encode(
      "\xFF"
      "a<|im_end|>",
      false, true, literal);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 12), 0);  // the span moved with the text
}

}  // namespace
}  // namespace folio
