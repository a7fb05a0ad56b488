// AMX panel matmuls (panel_gemm.h) against a float64 reference computed from the scalar path's
// own dequantized weights and activations, on quantized and raw random rows of every type the
// path takes; and a row's bits against the same row computed alone, in every position of a
// batch (tile rows and VNNI rows alike): the batch invariance the engine relies on. Skipped on
// CPUs without AMX (or with FOLIO_CPU_ISA below amx); their VNNI-only path is checked against
// the tiles' bits here too.
#include "backend/cpu/quant/panel_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/elementwise_avx512.h"
#include "backend/cpu/quant/quant_kernels.h"
#include "core/aligned_bytes.h"
#include "panel_test_problem.h"
#include "quant/formats.h"
#include "quant_test_util.h"

namespace folio::cpu {
namespace {

using test::expect_near_float64;
using test::make_problem;
using test::Problem;

// y (n, rows) through the AMX path, all panels on this thread; packed: from the matrix's
// panels packed beforehand (as executors do), else unpacked panel by panel.
std::vector<float> amx_matmul(const Problem& p, const uint8_t* acts, int64_t n, bool packed = false,
                              bool tiles = true) {
  std::vector<float> terms(panel_terms_floats(p.type, n, p.cols));
  panel_activation_terms(p.type, acts, p.act_row_bytes, n, p.cols, terms.data());
  AlignedBytes panels(packed ? panel_packed_bytes(p.type, p.rows, p.cols) : 0);
  if (packed) amx_pack_panels(p.type, p.cols, p.weights.data(), 0, p.rows / 16, panels.data());
  std::vector<float> y(static_cast<size_t>(n * p.rows), NAN);
  amx_panel_gemm(p.type, p.cols, p.weights.data(), packed ? panels.data() : nullptr, acts, p.act_row_bytes,
                 terms.data(), n, 0, p.rows / 16, y.data(), p.rows, tiles);
  return y;
}

class AmxPanelGemm : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (detect_isa() != Isa::kAmx) GTEST_SKIP() << "skipped: no AMX";
  }
};

TEST_P(AmxPanelGemm, MatchesFloat64Reference) {
  const DType type = GetParam();
  const QuantKernels* avx512 = quant_kernels(type, Isa::kAvx512);
  std::mt19937 rng(7);
  for (const auto& [rows, cols, n] : {std::tuple<int64_t, int64_t, int64_t>{16, 32, 1},
                                      {32, 64, 16},
                                      {48, 576, 37},
                                      {64, 1536, 19},
                                      {96, 64, 70},
                                      {16, 96, 33}}) {
    for (bool raw : {false, true}) {
      const Problem p = make_problem(rng, type, rows, cols, n, raw);
      const std::vector<float> y = amx_matmul(p, p.acts.data(), n);
      expect_near_float64(p, y, avx512, std::string("amx raw=") + (raw ? "1" : "0"));
    }
  }
}

// Every row of a 53-row batch (32 rows on the 2 x 2 tiles, 16 on the 1 x 1, then 5 VNNI rows;
// 80 weight rows: two pairs of panels and a lone one) has the bits it has alone.
TEST_P(AmxPanelGemm, ARowsBitsDoNotDependOnItsBatch) {
  const DType type = GetParam();
  std::mt19937 rng(11);
  const Problem p = make_problem(rng, type, 80, 576, 53, false);
  const std::vector<float> batch = amx_matmul(p, p.acts.data(), p.n);
  for (int64_t m = 0; m < p.n; ++m) {
    const std::vector<float> alone = amx_matmul(p, p.acts.data() + m * p.act_row_bytes, 1);
    ASSERT_EQ(std::memcmp(alone.data(), batch.data() + m * p.rows, p.rows * sizeof(float)), 0)
        << dtype_info(type).name << " row " << m;
  }
  // And rows 16..31 as the first tile of another batch (1 x 1 tiles where they had 2 x 2).
  const std::vector<float> shifted = amx_matmul(p, p.acts.data() + 16 * p.act_row_bytes, 16);
  EXPECT_EQ(std::memcmp(shifted.data(), batch.data() + 16 * p.rows, 16 * p.rows * sizeof(float)), 0);
  // Panels packed at load give the bits of panels unpacked as they are reached.
  const std::vector<float> packed = amx_matmul(p, p.acts.data(), p.n, /*packed=*/true);
  EXPECT_EQ(std::memcmp(packed.data(), batch.data(), batch.size() * sizeof(float)), 0);
  // And without tiles (AVX-512 CPUs: every row on VNNI, 4-bit panels expanded for the call, or
  // read as nibbles for fewer than 4 rows) the same bits again.
  for (int64_t n : {p.n, int64_t{3}}) {
    const std::vector<float> vnni = amx_matmul(p, p.acts.data(), n, /*packed=*/true, /*tiles=*/false);
    EXPECT_EQ(std::memcmp(vnni.data(), batch.data(), static_cast<size_t>(n * p.rows) * sizeof(float)), 0) << n;
  }
}

