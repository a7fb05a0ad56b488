// IncrementalDetokenizer (declared in tokenizer.h). A token may end in the middle of a
// character (byte-level BPE splits rare characters and emoji into byte tokens; SentencePiece
// falls back to <0xXX> tokens), so complete characters go out and the start of an unfinished
// one waits for the next token.
#include "text/tokenizer.h"
#include "text/unicode_utf8.h"

namespace folio {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  pending_ += tokenizer_.token_to_piece(id);
  std::string ready;
  std::string_view rest = pending_;
  while (!rest.empty()) {
    const Utf8Step step = next_utf8_step(rest);
    if (step.kind == Utf8Step::Kind::kIncomplete) break;  // wait for the rest of the character
    if (step.kind == Utf8Step::Kind::kChar) {
      ready.append(rest.substr(0, step.length));
    } else {
      append_utf8(ready, kReplacementChar);
    }
    rest.remove_prefix(step.length);
  }
  pending_.erase(0, pending_.size() - rest.size());
  return ready;
}

std::string IncrementalDetokenizer::flush() {
  std::string rest = sanitize_utf8(pending_);
  pending_.clear();
  return rest;
}

}  // namespace folio
