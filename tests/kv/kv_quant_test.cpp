// The quantized KV formats (kv/kv_quant.h) against float64 references: the E4M3 codec against a
// brute-force nearest-value search over all 254 finite codes, each row format's error within
// its bound on random and adversarial rows (an outlier channel, constant rows, zeros, huge and
// tiny magnitudes, the format's own maximum), and the block layout: every (slot, head) row of a
// block reads back what was stored, with no two rows' bytes or scales overlapping.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kv/kv_cache_storage.h"
#include "kv/kv_quant.h"

namespace folio {
namespace {

// The E4M3 value of a code, from the format's definition in float64.
double e4m3_value(int code) {
  const int sign = code & 0x80 ? -1 : 1, exponent = (code >> 3) & 0xf, mantissa = code & 7;
  if (exponent == 0) return sign * std::ldexp(mantissa, -9);
  return sign * std::ldexp(1.0 + mantissa / 8.0, exponent - 7);
}

// Nearest finite E4M3 code to x in float64, ties to the even code, saturating at +-448.
uint8_t e4m3_nearest(float x) {
  if (std::fabs(x) >= 448.0f) return x > 0 ? 0x7e : 0xfe;  // beyond the largest value: saturate
  int best = 0;
  double best_error = std::numeric_limits<double>::infinity();
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) continue;  // NaN
    const double error = std::fabs(e4m3_value(code) - static_cast<double>(x));
    const bool tie = error == best_error;
    if (error < best_error || (tie && (code & 1) == 0 && (best & 1) == 1)) {
      best = code;
      best_error = error;
    }
  }
  if (std::signbit(x) && e4m3_value(best) == 0.0) best = 0x80;  // -0 keeps its sign
  return static_cast<uint8_t>(best);
}

TEST(Fp8E4M3, EveryCodeDecodesToItsValueAndRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    const float value = fp8_e4m3_to_float(static_cast<uint8_t>(code));
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(value)) << code;
      continue;
    }
    EXPECT_EQ(static_cast<double>(value), e4m3_value(code)) << code;
    EXPECT_EQ(fp8_e4m3_from_float(value), code) << code;
    EXPECT_EQ(fp8_e4m3_values()[code], value) << code;
  }
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), 448.0f);
}

