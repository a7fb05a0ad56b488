// Quantized kernels: every SIMD path against the scalar reference (dequantization and
// activation conversion bit for bit, dot products within float summation-order error), dot
// products against a float64 reference, and quantize -> dequantize error bounds.
#include "backend/cpu/quant/quant_kernels.h"
#include "quant/formats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "quant_test_util.h"

namespace folio::cpu {
namespace {

using test::block_elems;
using test::random_floats;
using test::random_quantized_row;
using test::random_raw_row;
using test::supported_simd_isas;

constexpr double kEps = 1.0 / (1 << 24);  // float unit roundoff

std::vector<int64_t> test_lengths(DType type) {
  switch (block_elems(type)) {
    case 1: return {1, 7, 64, 576, 1000};
    case 32: return {32, 64, 96, 288, 576, 1056};
    default: return {256, 512, 768, 2304};
  }
}

std::vector<std::vector<uint8_t>> test_rows(std::mt19937& rng, DType type, int64_t n) {
  return {random_quantized_row(rng, type, n), random_raw_row(rng, type, n)};
}

bool same_bits(const void* a, const void* b, size_t bytes) {
  return std::memcmp(a, b, bytes) == 0;
}

// Activations: `num_rows` rows converted by the scalar path, `stride` bytes apart (a little
// more than a row, to check the kernels honour act_row_bytes).
struct ActivationRows {
  std::vector<uint8_t> bytes;
  size_t stride = 0;
};

ActivationRows make_activations(std::mt19937& rng, DType weight_type, int64_t n, int num_rows) {
  const QuantKernels* scalar = quant_kernels(weight_type, Isa::kScalar);
  ActivationRows rows;
  rows.stride = row_bytes(scalar->activation_type, n) + 64;
  rows.bytes.assign(rows.stride * num_rows, 0);
  for (int r = 0; r < num_rows; ++r) {
    const std::vector<float> x = random_floats(rng, n, 0.02);
    scalar->convert_activation_row(x.data(), rows.bytes.data() + r * rows.stride, n);
  }
  return rows;
}

// Activation row -> float64, exactly.
std::vector<double> activation_values(DType act_type, const uint8_t* act, int64_t n) {
  std::vector<double> a(static_cast<size_t>(n));
  if (act_type == DType::F32) {
    const auto* x = reinterpret_cast<const float*>(act);
    for (int64_t i = 0; i < n; ++i) a[i] = x[i];
    return a;
  }
  const int64_t block = block_elems(act_type);
  const size_t block_bytes = dtype_info(act_type).block_bytes;
  for (int64_t b = 0; b < n / block; ++b) {
    const uint8_t* p = act + b * block_bytes;
    double d;
    const int8_t* qs;
    if (act_type == DType::Q8_K) {
      float df;
      std::memcpy(&df, p, sizeof df);
      d = df;
      qs = reinterpret_cast<const int8_t*>(p + 4);
    } else {
      uint16_t bits;
      std::memcpy(&bits, p, sizeof bits);
      d = fp16_to_fp32(bits);
      qs = reinterpret_cast<const int8_t*>(p + (act_type == DType::Q8_1 ? 4 : 2));
    }
    for (int64_t j = 0; j < block; ++j) a[b * block + j] = d * qs[j];
  }
  return a;
}

uint16_t get_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// What a dot product of a weight row with an activation row should be (float64) and the sum
// of the magnitudes of its terms, which bounds float rounding error.
struct ReferenceDot {
  double value = 0.0;
  double magnitude = 0.0;
};

ReferenceDot reference_dot(DType type, const uint8_t* weight, const uint8_t* act, int64_t n) {
  const QuantKernels* scalar = quant_kernels(type, Isa::kScalar);
  const std::vector<double> a = activation_values(scalar->activation_type, act, n);
  // The weight as two parts, scale part + offset part, by zeroing one fp16 field at a time.
  const bool affine = type == DType::Q4_1 || type == DType::Q5_1 || type == DType::Q4_K || type == DType::Q5_K;
  const DTypeInfo& info = dtype_info(type);
  std::vector<uint8_t> scale_part(weight, weight + row_bytes(type, n));
  std::vector<uint8_t> offset_part = scale_part;
  if (affine) {
    for (int64_t b = 0; b < n / info.block_elems; ++b) {
      test::put_u16(scale_part.data() + b * info.block_bytes + 2, 0);
      test::put_u16(offset_part.data() + b * info.block_bytes, 0);
    }
  }
  std::vector<float> w1(static_cast<size_t>(n)), w2(static_cast<size_t>(n), 0.0f);
  scalar->dequantize_row(scale_part.data(), w1.data(), n);
  if (affine) scalar->dequantize_row(offset_part.data(), w2.data(), n);
  ReferenceDot ref;
  for (int64_t i = 0; i < n; ++i) {
    ref.value += (static_cast<double>(w1[i]) + w2[i]) * a[i];
    ref.magnitude += std::fabs(w1[i] * a[i]) + std::fabs(w2[i] * a[i]);
  }
  if (type == DType::Q4_1 || type == DType::Q5_1) {
    // The kernels use the activation's stored fp16 s = d * sum(q), not the exact sum: move the
    // reference by m * (s - exact sum) per block.
    for (int64_t b = 0; b < n / 32; ++b) {
      const double m = fp16_to_fp32(get_u16(weight + b * info.block_bytes + 2));
      const uint8_t* act_block = act + b * 36;
      double exact = 0.0;
      for (int j = 0; j < 32; ++j) exact += a[b * 32 + j];
      ref.value += m * (fp16_to_fp32(get_u16(act_block + 2)) - exact);
    }
  }
  return ref;
}

std::string type_name(const testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

class QuantKernelsTest : public testing::TestWithParam<DType> {};

TEST_P(QuantKernelsTest, DispatchGivesCompleteKernels) {
  const DType type = GetParam();
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    const QuantKernels* k = quant_kernels(type, isa);
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(k->weight_type, type);
    EXPECT_NE(k->dequantize_row, nullptr);
    EXPECT_NE(k->convert_activation_row, nullptr);
    EXPECT_NE(k->dot_rows, nullptr);
    // Every weight type has every path: a supported path is used as asked.
    EXPECT_EQ(k->isa, isa_supported(isa) ? isa : detect_isa()) << isa_name(isa);
  }
  const DType act = quant_kernels(type)->activation_type;
  switch (type) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0: EXPECT_EQ(act, DType::Q8_0); break;
    case DType::Q4_1:
    case DType::Q5_1: EXPECT_EQ(act, DType::Q8_1); break;
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: EXPECT_EQ(act, DType::Q8_K); break;
    default: EXPECT_EQ(act, DType::F32);
  }
}

TEST_P(QuantKernelsTest, SimdDequantizeMatchesScalarBitForBit) {
  const DType type = GetParam();
  std::mt19937 rng(1);
  const QuantKernels* scalar = quant_kernels(type, Isa::kScalar);
  for (Isa isa : supported_simd_isas()) {
    const QuantKernels* simd = quant_kernels(type, isa);
    for (int64_t n : test_lengths(type)) {
      for (const std::vector<uint8_t>& row : test_rows(rng, type, n)) {
        std::vector<float> expected(static_cast<size_t>(n)), got(static_cast<size_t>(n));
        scalar->dequantize_row(row.data(), expected.data(), n);
        simd->dequantize_row(row.data(), got.data(), n);
        ASSERT_TRUE(same_bits(expected.data(), got.data(), n * sizeof(float))) << isa_name(isa) << " n=" << n;
      }
    }
  }
}

TEST_P(QuantKernelsTest, SimdConvertActivationMatchesScalarBitForBit) {
  const DType type = GetParam();
  std::mt19937 rng(2);
  const QuantKernels* scalar = quant_kernels(type, Isa::kScalar);
  for (Isa isa : supported_simd_isas()) {
    const QuantKernels* simd = quant_kernels(type, isa);
    for (int64_t n : test_lengths(type)) {
      std::vector<std::vector<float>> inputs = {random_floats(rng, n, 0.1)};
      // Exact halves after scaling (d = 1): checks every path rounds ties the same way.
      std::vector<float> ties(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) ties[i] = (i % 32 == 0) ? 127.0f : ((i * 37) % 253 - 126) * 0.5f;
      inputs.push_back(ties);
      for (const std::vector<float>& x : inputs) {
        const size_t bytes = row_bytes(scalar->activation_type, n);
        std::vector<uint8_t> expected(bytes), got(bytes);
        scalar->convert_activation_row(x.data(), expected.data(), n);
        simd->convert_activation_row(x.data(), got.data(), n);
        ASSERT_TRUE(same_bits(expected.data(), got.data(), bytes)) << isa_name(isa) << " n=" << n;
      }
    }
  }
}

TEST_P(QuantKernelsTest, SimdDotRowsMatchScalar) {
  const DType type = GetParam();
  std::mt19937 rng(3);
  const QuantKernels* scalar = quant_kernels(type, Isa::kScalar);
  for (Isa isa : supported_simd_isas()) {
    const QuantKernels* simd = quant_kernels(type, isa);
    double worst = 0.0;
    for (int64_t n : test_lengths(type)) {
      for (const std::vector<uint8_t>& row : test_rows(rng, type, n)) {
        for (int num_rows = 1; num_rows <= 9; ++num_rows) {
          const ActivationRows act = make_activations(rng, type, n, num_rows);
          std::vector<float> expected(num_rows), got(num_rows);
          scalar->dot_rows(n, row.data(), act.bytes.data(), act.stride, num_rows, expected.data());
          simd->dot_rows(n, row.data(), act.bytes.data(), act.stride, num_rows, got.data());
          for (int r = 0; r < num_rows; ++r) {
            const ReferenceDot ref = reference_dot(type, row.data(), act.bytes.data() + r * act.stride, n);
            const double diff = std::fabs(static_cast<double>(got[r]) - expected[r]);
            const double relative = ref.magnitude > 0 ? diff / ref.magnitude : diff;
            worst = std::max(worst, relative);
            ASSERT_LE(relative, 1e-5) << isa_name(isa) << " n=" << n << " rows=" << num_rows << " row " << r << ": "
                                      << got[r] << " vs " << expected[r];
          }
        }
      }
    }
    std::printf("[ %s %s ] dot_rows max |simd - scalar| / sum|terms| = %.3g\n", std::string(dtype_name(type)).c_str(),
                std::string(isa_name(isa)).c_str(), worst);
  }
}

// A row's result must not depend on how many rows share the call or where it sits among
// them: the engine batches different requests together, and greedy output (and speculative
// decoding's exactness) must not change with the batch.
TEST_P(QuantKernelsTest, DotRowsAreBatchInvariant) {
  const DType type = GetParam();
  std::mt19937 rng(7);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    const QuantKernels* k = quant_kernels(type, isa);
    for (int64_t n : test_lengths(type)) {
      const std::vector<uint8_t> row = random_quantized_row(rng, type, n);
      const int total = 11;
      const ActivationRows act = make_activations(rng, type, n, total);
      std::vector<float> alone(total), together(total);
      for (int r = 0; r < total; ++r) {
        k->dot_rows(n, row.data(), act.bytes.data() + r * act.stride, act.stride, 1, &alone[r]);
      }
      for (int first = 0; first < total; ++first) {
        for (int count = 1; first + count <= total; ++count) {
          k->dot_rows(n, row.data(), act.bytes.data() + first * act.stride, act.stride, count, together.data());
          for (int r = 0; r < count; ++r) {
            ASSERT_EQ(fp32_to_bits(together[r]), fp32_to_bits(alone[first + r]))
                << isa_name(isa) << " n=" << n << " rows " << first << ".." << first + count;
          }
        }
      }
    }
  }
}

