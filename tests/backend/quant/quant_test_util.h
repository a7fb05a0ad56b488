// Shared helpers for the quantized-kernel tests: random rows of every weight type, both from
// the reference quantizer and from raw random bytes with valid scale fields.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "backend/cpu/quant/quant_kernels.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/formats.h"

namespace folio::cpu::test {

inline const std::vector<DType>& all_weight_types() {
  static const std::vector<DType> types = {DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0,
                                           DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  return types;
}

inline std::vector<Isa> supported_simd_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) {
    if (isa_supported(isa)) isas.push_back(isa);
  }
  return isas;
}

inline int64_t block_elems(DType type) {
  return dtype_info(type).block_elems;
}

// Normal floats with a scale per 32 elements spanning 1e-4 .. 1e2, and some all-zero groups.
inline std::vector<float> random_floats(std::mt19937& rng, int64_t n, double zero_fraction = 0.05) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<double> exponent(-4.0, 2.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; i += 32) {
    const float scale = unit(rng) < zero_fraction ? 0.0f : static_cast<float>(std::pow(10.0, exponent(rng)));
    for (int64_t j = i; j < std::min<int64_t>(n, i + 32); ++j) x[static_cast<size_t>(j)] = normal(rng) * scale;
  }
  return x;
}

// A finite fp16 scale: mostly moderate magnitudes, sometimes extreme (max, subnormal, zero).
inline uint16_t random_fp16_scale(std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 15);
  std::uniform_real_distribution<float> exponent(-6.0f, 1.0f);
  const int kind = pick(rng);
  const uint16_t sign = (rng() & 1) ? 0x8000 : 0;
  if (kind == 0) return static_cast<uint16_t>(sign | 0x7bff);           // 65504
  if (kind == 1) return static_cast<uint16_t>(sign | (rng() & 0x3ff));  // subnormal or zero
  if (kind == 2) return 0;
  return static_cast<uint16_t>(sign | (fp32_to_fp16(std::pow(10.0f, exponent(rng))) & 0x7fff));
}

inline void put_u16(uint8_t* p, uint16_t v) {
  std::memcpy(p, &v, sizeof v);
}

// A row of `n` elements of `type` made of random bytes; fp16 scale fields are valid finite
// values (including extreme ones), float elements finite and of moderate magnitude.
inline std::vector<uint8_t> random_raw_row(std::mt19937& rng, DType type, int64_t n) {
  std::vector<uint8_t> row(row_bytes(type, n));
  for (uint8_t& byte : row) byte = static_cast<uint8_t>(rng());
  const DTypeInfo& info = dtype_info(type);
  const int64_t num_blocks = n / info.block_elems;
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  for (int64_t b = 0; b < num_blocks; ++b) {
    uint8_t* block = row.data() + b * info.block_bytes;
    switch (type) {
      case DType::F32: {
        const float v = value(rng);
        std::memcpy(block, &v, sizeof v);
        break;
      }
      case DType::F16: put_u16(block, fp32_to_fp16(value(rng))); break;
      case DType::BF16: put_u16(block, fp32_to_bf16(value(rng))); break;
      case DType::Q4_1:
      case DType::Q5_1:
      case DType::Q4_K:
      case DType::Q5_K:
        put_u16(block, random_fp16_scale(rng));
        put_u16(block + 2, random_fp16_scale(rng));
        break;
      case DType::Q6_K: put_u16(block + 208, random_fp16_scale(rng)); break;
      default:  // Q4_0, Q5_0, Q8_0: d first
        put_u16(block, random_fp16_scale(rng));
        break;
    }
  }
  return row;
}

// A row made by the reference quantizer from random floats.
// Normal values (sigma 0.02) with outliers at the given columns (those inside the row), so that scales differ between
// groups, through the reference quantizer: the GPU layouts' repacking tests (int4 / int8_groups).
inline std::vector<uint8_t> normal_row_with_outliers(DType type, int64_t cols, uint32_t seed,
                                                     const std::vector<std::pair<int64_t, float>>& outliers) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> values(static_cast<size_t>(cols));
  for (float& v : values) v = normal(rng);
  for (const auto& [col, value] : outliers) {
    if (col < cols) values[static_cast<size_t>(col)] = value;  // a short row skips the later ones
  }
  std::vector<uint8_t> row(row_bytes(type, cols));
  quant::quantize_row_reference(type, values.data(), row.data(), cols);
  return row;
}

inline std::vector<uint8_t> random_quantized_row(std::mt19937& rng, DType type, int64_t n) {
  const std::vector<float> x = random_floats(rng, n);
  std::vector<uint8_t> row(row_bytes(type, n));
  quant::quantize_row_reference(type, x.data(), row.data(), n);
  return row;
}

}  // namespace folio::cpu::test