TEST(Fp8E4M3, EncodingIsTheNearestValueTiesToEven) {
  std::vector<float> inputs = {0.0f,
                               -0.0f,
                               448.0f,
                               -448.0f,
                               449.0f,
                               464.0f,
                               1e30f,
                               -1e30f,
                               std::numeric_limits<float>::infinity(),
                               1e-30f,
                               std::ldexp(1.0f, -10)};
  // Every midpoint between neighbouring codes, and a float either side of it.
  for (int code = 0; code < 0x7e; ++code) {
    const double mid = (e4m3_value(code) + e4m3_value(code + 1)) / 2;
    const float m = static_cast<float>(mid);
    for (float x : {m, std::nextafter(m, 0.0f), std::nextafter(m, 1e9f)}) {
      inputs.push_back(x);
      inputs.push_back(-x);
    }
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> log_magnitude(-12.0f, 9.5f);
  for (int i = 0; i < 100000; ++i) {
    const float x = std::exp2(log_magnitude(rng));
    inputs.push_back(i % 2 ? x : -x);
  }
  for (float x : inputs) EXPECT_EQ(fp8_e4m3_from_float(x), e4m3_nearest(x)) << x;
}

// One row through quantize and dequantize; the error bound of each element in float64.
void check_row(KvFormat format, const std::vector<float>& x, const char* what) {
  const int32_t n = static_cast<int32_t>(x.size());
  std::vector<uint8_t> q(x.size());
  std::vector<float> back(x.size());
  float scale = -1.0f;
  kv_quantize_row(format, x.data(), n, q.data(), &scale);
  kv_dequantize_row(format, q.data(), scale, n, back.data());
  double amax = 0.0;
  for (float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
  const double max_q = format == KvFormat::kFp8E4M3 ? 448.0 : 127.0;
  EXPECT_NEAR(scale, amax / max_q, amax / max_q * 1e-6) << what;
  for (int32_t i = 0; i < n; ++i) {
    const double xi = x[static_cast<size_t>(i)], got = back[static_cast<size_t>(i)];
    // int8: half a step (scale / 2); E4M3: half an ulp of 3 mantissa bits (|x| / 16), or half
    // a subnormal step (2^-10 of a unit of scale) near zero; plus float rounding of the scale.
    const double bound =
        format == KvFormat::kInt8 ? scale * 0.5 : std::max(std::fabs(xi) / 16.0, scale * std::ldexp(1.0, -10));
    EXPECT_LE(std::fabs(got - xi), bound * (1 + 1e-5) + amax * 1e-7) << what << " element " << i << " of " << xi;
    // The dequantized value is exactly the format's value times the scale, in float.
    const float value = format == KvFormat::kInt8 ? static_cast<float>(static_cast<int8_t>(q[static_cast<size_t>(i)]))
                                                  : fp8_e4m3_to_float(q[static_cast<size_t>(i)]);
    EXPECT_EQ(back[static_cast<size_t>(i)], value * scale);
  }
}

TEST(KvQuant, RowErrorsStayWithinTheFormatsBound) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (KvFormat format : {KvFormat::kFp8E4M3, KvFormat::kInt8}) {
    for (int32_t n : {16, 64, 128, 256}) {
      std::vector<float> x(static_cast<size_t>(n));
      for (int trial = 0; trial < 200; ++trial) {
        for (float& v : x) v = normal(rng) * std::exp2(static_cast<float>(trial % 40 - 20));
        check_row(format, x, "random");
      }
      for (float& v : x) v = normal(rng);
      x[3] = 200.0f;  // an outlier channel: the rest lose precision, but stay in bound
      check_row(format, x, "outlier");
      std::fill(x.begin(), x.end(), 0.75f);
      check_row(format, x, "constant");
      std::fill(x.begin(), x.end(), -3e4f);
      check_row(format, x, "large constant");
      for (size_t i = 0; i < x.size(); ++i) x[i] = (i % 2 ? 1.0f : -1.0f) * std::numeric_limits<float>::max() / 4;
      check_row(format, x, "+-max");
      for (float& v : x) v = normal(rng) * 1e-30f;
      check_row(format, x, "tiny");
    }
    std::vector<float> zeros(64, 0.0f), back(64, 1.0f);
    std::vector<uint8_t> q(64, 0xff);
    float scale = -1.0f;
    kv_quantize_row(format, zeros.data(), 64, q.data(), &scale);
    EXPECT_EQ(scale, 0.0f);
    kv_dequantize_row(format, q.data(), scale, 64, back.data());
    for (float v : back) EXPECT_EQ(v, 0.0f);
  }
}

TEST(KvQuant, EveryRowOfABlockReadsBackWithoutOverlap) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (KvFormat format : {KvFormat::kFp16, KvFormat::kBf16, KvFormat::kFp8E4M3, KvFormat::kInt8}) {
    const KvCacheShape shape{2, 5, 16, 3, 32, format};
    EXPECT_EQ(shape.half_block_bytes(), 16u * 3 * kv_row_bytes(format, 32));
    KvCacheStorage storage(shape);
    const int64_t slots = int64_t{5} * 16;
    std::vector<std::vector<float>> rows;  // (layer, which, slot, head) order
    for (int32_t layer = 0; layer < 2; ++layer) {
      const KvLayerView view = storage.layer(layer);
      for (int which = 0; which < 2; ++which) {
        for (int64_t slot = 0; slot < slots; ++slot) {
          for (int32_t h = 0; h < 3; ++h) {
            std::vector<float> row(32);
            for (float& v : row) v = normal(rng) * static_cast<float>(1 + slot % 7);
            kv_store_row(view, which, slot, h, row.data());
            rows.push_back(row);
          }
        }
      }
    }
    size_t index = 0;
    std::vector<float> got(32), want(32);
    std::vector<uint8_t> q(32);
    for (int32_t layer = 0; layer < 2; ++layer) {
      const KvLayerView view = storage.layer(layer);
      for (int which = 0; which < 2; ++which) {
        for (int64_t slot = 0; slot < slots; ++slot) {
          for (int32_t h = 0; h < 3; ++h, ++index) {
            kv_load_row(view, which, slot, h, got.data());
            if (format == KvFormat::kFp16) {
              for (size_t d = 0; d < 32; ++d) EXPECT_NEAR(got[d], rows[index][d], std::fabs(rows[index][d]) / 1024);
              continue;
            }
            if (format == KvFormat::kBf16) {  // round to nearest even on 8 bits of mantissa: within 2^-9
              for (size_t d = 0; d < 32; ++d) {
                EXPECT_EQ(got[d], bf16_to_fp32(fp32_to_bf16(rows[index][d])));
                EXPECT_NEAR(got[d], rows[index][d], std::fabs(rows[index][d]) / 256);
              }
              continue;
            }
            float scale;
            kv_quantize_row(format, rows[index].data(), 32, q.data(), &scale);
            kv_dequantize_row(format, q.data(), scale, 32, want.data());
            ASSERT_EQ(got, want) << kv_format_name(format) << " layer " << layer << " slot " << slot << " head " << h;
          }
        }
      }
    }
  }
}