TEST_P(QuantKernelsTest, DotMatchesFloat64OfDequantizedOperands) {
  const DType type = GetParam();
  std::mt19937 rng(4);
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    const QuantKernels* k = quant_kernels(type, isa);
    for (int64_t n : test_lengths(type)) {
      for (const std::vector<uint8_t>& row : test_rows(rng, type, n)) {
        const int num_rows = 3;
        const ActivationRows act = make_activations(rng, type, n, num_rows);
        std::vector<float> got(num_rows);
        k->dot_rows(n, row.data(), act.bytes.data(), act.stride, num_rows, got.data());
        for (int r = 0; r < num_rows; ++r) {
          const ReferenceDot ref = reference_dot(type, row.data(), act.bytes.data() + r * act.stride, n);
          // Each float operation errs by at most eps times a partial sum of |terms|: a few per
          // block, one per accumulation.
          const double terms = static_cast<double>(n / block_elems(type));
          const double tolerance = (terms + 8.0) * kEps * ref.magnitude + 1e-30;
          EXPECT_LE(std::fabs(got[r] - ref.value), tolerance)
              << isa_name(isa) << " n=" << n << " row " << r << ": " << got[r] << " vs " << ref.value;
        }
      }
    }
  }
}

// Root-mean-square quantization error relative to the input's RMS, for normal inputs.
double max_relative_rms_error(DType type) {
  switch (type) {
    case DType::F32: return 0.0;
    case DType::F16: return 5e-4;
    case DType::BF16: return 4e-3;
    case DType::Q8_0: return 0.01;
    case DType::Q6_K: return 0.04;
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q5_K: return 0.07;
    default:  // 4-bit
      return 0.14;
  }
}

