// The Llama-family variants the default model does not exercise (Llama-3 rope scaling and an
// untied output, Qwen2's QKV biases and rotate-half rope, the "mistral" architecture with Q8_0
// weights), end to end on tiny random-weight GGUFs against the float64 reference
// (scripts/make-tiny-model-goldens.py): last-position logits, and greedy tokens up to the first
// step where the reference itself is a near-tie.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "engine/sequence_runner.h"
#include "model/model_weights.h"
#include "support/cpu_engine.h"
#include "support/test_paths.h"

namespace folio {
namespace {

class TinyModelGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyModelGolden, FollowsFloat64Reference) {
  const std::string base = testing::source_dir() + "/tests/golden/tiny/" + GetParam();
  const nlohmann::json golden = nlohmann::json::parse(testing::read_file(base + ".json"));
  Expected<GgufFile> file = GgufFile::open(base + ".gguf");
  ASSERT_TRUE(file) << file.error();
  Expected<std::unique_ptr<ModelWeights>> model = ModelWeights::load(*file);
  ASSERT_TRUE(model) << model.error();
  EXPECT_EQ((*model)->config().architecture, golden["architecture"].get<std::string>());
  cpu::CpuBackend backend(2, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  const auto executor = testing::sequence_executor(**model, backend, 128);
  SequenceRunner runner(*executor, 128);
  const std::vector<int32_t> prompt = golden["prompt_ids"];
  Expected<std::vector<float>> logits = runner.append(prompt);
  ASSERT_TRUE(logits) << logits.error();
  const std::vector<double> reference = golden["last_logits"];
  ASSERT_EQ(reference.size(), logits->size());
  double max_abs = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) max_abs = std::max(max_abs, std::fabs((*logits)[i] - reference[i]));
  std::printf("[%s] last logits max |folio - float64| = %.2e\n", GetParam(), max_abs);
  EXPECT_LT(max_abs, 2e-3);

  const std::vector<int32_t> expected = golden["generated_ids"];
  const std::vector<double> margins = golden["generated_margins"];
  for (size_t step = 0; step < expected.size(); ++step) {
    const int32_t token = static_cast<int32_t>(std::max_element(logits->begin(), logits->end()) - logits->begin());
    if (token != expected[step]) {
      EXPECT_LT(margins[step], 1e-2) << GetParam() << " differs at step " << step << " without a near-tie";
      break;
    }
    const int32_t next[1] = {token};
    logits = runner.append(next);
    ASSERT_TRUE(logits) << logits.error();
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, TinyModelGolden, ::testing::Values("tiny-llama3", "tiny-qwen2", "tiny-mistral"));

}  // namespace
}  // namespace folio
