#include "cli/bench_serve_dataset.h"

#include <algorithm>
#include <limits>

#include "cli/bench_workload.h"
#include "text/unicode_utf8.h"

namespace folio::cli {

RandomPromptTexts::RandomPromptTexts(const Tokenizer& tokenizer, uint64_t seed) : tokenizer_(tokenizer), rng_(seed) {
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    if (tokenizer.is_special(id) || tokenizer.is_user_defined(id) || tokenizer.is_byte(id)) continue;
    const std::string& piece = tokenizer.token_to_piece(id);
    if (!piece.empty() && is_valid_utf8(piece)) candidates_.push_back(id);
  }
}

std::string RandomPromptTexts::make(int32_t num_tokens) {
  // The server adds BOS / EOS the way the model's metadata asks; the text carries the rest.
  const int32_t added = (tokenizer_.add_bos() ? 1 : 0) + (tokenizer_.add_eos() ? 1 : 0);
  const size_t target = static_cast<size_t>(std::max(1, num_tokens - added));
  if (candidates_.empty()) return std::string(target, 'a');
  std::uniform_int_distribution<size_t> pick(0, candidates_.size() - 1);
  std::vector<int32_t> ids;
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  // Decoding and encoding again merges or splits tokens at their seams; trimming the
  // re-encoded ids (or topping them up) converges in a few rounds.
  for (int round = 0; round < 32; ++round) {
    while (ids.size() < target) ids.push_back(candidates_[pick(rng_)]);
    ids.resize(target);
    std::string text = sanitize_utf8(tokenizer_.decode(ids));
    ids = tokenizer_.encode(text, /*add_special=*/false, /*parse_special=*/false);
    const size_t distance = ids.size() > target ? ids.size() - target : target - ids.size();
    if (distance < best_distance) {
      best_distance = distance;
      best = std::move(text);
    }
    if (distance == 0) break;
  }
  return best;
}

std::vector<ServeBenchRequest> make_serve_requests(const ServeDatasetOptions& options, const Tokenizer& tokenizer) {
  std::vector<int32_t> prompt_lengths, output_lengths;
  if (options.kind == ServeDataset::kFixed) {
    prompt_lengths.assign(static_cast<size_t>(options.num_prompts), options.input_len);
    output_lengths.assign(static_cast<size_t>(options.num_prompts), options.output_len);
  } else {
    MixedLengthShape shape;
    shape.num_requests = options.num_prompts;
    shape.scale = options.scale;
    shape.seed = options.seed;
    // Only the lengths are kept: the texts must survive a round trip through the tokenizer.
    for (const WorkloadRequest& r : make_mixed_length_workload(shape, {}, tokenizer.vocab_size())) {
      prompt_lengths.push_back(static_cast<int32_t>(r.prompt.size()));
      output_lengths.push_back(r.max_tokens);
    }
  }
  RandomPromptTexts texts(tokenizer, options.seed ^ 0x9E3779B97F4A7C15ull);
  std::vector<ServeBenchRequest> requests(prompt_lengths.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    requests[i].prompt = texts.make(prompt_lengths[i]);
    requests[i].prompt_tokens = static_cast<int32_t>(
        tokenizer.encode(requests[i].prompt, /*add_special=*/true, /*parse_special=*/false).size());
    requests[i].max_tokens = output_lengths[i];
  }
  return requests;
}

}  // namespace folio::cli