TEST_P(QuantKernelsTest, QuantizeDequantizeErrorIsBounded) {
  const DType type = GetParam();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = 256 * 64;
  for (float scale : {1e-3f, 1.0f, 300.0f}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng) * scale;
    std::vector<uint8_t> q(row_bytes(type, n));
    ASSERT_TRUE(quant::quantize_row_reference(type, x.data(), q.data(), n));
    std::vector<float> y(n);
    quant_kernels(type, Isa::kScalar)->dequantize_row(q.data(), y.data(), n);
    double err = 0.0, norm = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
      norm += double(x[i]) * x[i];
    }
    const double relative = std::sqrt(err / norm);
    EXPECT_LE(relative, max_relative_rms_error(type)) << "scale " << scale;
    if (scale == 1.0f) {
      std::printf("[ %s ] quantize->dequantize relative RMS error %.4g\n", std::string(dtype_name(type)).c_str(),
                  relative);
    }
  }
}

TEST_P(QuantKernelsTest, ActivationRoundTripIsWithinHalfAStep) {
  const DType type = GetParam();
  const QuantKernels* k = quant_kernels(type, Isa::kScalar);
  if (k->activation_type == DType::F32) return;
  std::mt19937 rng(6);
  const int64_t n = 2304;
  const std::vector<float> x = random_floats(rng, n, 0.1);
  std::vector<uint8_t> act(row_bytes(k->activation_type, n));
  k->convert_activation_row(x.data(), act.data(), n);
  const std::vector<double> a = activation_values(k->activation_type, act.data(), n);
  const int64_t block = block_elems(k->activation_type);
  for (int64_t b = 0; b < n / block; ++b) {
    double amax = 0.0;
    for (int64_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(double(x[b * block + j])));
    // Half a step, plus the rounding of d to its stored precision (q is computed with the
    // unrounded d; fp16 d loses most of its precision below 2^-14).
    const float d = static_cast<float>(amax) / 127.0f;
    const double stored_d = k->activation_type == DType::Q8_K ? d : fp16_to_fp32(fp32_to_fp16(d));
    const double bound = 0.5 * d * (1 + 1e-6) + 127.0 * std::fabs(stored_d - d) + 1e-30;
    for (int64_t j = 0; j < block; ++j) {
      ASSERT_LE(std::fabs(a[b * block + j] - x[b * block + j]), bound) << "element " << b * block + j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, QuantKernelsTest, testing::ValuesIn(test::all_weight_types()), type_name);

TEST(QuantKernelsDispatch, NonWeightTypesHaveNoKernels) {
  EXPECT_EQ(quant_kernels(DType::Q8_1), nullptr);
  EXPECT_EQ(quant_kernels(DType::Q8_K), nullptr);
  EXPECT_EQ(quant_kernels(DType::Q2_K), nullptr);
  EXPECT_EQ(quant_kernels(DType::Q3_K), nullptr);
  std::vector<float> x(256, 1.0f);
  std::vector<uint8_t> out(1024);
  EXPECT_FALSE(quant::quantize_row_reference(DType::Q2_K, x.data(), out.data(), 256));
}

TEST(QuantKernelsDispatch, DetectedIsaIsSupportedAndNamed) {
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(detect_isa()));
  EXPECT_EQ(isa_name(Isa::kAvx512), "avx512");
  std::printf("[ detect_isa ] %s\n", std::string(isa_name(detect_isa())).c_str());
}

}  // namespace
}  // namespace folio::cpu
