// Unit tests of the pieces under the tokenizers: UTF-8 decoding, code point classes, the
// byte-level alphabet and the pre-tokenizers. No model files needed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/byte_level.h"
#include "text/pre_tokenizer.h"
#include "text/unicode_categories.h"
#include "text/unicode_utf8.h"

namespace folio {
namespace {

std::vector<std::string> split(PreTokenizerKind kind, const std::string& utf8) {
  const std::vector<char32_t> cps = decode_utf8_lenient(utf8);
  std::vector<std::string> words;
  size_t begin = 0;
  for (const uint32_t length : split_words(kind, cps)) {
    std::string word;
    for (size_t i = begin; i < begin + length; ++i) append_utf8(word, cps[i]);
    words.push_back(word);
    begin += length;
  }
  return words;
}

using Words = std::vector<std::string>;

TEST(Utf8Test, LenientDecodeReplacesEachBadByte) {
  EXPECT_EQ(decode_utf8_lenient("a\xC3\xA9"), (std::vector<char32_t>{'a', 0xE9}));
  EXPECT_EQ(decode_utf8_lenient("\xE4\xB8"
                                "a"),
            (std::vector<char32_t>{0xFFFD, 0xFFFD, 'a'}));
  EXPECT_EQ(decode_utf8_lenient("\xFF\x80"), (std::vector<char32_t>{0xFFFD, 0xFFFD}));
  // Like llama.cpp: overlong forms and surrogates are read, not rejected.
  EXPECT_EQ(decode_utf8_lenient(std::string("\xC0\x80", 2)), (std::vector<char32_t>{0}));
  EXPECT_EQ(decode_utf8_lenient("\xED\xA0\x80"), (std::vector<char32_t>{0xD800}));
  EXPECT_EQ(decode_utf8_lenient("\xF0\x9F\x98\x80"), (std::vector<char32_t>{0x1F600}));
  EXPECT_EQ(decode_utf8_lenient("\xF5\x80\x80\x80").front(), 0xFFFDu);  // past U+10FFFF
}

TEST(Utf8Test, StrictStepsAndSanitize) {
  EXPECT_TRUE(is_valid_utf8("h\xC3\xA9llo \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_valid_utf8("\xC0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xF4\x90\x80\x80"));
  EXPECT_FALSE(is_valid_utf8("\xE4\xB8"));
  EXPECT_EQ(next_utf8_step("\xE4\xB8").kind, Utf8Step::Kind::kIncomplete);
  EXPECT_EQ(next_utf8_step("\xE4\xB8"
                           "a")
                .kind,
            Utf8Step::Kind::kInvalid);
  EXPECT_EQ(next_utf8_step("\xE4\xB8"
                           "a")
                .length,
            2u);
  EXPECT_EQ(sanitize_utf8("a\xE4\xB8"
                          "b\xFF"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD");
  EXPECT_EQ(sanitize_utf8("\xF0\x9F\x98"), "\xEF\xBF\xBD");
}

TEST(UnicodeCategoriesTest, Classes) {
  EXPECT_EQ(codepoint_class('a'), CodepointClass::kLetter);
  EXPECT_EQ(codepoint_class('7'), CodepointClass::kNumber);
  EXPECT_EQ(codepoint_class(' '), CodepointClass::kSeparator);
  EXPECT_EQ(codepoint_class('\n'), CodepointClass::kControl);
  EXPECT_EQ(codepoint_class('!'), CodepointClass::kPunctuation);
  EXPECT_EQ(codepoint_class('+'), CodepointClass::kSymbol);
  EXPECT_EQ(codepoint_class(0x4E2D), CodepointClass::kLetter);   // 中
  EXPECT_EQ(codepoint_class(0x0663), CodepointClass::kNumber);   // Arabic-Indic three
  EXPECT_EQ(codepoint_class(0x0301), CodepointClass::kMark);     // combining acute
  EXPECT_EQ(codepoint_class(0x1F600), CodepointClass::kSymbol);  // emoji
  EXPECT_EQ(codepoint_class(0x0378), CodepointClass::kUnassigned);
  EXPECT_EQ(codepoint_class(0x2FFC), CodepointClass::kSymbol);  // new in Unicode 15.1
  EXPECT_EQ(codepoint_class(0x110000), CodepointClass::kUnassigned);
  EXPECT_TRUE(is_unicode_whitespace(0x3000));
  EXPECT_TRUE(is_unicode_whitespace(0x85));
  EXPECT_FALSE(is_unicode_whitespace(0x200B));  // zero width space is not White_Space
  EXPECT_FALSE(is_unicode_whitespace(0x1C));
}

TEST(ByteLevelTest, AlphabetRoundTrips) {
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_to_unicode(static_cast<uint8_t>(b));
    EXPECT_EQ(unicode_to_byte(cp), std::optional<uint8_t>(static_cast<uint8_t>(b)));
  }
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);   // Ġ
  EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(byte_to_unicode('a'), static_cast<char32_t>('a'));
  std::string spelled;
  append_byte_level(spelled, " hi\n");
  EXPECT_EQ(spelled, "\xC4\xA0hi\xC4\x8A");
  EXPECT_EQ(byte_level_to_bytes(spelled), " hi\n");
}

TEST(PreTokenizerTest, Names) {
  EXPECT_EQ(pre_tokenizer_from_name("smollm"), PreTokenizerKind::kSmolLM);
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(pre_tokenizer_from_name("qwen2"), PreTokenizerKind::kQwen2);
  EXPECT_EQ(pre_tokenizer_from_name("gpt-2"), PreTokenizerKind::kGpt2);
  EXPECT_EQ(pre_tokenizer_from_name("default"), PreTokenizerKind::kDefault);
  EXPECT_EQ(pre_tokenizer_from_name("no-such-pre"), std::nullopt);
}

TEST(PreTokenizerTest, Gpt2) {
  EXPECT_EQ(split(PreTokenizerKind::kGpt2, "Hello world's 12 ok!!  x"),
            (Words{"Hello", " world", "'s", " 12", " ok", "!!", " ", " x"}));
  EXPECT_EQ(split(PreTokenizerKind::kGpt2, "DON'T"), (Words{"DON", "'", "T"}));
  EXPECT_EQ(split(PreTokenizerKind::kGpt2, "a   "), (Words{"a", "   "}));
}

TEST(PreTokenizerTest, SmolLMIsolatesEveryDigit) {
  EXPECT_EQ(split(PreTokenizerKind::kSmolLM, "abc 123"), (Words{"abc", " ", "1", "2", "3"}));
  EXPECT_EQ(split(PreTokenizerKind::kSmolLM, "x\xD9\xA3y"), (Words{"x", "\xD9\xA3", "y"}));
}

TEST(PreTokenizerTest, Llama3) {
  EXPECT_EQ(split(PreTokenizerKind::kLlama3, "1234567 DON'T"), (Words{"123", "456", "7", " DON", "'T"}));
  EXPECT_EQ(split(PreTokenizerKind::kLlama3, "a \n\n b"), (Words{"a", " \n\n", " b"}));
  EXPECT_EQ(split(PreTokenizerKind::kLlama3, "x!!\n\ny"), (Words{"x", "!!\n\n", "y"}));
  EXPECT_EQ(split(PreTokenizerKind::kLlama3, "\xE4\xBD\xA0\xE5\xA5\xBD!"), (Words{"\xE4\xBD\xA0\xE5\xA5\xBD", "!"}));
}

TEST(PreTokenizerTest, Qwen2DigitsOneByOne) {
  EXPECT_EQ(split(PreTokenizerKind::kQwen2, "ab 123"), (Words{"ab", " ", "1", "2", "3"}));
}

TEST(PreTokenizerTest, Default) {
  EXPECT_EQ(split(PreTokenizerKind::kDefault, "a+b=12345"), (Words{"a", "+", "b", "=", "123", "45"}));
}

}  // namespace
}  // namespace folio