// The fused gate | up + SwiGLU: each value has the bits of the two products put through
// swiglu_avx512, for a 53-row batch (2 x 2, 1 x 1 and VNNI rows) and for every row alone.
TEST_P(AmxPanelGemm, SwigluEpilogueEqualsProductsThenSwiglu) {
  const DType type = GetParam();
  std::mt19937 rng(13);
  const Problem gate = make_problem(rng, type, 48, 576, 53, false);
  Problem up = make_problem(rng, type, 48, 576, 53, false);
  up.acts = gate.acts;  // one input for both
  const int64_t cols = gate.cols;
  AlignedBytes gate_packed(panel_packed_bytes(type, 48, cols)), up_packed(panel_packed_bytes(type, 48, cols));
  amx_pack_panels(type, cols, gate.weights.data(), 0, 3, gate_packed.data());
  amx_pack_panels(type, cols, up.weights.data(), 0, 3, up_packed.data());
  auto fused = [&](const uint8_t* acts, int64_t n, bool tiles = true) {
    std::vector<float> terms(panel_terms_floats(type, n, cols)), out(static_cast<size_t>(n * 48), NAN);
    panel_activation_terms(type, acts, gate.act_row_bytes, n, cols, terms.data());
    amx_panel_gemm_swiglu(type, cols, gate_packed.data(), up_packed.data(), acts, gate.act_row_bytes, terms.data(), n,
                          0, 3, out.data(), 48, tiles);
    return out;
  };
  const std::vector<float> g = amx_matmul(gate, gate.acts.data(), 53, true);
  const std::vector<float> u = amx_matmul(up, gate.acts.data(), 53, true);
  std::vector<float> expected(g.size());
  swiglu_avx512(g.data(), u.data(), expected.data(), static_cast<int64_t>(g.size()));
  const std::vector<float> batch = fused(gate.acts.data(), 53);
  ASSERT_EQ(std::memcmp(batch.data(), expected.data(), batch.size() * sizeof(float)), 0) << dtype_info(type).name;
  const std::vector<float> vnni = fused(gate.acts.data(), 53, /*tiles=*/false);  // the AVX-512 path
  ASSERT_EQ(std::memcmp(vnni.data(), batch.data(), batch.size() * sizeof(float)), 0) << dtype_info(type).name;
  for (int64_t m = 0; m < 53; m += 7) {
    const std::vector<float> alone = fused(gate.acts.data() + m * gate.act_row_bytes, 1);
    ASSERT_EQ(std::memcmp(alone.data(), batch.data() + m * 48, 48 * sizeof(float)), 0) << "row " << m;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, AmxPanelGemm,
                         ::testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_info(info.param).name); });

TEST(AmxPanelGemmShapes, TakesWhatItComputes) {
  EXPECT_TRUE(panel_gemm_supports(DType::Q4_1, 576, 576));
  EXPECT_FALSE(panel_gemm_supports(DType::Q4_1, 570, 576));  // rows not in panels of 16
  EXPECT_TRUE(panel_gemm_supports(DType::Q4_K, 576, 512));
  EXPECT_FALSE(panel_gemm_supports(DType::Q4_K, 576, 576));  // columns not in super-blocks of 256
  EXPECT_TRUE(panel_gemm_supports(DType::Q6_K, 576, 512));   // 16-input blocks, two a Q8_0 block
  EXPECT_FALSE(panel_gemm_supports(DType::Q6_K, 576, 576));
  EXPECT_FALSE(panel_gemm_supports(DType::F16, 576, 576));
}

}  // namespace
}  // namespace folio::cpu
