// AVX2 panel matmuls (panel_gemm.h, panel_gemm_avx2.cpp) against a float64 reference from the
// scalar path's dequantized weights and activations, on quantized and raw random rows (raw Q8_0
// codes reach -128 and 127, where an unsplit vpmaddubsw would saturate); a row's bits against
// the same row alone, in every position of a batch; and, where the CPU has AVX-512 VNNI, the
// packed bytes, activation terms and results bit-identical to the AVX-512 path's. Skipped below
// AVX2 (FOLIO_CPU_ISA=scalar).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backend/cpu/quant/panel_gemm.h"
#include "backend/cpu/quant/quant_kernels.h"
#include "core/aligned_bytes.h"
#include "panel_test_problem.h"
#include "quant/formats.h"

namespace folio::cpu {
namespace {

using test::expect_near_float64;
using test::make_problem;
using test::Problem;

// y (n, rows) through the AVX2 path, all panels on this thread.
std::vector<float> avx2_matmul(const Problem& p, const uint8_t* acts, int64_t n, bool packed) {
  std::vector<float> terms(panel_terms_floats(p.type, n, p.cols));
  panel_activation_terms(p.type, acts, p.act_row_bytes, n, p.cols, terms.data());
  AlignedBytes panels(packed ? panel_packed_bytes(p.type, p.rows, p.cols) : 0);
  if (packed) avx2_pack_panels(p.type, p.cols, p.weights.data(), 0, p.rows / 16, panels.data());
  std::vector<float> y(static_cast<size_t>(n * p.rows), NAN);
  avx2_panel_gemm(p.type, p.cols, p.weights.data(), packed ? panels.data() : nullptr, acts, p.act_row_bytes,
                  terms.data(), n, 0, p.rows / 16, y.data(), p.rows);
  return y;
}

class Avx2PanelGemm : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override {
    if (!isa_supported(Isa::kAvx2)) GTEST_SKIP() << "skipped: no AVX2 (or FOLIO_CPU_ISA below it)";
  }
};

TEST_P(Avx2PanelGemm, MatchesFloat64Reference) {
  const DType type = GetParam();
  const QuantKernels* scalar = quant_kernels(type, Isa::kScalar);
  std::mt19937 rng(17);
  for (const auto& [rows, cols, n] :
       {std::tuple<int64_t, int64_t, int64_t>{16, 32, 1}, {32, 64, 4}, {48, 576, 37}, {64, 1536, 6}, {16, 96, 9}}) {
    for (bool raw : {false, true}) {
      const Problem p = make_problem(rng, type, rows, cols, n, raw);
      const std::vector<float> y = avx2_matmul(p, p.acts.data(), n, /*packed=*/raw);
      expect_near_float64(p, y, scalar, std::string("avx2 raw=") + (raw ? "1" : "0"));
    }
  }
}

// Every row of a 23-row batch (five groups of four, then three single rows) has its bits alone,
// and panels packed at load give the bits of panels packed as they are reached.
TEST_P(Avx2PanelGemm, ARowsBitsDoNotDependOnItsBatch) {
  const DType type = GetParam();
  std::mt19937 rng(19);
  const Problem p = make_problem(rng, type, 48, 576, 23, false);
  const std::vector<float> batch = avx2_matmul(p, p.acts.data(), p.n, /*packed=*/true);
  for (int64_t m = 0; m < p.n; ++m) {
    const std::vector<float> alone = avx2_matmul(p, p.acts.data() + m * p.act_row_bytes, 1, true);
    ASSERT_EQ(std::memcmp(alone.data(), batch.data() + m * p.rows, p.rows * sizeof(float)), 0)
        << dtype_info(type).name << " row " << m;
  }
  const std::vector<float> unpacked = avx2_matmul(p, p.acts.data(), p.n, /*packed=*/false);
  EXPECT_EQ(std::memcmp(unpacked.data(), batch.data(), batch.size() * sizeof(float)), 0);
}

// The AVX2 and AVX-512 paths are one computation: same packed bytes, same results.
TEST_P(Avx2PanelGemm, EqualsTheAvx512PathBitForBit) {
  if (!isa_supported(Isa::kAvx512)) GTEST_SKIP() << "skipped: no AVX-512 VNNI to compare with";
  const DType type = GetParam();
  std::mt19937 rng(23);
  for (bool raw : {false, true}) {
    const Problem p = make_problem(rng, type, 64, 1536, 21, raw);
    AlignedBytes a(panel_packed_bytes(type, 64, 1536)), b(panel_packed_bytes(type, 64, 1536));
    amx_pack_panels(type, 1536, p.weights.data(), 0, 4, a.data());
    avx2_pack_panels(type, 1536, p.weights.data(), 0, 4, b.data());
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << "packed panels";
    std::vector<float> terms(panel_terms_floats(p.type, p.n, p.cols));
    panel_activation_terms(type, p.acts.data(), p.act_row_bytes, p.n, p.cols, terms.data());
    for (int64_t n : {p.n, int64_t{1}}) {
      std::vector<float> ya(static_cast<size_t>(n * p.rows), NAN), yb(ya.size(), NAN);
      amx_panel_gemm(type, p.cols, p.weights.data(), a.data(), p.acts.data(), p.act_row_bytes, terms.data(), n, 0, 4,
                     ya.data(), p.rows, /*use_tiles=*/false);
      avx2_panel_gemm(type, p.cols, p.weights.data(), b.data(), p.acts.data(), p.act_row_bytes, terms.data(), n, 0, 4,
                      yb.data(), p.rows);
      ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(float)), 0)
          << dtype_info(type).name << " n=" << n << " raw=" << raw;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Avx2PanelGemm,
                         ::testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K,
                                           DType::Q5_K, DType::Q6_K),
                         [](const auto& info) { return std::string(dtype_info(info.param).name); });

}  // namespace
}  // namespace folio::cpu
