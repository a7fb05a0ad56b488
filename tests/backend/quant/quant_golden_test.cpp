// folio's scalar dequantizers and reference quantizers against an independent implementation:
// golden files made by scripts/make-quant-goldens.py with the numpy code of PyPI's `gguf`
// package. Both sides compute in IEEE float32 with the same operation order (no fused
// multiply-add), so the results must agree bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "backend/cpu/quant/quant_kernels.h"
#include "quant/formats.h"
#include "quant_test_util.h"

#ifndef FOLIO_SOURCE_DIR
#define FOLIO_SOURCE_DIR "."
#endif

namespace folio::cpu {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string golden_path(DType type, const char* suffix) {
  return std::string(FOLIO_SOURCE_DIR) + "/tests/golden/quant/" + std::string(dtype_name(type)) + suffix;
}

class QuantGoldenTest : public testing::TestWithParam<DType> {};

TEST_P(QuantGoldenTest, DequantizeMatchesGgufNumpyBitForBit) {
  const DType type = GetParam();
  const std::vector<uint8_t> blocks = read_file(golden_path(type, ".bin"));
  const std::vector<uint8_t> expected = read_file(golden_path(type, ".f32"));
  ASSERT_FALSE(blocks.empty()) << "missing " << golden_path(type, ".bin");
  const DTypeInfo& info = dtype_info(type);
  const int64_t n = static_cast<int64_t>(blocks.size() / info.block_bytes) * info.block_elems;
  ASSERT_EQ(expected.size(), static_cast<size_t>(n) * sizeof(float));
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    std::vector<float> got(static_cast<size_t>(n));
    quant_kernels(type, isa)->dequantize_row(blocks.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      uint32_t want;
      std::memcpy(&want, expected.data() + i * sizeof(float), sizeof want);
      ASSERT_EQ(fp32_to_bits(got[i]), want)
          << isa_name(isa) << " element " << i << ": " << got[i] << " vs " << fp32_from_bits(want);
    }
  }
}

TEST_P(QuantGoldenTest, ReferenceQuantizerMatchesGgufNumpy) {
  const DType type = GetParam();
  const std::vector<uint8_t> input = read_file(golden_path(type, ".quant.f32"));
  if (input.empty()) GTEST_SKIP() << "no quantizer golden for " << dtype_name(type);
  const std::vector<uint8_t> expected = read_file(golden_path(type, ".quant.bin"));
  const int64_t n = static_cast<int64_t>(input.size() / sizeof(float));
  std::vector<float> x(static_cast<size_t>(n));
  std::memcpy(x.data(), input.data(), input.size());
  std::vector<uint8_t> got(row_bytes(type, n));
  ASSERT_TRUE(quant::quantize_row_reference(type, x.data(), got.data(), n));
  ASSERT_EQ(got.size(), expected.size());
  const size_t block_bytes = dtype_info(type).block_bytes;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << "byte " << i << " (block " << i / block_bytes << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, QuantGoldenTest, testing::ValuesIn(test::all_weight_types()),
                         [](const testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace folio::cpu
