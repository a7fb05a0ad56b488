// LayerRunner (backend/cpu/layer_runner.h): a prompt taken through the layers one at a time,
// its residual stream held between them, is the executor's forward pass (the logits of every
// position), and the statistics it collects for one layer at a time are those a full pass
// collects for that layer. Swapping a layer's weights changes that layer's output only.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <numeric>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_executor.h"
#include "backend/cpu/layer_runner.h"
#include "engine/sequence_runner.h"
#include "executor/kv_pool_sizing.h"
#include "model/gguf_file.h"
#include "support/test_paths.h"

namespace folio {
namespace {

struct Model {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<ModelWeights> weights;
};

Model open_default() {
  Model m;
  const std::string path = testing::default_model_path();
  EXPECT_TRUE(std::filesystem::exists(path)) << testing::missing_model_message(path);
  Expected<GgufFile> file = GgufFile::open(path);
  EXPECT_TRUE(file) << file.error();
  if (!file) return m;
  m.file = std::make_unique<GgufFile>(std::move(file).value());
  Expected<std::unique_ptr<ModelWeights>> weights = ModelWeights::load(*m.file);
  EXPECT_TRUE(weights) << weights.error();
  if (weights) m.weights = std::move(weights).value();
  return m;
}

std::vector<int32_t> prompt_of(int32_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = (i * 7919 + 13) % 40000 + 10;
  return ids;
}

// Float activations: no panels on either side, so both compute with the same kernels.
TEST(LayerRunner, EveryLayerThenTheHeadIsTheExecutorsForwardPass) {
  Model m = open_default();
  ASSERT_TRUE(m.weights);
  cpu::CpuBackend backend(2, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  const std::vector<int32_t> prompt = prompt_of(40);  // 3 blocks, the last partial

  cpu::LayerRunner runner(*m.weights, backend, 64);
  std::vector<float> x;
  runner.embed(prompt, x);
  for (int32_t l = 0; l < m.weights->config().num_layers; ++l) runner.run_layer(l, x, nullptr);
  const std::vector<float> got = runner.logits(x);

  KvCacheOptions kv;
  kv.kv_cache_bytes = kv_bytes_for_tokens(m.weights->config(), kv, 64);
  cpu::CpuExecutor executor(*m.weights, backend, kv);
  SequenceRunner sequence(executor, 64, 64);
  Expected<std::vector<float>> want = sequence.append(prompt, /*all_logits=*/true);
  ASSERT_TRUE(want) << want.error();
  ASSERT_EQ(got.size(), want->size());
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - (*want)[i]));
  std::printf("layer by layer vs the executor: logits of 40 positions within %.2e\n", worst);
  EXPECT_LT(worst, 1e-4);
}

// The statistics of layer l alone, from the residual stream the layers before it left, are
// those of a whole pass with every layer kept; a layer outside the kept range adds nothing.
TEST(LayerRunner, OneLayersStatisticsAreTheWholePasss) {
  Model m = open_default();
  ASSERT_TRUE(m.weights);
  const ModelConfig& c = m.weights->config();
  cpu::CpuBackend backend(2, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  const std::vector<int32_t> prompt = prompt_of(33);

  KvCacheOptions kv;
  kv.kv_cache_bytes = kv_bytes_for_tokens(c, kv, 64);
  cpu::CpuExecutor executor(*m.weights, backend, kv);
  cpu::ActivationStats whole(c, /*gram=*/true);
  executor.set_activation_stats(&whole);
  SequenceRunner sequence(executor, 64, 64);
  ASSERT_TRUE(sequence.append(prompt));

  cpu::LayerRunner runner(*m.weights, backend, 64);
  std::vector<float> x;
  runner.embed(prompt, x);
  for (int32_t l = 0; l < c.num_layers; ++l) {
    cpu::ActivationStats one(c, /*gram=*/true, l, 1);
    runner.run_layer(l, x, &one);
    for (auto input : {cpu::MatrixInput::kAttention, cpu::MatrixInput::kAttentionOutput, cpu::MatrixInput::kFfn,
                       cpu::MatrixInput::kFfnHidden}) {
      ASSERT_EQ(one.tokens(input, l), 33);
      EXPECT_EQ(one.tokens(input, l == 0 ? 1 : 0), 0) << "a layer outside the range was kept";
      const std::vector<float> a = one.mean_squares(input, l), b = whole.mean_squares(input, l);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5 * std::fabs(b[i]) + 1e-9) << "layer " << l;
      const std::vector<double>& ga = one.gram(input, l);
      const std::vector<double>& gb = whole.gram(input, l);
      ASSERT_EQ(ga.size(), gb.size());
      for (size_t i = 0; i < ga.size(); i += 97) ASSERT_NEAR(ga[i], gb[i], 1e-5 * std::fabs(gb[i]) + 1e-9);
    }
  }
}

// A swapped-in layer computes with its new weights; swapped back, the original output returns.
TEST(LayerRunner, SwappedLayerComputesWithItsNewWeights) {
  Model m = open_default();
  ASSERT_TRUE(m.weights);
  cpu::CpuBackend backend(2, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  cpu::LayerRunner runner(*m.weights, backend, 16);
  std::vector<float> x0;
  runner.embed(prompt_of(8), x0);
  std::vector<float> original = x0, swapped = x0, restored = x0;
  runner.run_layer(0, original, nullptr);
  LayerWeights other = m.weights->layers()[0];
  std::vector<float> zero_down(static_cast<size_t>(other.down.rows * other.down.cols), 0.0f);
  other.down = WeightTensor{DType::F32, other.down.rows, other.down.cols, zero_down.data()};
  m.weights->swap_layer(0, other);
  runner.run_layer(0, swapped, nullptr);
  m.weights->swap_layer(0, other);
  runner.run_layer(0, restored, nullptr);
  EXPECT_EQ(original, restored);
  EXPECT_NE(original, swapped);
}

}  // namespace
}  // namespace folio