// fp8 keeps its newest block in fp16 staging; the seal stores each staged row as kv_store_row
// would have stored it, into the block's own bytes, and leaves the other blocks alone.
TEST(KvQuant, Fp8SealStoresEachStagedRowAsAStoreWould) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const KvCacheShape shape{1, 3, 16, 2, 64, KvFormat::kFp8E4M3, 2};
  KvCacheStorage storage(shape);
  const KvLayerView view = storage.layer(0);
  ASSERT_TRUE(kv_format_has_residual(view.format));
  ASSERT_EQ(view.num_staging, 2);
  for (int which = 0; which < 2; ++which) {
    for (int32_t t = 0; t < 16; ++t) {
      for (int32_t h = 0; h < 2; ++h) {
        uint16_t* row = view.staging_row(which, 1, t, h);
        for (int32_t d = 0; d < 64; ++d) row[d] = fp32_to_fp16(normal(rng) * (d == 5 ? 30.0f : 1.0f));
      }
    }
  }
  const std::vector<uint8_t> k_before(view.k, view.k + 3 * shape.half_block_bytes());
  kv_seal_block(view, 2, 1);
  // Block 2 holds what storing the staged rows gives; blocks 0 and 1 are untouched.
  EXPECT_TRUE(std::equal(k_before.begin(), k_before.begin() + 2 * shape.half_block_bytes(), view.k));
  const KvCacheShape ref_shape{1, 3, 16, 2, 64, KvFormat::kFp8E4M3, 0};
  KvCacheStorage ref(ref_shape);
  const KvLayerView expected = ref.layer(0);
  std::vector<float> x(64), got(64), want(64);
  for (int which = 0; which < 2; ++which) {
    for (int32_t t = 0; t < 16; ++t) {
      for (int32_t h = 0; h < 2; ++h) {
        for (int32_t d = 0; d < 64; ++d) x[d] = fp16_to_fp32(view.staging_row(which, 1, t, h)[d]);
        kv_store_row(expected, which, 2 * 16 + t, h, x.data());
        kv_load_row(view, which, 2 * 16 + t, h, got.data());
        kv_load_row(expected, which, 2 * 16 + t, h, want.data());
        ASSERT_EQ(got, want) << "which " << which << " token " << t << " head " << h;
      }
    }
  }
  const size_t half = shape.half_block_bytes();
  EXPECT_TRUE(std::equal(view.k + 2 * half, view.k + 3 * half, expected.k + 2 * half));
  EXPECT_TRUE(std::equal(view.v + 2 * half, view.v + 3 * half, expected.v + 2 * half));
  // The residual's default length and the block-size rule of the GPU's 16-key decode steps.
  EXPECT_EQ(kv_default_block_size(KvFormat::kFp8E4M3), 128);
  EXPECT_EQ(kv_default_block_size(KvFormat::kInt8), 16);
  EXPECT_TRUE(kv_format_shape_error(KvFormat::kFp8E4M3, 32, 64).empty());
  EXPECT_NE(kv_format_shape_error(KvFormat::kFp8E4M3, 24, 64).find("multiple of 16"), std::string::npos);
}

TEST(KvFormat, NamesParseAndUnknownOnesSayWhatIsKnown) {
  std::string error;
  EXPECT_EQ(parse_kv_format("auto", &error), KvFormat::kFp16);
  EXPECT_EQ(parse_kv_format("fp16", &error), KvFormat::kFp16);
  EXPECT_EQ(parse_kv_format("fp8", &error), KvFormat::kFp8E4M3);
  EXPECT_EQ(parse_kv_format("fp8_e4m3", &error), KvFormat::kFp8E4M3);
  EXPECT_EQ(parse_kv_format("int8", &error), KvFormat::kInt8);
  EXPECT_FALSE(parse_kv_format("fp4", &error));
  EXPECT_NE(error.find("known: auto, fp16, bf16, fp8"), std::string::npos) << error;
  EXPECT_EQ(parse_kv_format("kivi2", &error), KvFormat::kKivi2);
  EXPECT_EQ(parse_kv_format("bf16", &error), KvFormat::kBf16);
  EXPECT_EQ(kv_format_name(KvFormat::kBf16), "bf16");
  EXPECT_EQ(kv_row_bytes(KvFormat::kBf16, 64), 128u);
  // fp16 is 2 bytes a value; fp8/int8 one byte plus a 4-byte scale per head row.
  EXPECT_EQ(kv_row_bytes(KvFormat::kFp16, 64), 128u);
  EXPECT_EQ(kv_row_bytes(KvFormat::kFp8E4M3, 64), 68u);
  EXPECT_EQ(kv_row_bytes(KvFormat::kInt8, 128), 132u);
}

}  // namespace
}  // namespace folio
