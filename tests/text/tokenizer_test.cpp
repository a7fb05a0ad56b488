// Behaviour of Tokenizer and IncrementalDetokenizer beyond the goldens: round trips, pieces,
// special tokens, end-of-generation ids. Uses the same reference vocabularies.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "text/byte_level.h"
#include "text/unicode_utf8.h"
#include "tokenizer_fixtures.h"

namespace folio {
namespace {

using testing::golden_corpus;

const std::vector<std::string> kAllVocabs = {"smollm2", "llama-bpe", "qwen2", "llama-spm"};

// Whether a byte-level vocabulary has a token for every byte of text (SmolLM2's lacks a few
// control bytes, which then vanish, in llama.cpp as here).
bool every_byte_has_token(const Tokenizer& tokenizer, const std::string& text) {
  if (tokenizer.kind() != TokenizerKind::kBytePairByteLevel) return true;
  for (const char c : text) {
    std::string spelled;
    append_byte_level(spelled, std::string_view(&c, 1));
    if (!tokenizer.token_id(spelled)) return false;
  }
  return true;
}

TEST(TokenizerTest, DecodeInvertsEncodeOnValidUtf8) {
  for (const std::string& vocab : kAllVocabs) {
    FOLIO_LOAD_TOKENIZER_OR_FAIL(tokenizer, vocab);
    const bool spm = tokenizer->kind() == TokenizerKind::kSentencePieceBpe;
    int checked = 0;
    for (const auto& entry : golden_corpus()) {
      if (!is_valid_utf8(entry.bytes) || !every_byte_has_token(*tokenizer, entry.bytes)) continue;
      // SentencePiece writes spaces as U+2581 and decodes every U+2581 as a space, so text that
      // holds one comes back with a space there (llama.cpp's too).
      if (spm && entry.bytes.find("\xE2\x96\x81") != std::string::npos) continue;
      ++checked;
      // SentencePiece puts a space in front of the text (add_space_prefix); decode keeps it.
      const std::string expected = spm && !entry.bytes.empty() ? " " + entry.bytes : entry.bytes;
      EXPECT_EQ(tokenizer->decode(tokenizer->encode(entry.bytes, false, false)), expected) << vocab << " #" << entry.id;
      if (!spm) {  // special tokens print their own text
        EXPECT_EQ(tokenizer->decode(tokenizer->encode(entry.bytes, false, true)), entry.bytes)
            << vocab << " #" << entry.id << " with parse_special";
      }
    }
    EXPECT_GT(checked, 300) << vocab;
  }
}

TEST(TokenizerTest, DecodeSkipsSpecialTokensOnRequest) {
  FOLIO_LOAD_TOKENIZER_OR_FAIL(tokenizer, "smollm2");
  const std::string chat = "<|im_start|>user\nhi<|im_end|>\n";
  const std::vector<int32_t> ids = tokenizer->encode(chat, true, true);
  EXPECT_EQ(tokenizer->decode(ids), chat);
  EXPECT_EQ(tokenizer->decode(ids, /*skip_special=*/true), "user\nhi\n");
}

TEST(TokenizerTest, IncrementalDetokenizerEmitsOnlyWholeCharacters) {
  for (const std::string& vocab : kAllVocabs) {
    FOLIO_LOAD_TOKENIZER_OR_FAIL(tokenizer, vocab);
    int split_characters = 0;  // strings where some token ended inside a character
    for (const auto& entry : golden_corpus()) {
      const std::vector<int32_t> ids = tokenizer->encode(entry.bytes, true, true);
      IncrementalDetokenizer detokenizer(*tokenizer);
      std::string streamed;
      bool held_back = false;
      for (const int32_t id : ids) {
        const std::string chunk = detokenizer.push(id);
        EXPECT_TRUE(is_valid_utf8(chunk)) << vocab << " #" << entry.id;
        held_back |= detokenizer.pending_bytes() > 0;
        streamed += chunk;
      }
      const std::string tail = detokenizer.flush();
      EXPECT_TRUE(is_valid_utf8(tail));
      streamed += tail;
      split_characters += held_back;
      const std::string decoded = tokenizer->decode(ids);
      if (is_valid_utf8(decoded)) {
        EXPECT_EQ(streamed, decoded) << vocab << " #" << entry.id << " (" << entry.kind << ")";
      } else {
        EXPECT_EQ(streamed, sanitize_utf8(decoded)) << vocab << " #" << entry.id;
      }
    }
    // The corpus has emoji and CJK that these vocabularies spell with byte tokens.
    EXPECT_GT(split_characters, 5) << vocab;
  }
}

TEST(TokenizerTest, IncrementalDetokenizerHoldsPartialCharacterUntilComplete) {
  FOLIO_LOAD_TOKENIZER_OR_FAIL(tokenizer, "llama-spm");
  // U+1F600 is not in the Llama-2 vocabulary: it comes out as four byte tokens.
  const std::vector<int32_t> ids = tokenizer->encode("\xF0\x9F\x98\x80", false, false);
  ASSERT_EQ(ids.size(), 5u);  // "▁" then <0xF0> <0x9F> <0x98> <0x80>
  IncrementalDetokenizer detokenizer(*tokenizer);
  EXPECT_EQ(detokenizer.push(ids[0]), " ");
  EXPECT_EQ(detokenizer.push(ids[1]), "");
  EXPECT_EQ(detokenizer.push(ids[2]), "");
  EXPECT_EQ(detokenizer.push(ids[3]), "");
  EXPECT_EQ(detokenizer.pending_bytes(), 3u);
  EXPECT_EQ(detokenizer.push(ids[4]), "\xF0\x9F\x98\x80");
  EXPECT_EQ(detokenizer.flush(), "");

  // An unfinished character at the end becomes U+FFFD; a byte that cannot start one at once.
  IncrementalDetokenizer cut(*tokenizer);
  EXPECT_EQ(cut.push(ids[1]), "");
  EXPECT_EQ(cut.push(ids[2]), "");
  EXPECT_EQ(cut.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(cut.push(ids[4]), "\xEF\xBF\xBD");  // a lone continuation byte
}

TEST(TokenizerTest, TokenToPieceOfByteTokens) {
  FOLIO_LOAD_TOKENIZER_OR_FAIL(spm, "llama-spm");
  const std::optional<int32_t> newline = spm->token_id("<0x0A>");
  ASSERT_TRUE(newline.has_value());
  EXPECT_TRUE(spm->is_byte(*newline));
  EXPECT_EQ(spm->token_to_piece(*newline), "\n");
  EXPECT_EQ(spm->token_to_piece(*spm->token_id("<0xE4>")), "\xE4");
  EXPECT_EQ(spm->token_to_piece(*spm->token_id("<0x00>")), std::string(1, '\0'));
  EXPECT_EQ(spm->token_to_piece(*spm->token_id("\xE2\x96\x81the")), " the");
  EXPECT_EQ(spm->token_to_piece(spm->bos_id()), "<s>");
  EXPECT_EQ(spm->token_to_piece(-1), "");
  EXPECT_EQ(spm->token_to_piece(spm->vocab_size()), "");

  FOLIO_LOAD_TOKENIZER_OR_FAIL(bpe, "smollm2");
  EXPECT_EQ(bpe->token_to_piece(*bpe->token_id("\xC4\xA0")), " ");     // "Ġ", the space byte
  EXPECT_EQ(bpe->token_to_piece(*bpe->token_id("\xC4\x8A")), "\n");    // "Ċ"
  EXPECT_EQ(bpe->token_to_piece(*bpe->token_id("\xC3\xA4")), "\xE4");  // "ä" spells byte 0xE4
  EXPECT_EQ(bpe->token_to_piece(*bpe->token_id("\xC4\xA0the")), " the");
  EXPECT_EQ(bpe->token_to_piece(*bpe->token_id("<|im_start|>")), "<|im_start|>");
}

TEST(TokenizerTest, SpecialTokenTextsAreTokensOnlyWithParseSpecial) {
  FOLIO_LOAD_TOKENIZER_OR_FAIL(tokenizer, "smollm2");
  const int32_t im_start = *tokenizer->token_id("<|im_start|>");
  EXPECT_EQ(tokenizer->encode("<|im_start|>", false, true), std::vector<int32_t>{im_start});
  const std::vector<int32_t> as_text = tokenizer->encode("<|im_start|>", false, false);
  EXPECT_GT(as_text.size(), 1u);
  EXPECT_EQ(std::count(as_text.begin(), as_text.end(), im_start), 0);
  EXPECT_EQ(tokenizer->decode(as_text), "<|im_start|>");

  // Text on both sides of a special token is tokenized on its own.
  const std::vector<int32_t> mixed = tokenizer->encode("a<|im_start|>b", false, true);
  ASSERT_EQ(mixed.size(), 3u);
  EXPECT_EQ(mixed[1], im_start);
  EXPECT_TRUE(tokenizer->is_special(im_start));
  EXPECT_TRUE(tokenizer->is_control(im_start));
  EXPECT_FALSE(tokenizer->is_special(mixed[0]));
}

TEST(TokenizerTest, UserDefinedTokensAreAlwaysRecognised) {
  FOLIO_LOAD_TOKENIZER_OR_FAIL(tokenizer, "qwen2");
  const int32_t pad = *tokenizer->token_id("[PAD151650]");
  EXPECT_TRUE(tokenizer->is_user_defined(pad));
  EXPECT_FALSE(tokenizer->is_special(pad));
  EXPECT_EQ(tokenizer->encode("[PAD151650]", false, false), std::vector<int32_t>{pad});
  EXPECT_EQ(tokenizer->encode("[PAD151650]", false, true), std::vector<int32_t>{pad});
}

TEST(TokenizerTest, AddSpecialFollowsMetadata) {
  FOLIO_LOAD_TOKENIZER_OR_FAIL(llama3, "llama-bpe");
  EXPECT_TRUE(llama3->add_bos());
  EXPECT_EQ(llama3->encode("hi", true, false).front(), llama3->bos_id());
  EXPECT_NE(llama3->encode("hi", false, false).front(), llama3->bos_id());
  EXPECT_EQ(llama3->encode("", true, false), std::vector<int32_t>{llama3->bos_id()});

  FOLIO_LOAD_TOKENIZER_OR_FAIL(smollm, "smollm2");
  EXPECT_FALSE(smollm->add_bos());
  EXPECT_TRUE(smollm->encode("", true, false).empty());

  FOLIO_LOAD_TOKENIZER_OR_FAIL(spm, "llama-spm");
  EXPECT_TRUE(spm->add_bos());
  EXPECT_TRUE(spm->add_space_prefix());
  EXPECT_EQ(spm->encode("", true, false), std::vector<int32_t>{1});
}

TEST(TokenizerTest, EndOfGeneration) {
  FOLIO_LOAD_TOKENIZER_OR_FAIL(smollm, "smollm2");
  EXPECT_EQ(smollm->eos_id(), *smollm->token_id("<|im_end|>"));
  EXPECT_TRUE(smollm->is_end_of_generation(*smollm->token_id("<|im_end|>")));
  EXPECT_TRUE(smollm->is_end_of_generation(*smollm->token_id("<|endoftext|>")));
  EXPECT_FALSE(smollm->is_end_of_generation(*smollm->token_id("<|im_start|>")));
  EXPECT_FALSE(smollm->is_end_of_generation(*smollm->token_id("hello")));

  FOLIO_LOAD_TOKENIZER_OR_FAIL(llama3, "llama-bpe");
  EXPECT_TRUE(llama3->is_end_of_generation(*llama3->token_id("<|eot_id|>")));
  EXPECT_TRUE(llama3->is_end_of_generation(*llama3->token_id("<|end_of_text|>")));
  EXPECT_EQ(llama3->eot_id(), *llama3->token_id("<|eot_id|>"));
  EXPECT_FALSE(llama3->is_end_of_generation(llama3->bos_id()));

  FOLIO_LOAD_TOKENIZER_OR_FAIL(qwen2, "qwen2");
  EXPECT_TRUE(qwen2->is_end_of_generation(*qwen2->token_id("<|im_end|>")));
  EXPECT_EQ(qwen2->eot_id(), *qwen2->token_id("<|im_end|>"));
}

TEST(TokenizerTest, CopiesShareStateAndEncodeConcurrently) {
  FOLIO_LOAD_TOKENIZER_OR_FAIL(tokenizer, "llama-bpe");
  const Tokenizer copy = *tokenizer;  // one reference count, no vocabulary copy
  const std::string text = "Concurrent encoding of the same text: \xe4\xbd\xa0\xe5\xa5\xbd 12345!";
  const std::vector<int32_t> expected = tokenizer->encode(text, true, true);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) ok[t] += copy.encode(text, true, true) == expected;
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(ok[t], 200);
}

}  // namespace
}  // namespace folio
