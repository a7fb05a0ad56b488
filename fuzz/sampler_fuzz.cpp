// libFuzzer target: the host Sampler and beam search's log-probabilities on arbitrary logits
// (any float bits: inf, NaN, denormals, huge values) with arbitrary sampling parameters within
// what SamplingParams::validate() accepts (the API's ranges are narrower still). Every call must
// give a token inside the vocabulary and top logprobs that are valid, sorted token ids, and
// never crash, hang or trip a sanitizer.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/beam_search.h"
#include "engine/sampler.h"

namespace {

void require(bool condition) {
  if (!condition) std::abort();
}

// Reads little pieces off the input; zeros once it runs out.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T take() {
    T value{};
    const size_t n = std::min(sizeof(T), size_ - at_);
    std::memcpy(&value, data_ + at_, n);
    at_ += n;
    return value;
  }
  size_t left() const { return size_ - at_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// A float from a byte: mostly the interesting values, else raw bits.
float pick_float(Input& in) {
  static const float kSpecial[] = {0.0f,
                                   -0.0f,
                                   1.0f,
                                   -1.0f,
                                   1e-45f,
                                   1e-38f,
                                   1e-5f,
                                   1e5f,
                                   3e38f,
                                   -3e38f,
                                   __builtin_inff(),
                                   -__builtin_inff(),
                                   __builtin_nanf("")};
  const uint8_t kind = in.take<uint8_t>();
  if (kind < 13 * 16) return kSpecial[kind % 13];
  return in.take<float>();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in(data, size);
  folio::SamplingParams params;
  params.temperature = pick_float(in);
  params.top_k = static_cast<int>(in.take<int32_t>());
  params.top_p = pick_float(in);
  params.min_p = pick_float(in);
  params.repetition_penalty = pick_float(in);
  params.frequency_penalty = pick_float(in);
  params.presence_penalty = pick_float(in);
  params.logprobs = static_cast<int>(in.take<int8_t>());
  if (in.take<uint8_t>() & 1) params.seed = in.take<uint64_t>();
  if (!params.validate()) return 0;  // the API refuses these up front with a 400

  const size_t vocab = 1 + in.take<uint16_t>() % 2048;
  std::vector<float> logits(vocab);
  const uint8_t fill = in.take<uint8_t>();  // a background value, then the input's floats
  const float background = fill & 1 ? -__builtin_inff() : static_cast<float>(fill) - 128.0f;
  for (float& l : logits) l = in.left() > 0 ? pick_float(in) : background;
  std::vector<int32_t> prompt, output;
  const size_t history = in.take<uint8_t>();
  for (size_t i = 0; i < history; ++i) {
    const int32_t token = static_cast<int32_t>(in.take<uint16_t>()) - 64;  // some outside the vocabulary
    (i % 2 ? output : prompt).push_back(token);
  }

  folio::SamplerScratch scratch;
  folio::Sampler sampler(params);
  for (int round = 0; round < 2; ++round) {  // the scratch is reused as the engine reuses it
    const folio::SampleResult result = sampler.sample(logits, prompt, output, scratch);
    require(result.token >= 0 && static_cast<size_t>(result.token) < vocab);
    if (params.logprobs >= 0) require(!(result.logprob > 0.0f));
    require(result.top_logprobs.size() <= static_cast<size_t>(params.logprobs < 0 ? 0 : params.logprobs));
    for (size_t i = 0; i < result.top_logprobs.size(); ++i) {
      const auto& [token, logprob] = result.top_logprobs[i];
      require(token >= 0 && static_cast<size_t>(token) < vocab);
      require(!(logprob > 0.0f));
      if (i > 0) require(!(logprob > result.top_logprobs[i - 1].second));
    }
    output.push_back(result.token);
  }

  const int32_t k = 1 + static_cast<int32_t>(in.take<uint8_t>() % 16);
  const auto top = folio::top_logprobs(logits, k);
  require(top.size() == std::min<size_t>(vocab, static_cast<size_t>(k)));
  for (size_t i = 0; i < top.size(); ++i) {
    require(top[i].first >= 0 && static_cast<size_t>(top[i].first) < vocab);
    require(!(top[i].second > 0.0));
    if (i > 0) require(!(top[i].second > top[i - 1].second));
  }
  return 0;
}
