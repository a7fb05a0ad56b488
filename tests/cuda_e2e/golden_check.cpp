// CUDA vs CPU (float32 activations, the closest CPU path to exact; --weights auto: the GPU keeps
// the file's block types quantized) on the golden prompts of
// tests/golden/model/smollm2_q4_1.json (or, --prompt-lengths 9,700, random prompts for synth models): relative error of the last prompt position's logits, and
// 32 greedy tokens each; where they part, the CPU's top-2 margin at that step says whether it
// was a near-tie (BF16 weights and activations move logits by ~1e-2).
#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_executor.h"
#include "e2e_common.h"

namespace folio::e2e {
int run_golden(const std::vector<std::string>& args) {
  const std::string path = arg_value(args, "--model", "");
  const std::string goldens =
      arg_value(args, "--goldens", std::string(FOLIO_SOURCE_DIR) + "/tests/golden/model/smollm2_q4_1.json");
  const int32_t steps = std::stoi(arg_value(args, "--tokens", "32"));
  // --weights auto: the file's block types kept quantized on the device (INT4 / INT8), against
  // the CPU's own kernels on the same file; bf16 (the default): dequantized at upload.
  const std::string weight_arg = arg_value(args, "--weights", "bf16");
  const cuda::WeightFormat weights = weight_arg == "auto" ? cuda::WeightFormat::kInt4 : cuda::WeightFormat::kBf16;
  Expected<LoadedModel> loaded = load_model(path);
  if (!loaded) {
    std::fprintf(stderr, "golden: %s\n", loaded.error().c_str());
    return 2;
  }
  nlohmann::json cases = nlohmann::json::array();
  const std::string lengths = arg_value(args, "--prompt-lengths", "");
  if (lengths.empty()) {
    std::ifstream in(goldens);
    std::stringstream text;
    text << in.rdbuf();
    cases = nlohmann::json::parse(text.str())["cases"];
  } else {
    // Random-weight models (folio synth): prompts of random ids at the given lengths, longer
    // than a sliding window where the model has one.
    std::mt19937 rng(7);
    std::uniform_int_distribution<int32_t> id(0, loaded->model->config().vocab_size - 1);
    std::stringstream list(lengths);
    for (std::string item; std::getline(list, item, ',');) {
      std::vector<int32_t> ids(static_cast<size_t>(std::stoi(item)));
      for (int32_t& t : ids) t = id(rng);
      cases.push_back({{"name", "random" + item}, {"prompt_ids", ids}});
    }
  }

  cpu::CpuBackend backend(0, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  Tally tally;
  std::printf("%-8s %7s %12s %10s %14s %12s\n", "case", "prompt", "logit relerr", "same top1", "first differ",
              "cpu margin");
  for (const nlohmann::json& c : cases) {
    const std::string name = c["name"];
    const std::vector<int32_t> prompt = c["prompt_ids"];
    const int32_t blocks = static_cast<int32_t>((prompt.size() + steps) / kBlock + 2);
    // One block table for every layer, as run_greedy builds it (and as the CUDA pool is).
    cpu::CpuExecutor cpu_executor(*loaded->model, backend, blocks + 1, kBlock, 0, KvFormat::kFp16, 0, false);
    // Sized for the whole prompt in one forward (the longest golden prompt has 1,184 tokens),
    // as the check feeds the executor directly, not through the engine's chunked prefill.
    const int32_t max_tokens = std::max<int32_t>(512, static_cast<int32_t>(prompt.size()));
    auto make_gpu = [&] {
      return cuda_executor(*loaded->model, PoolFormat{}, blocks + 4, 0, 64, max_tokens, true, {}, weights);
    };
    std::unique_ptr<cuda::CudaExecutor> gpu = make_gpu();
    if (&c == &cases.front()) {
      std::printf("golden: GPU weights %s (%.1f MB)\n", gpu->weight_format_description().c_str(),
                  gpu->stats().weight_bytes / 1e6);
    }
    const Greedy ref = run_greedy(cpu_executor, prompt, steps);
    const Greedy got = run_greedy(*gpu, prompt, steps);
    std::unique_ptr<cuda::CudaExecutor> sampler_gpu = make_gpu();
    const std::vector<SampledToken> sampled = run_device_greedy(*sampler_gpu, prompt, steps);
    double diff = 0, norm = 0;
    for (size_t i = 0; i < ref.last_prompt_logits.size(); ++i) {
      const double d = static_cast<double>(got.last_prompt_logits[i]) - ref.last_prompt_logits[i];
      diff += d * d;
      norm += static_cast<double>(ref.last_prompt_logits[i]) * ref.last_prompt_logits[i];
    }
    const double relerr = std::sqrt(diff / std::max(norm, 1e-30));
    size_t first = 0;
    while (first < ref.tokens.size() && ref.tokens[first] == got.tokens[first]) ++first;
    const bool same = first == ref.tokens.size();
    const float margin = same ? 0.0f : ref.margins[first];
    std::printf("%-8s %7zu %12.3e %10s %14s %12s\n", name.c_str(), prompt.size(), relerr,
                ref.tokens[0] == got.tokens[0] ? "yes" : "no", same ? "none" : std::to_string(first).c_str(),
                same ? "-" : std::to_string(margin).c_str());
    const bool finite = std::all_of(got.last_prompt_logits.begin(), got.last_prompt_logits.end(),
                                    [](float v) { return std::isfinite(v); });
    tally.check(finite && relerr < 5e-2,
                name + ": last-position logits relative error " + std::to_string(relerr) + " < 5e-2");
    // A parting of ways is explained when the CPU itself hesitated there (top-2 within 0.5).
    tally.check(same || margin < 0.5f, name + ": greedy tokens " +
                                           (same ? "identical for " + std::to_string(steps)
                                                 : "part at step " + std::to_string(first) +
                                                       " where the CPU's top-2 margin is " + std::to_string(margin)));
    // GPU sampling must pick exactly what the host argmax of the same GPU logits picked.
    size_t same_sampled = 0;
    bool logprobs_sane = true;
    while (same_sampled < sampled.size() && sampled[same_sampled].token == got.tokens[same_sampled]) ++same_sampled;
    for (const SampledToken& g : sampled)
      logprobs_sane = logprobs_sane && g.logprob <= 0.0f && std::isfinite(g.logprob);
    tally.check(same_sampled == sampled.size() && logprobs_sane,
                name + ": GPU greedy sampling equals the host argmax of GPU logits for " +
                    std::to_string(same_sampled) + "/" + std::to_string(sampled.size()) + " tokens, logprobs " +
                    (logprobs_sane ? "finite <= 0" : "BAD"));
  }
  std::printf("golden: %d passed, %d failed\n", tally.passed, tally.failed);
  return tally.failed == 0 ? 0 : 1;
}

}  // namespace folio::e2e
