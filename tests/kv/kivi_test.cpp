// KIVI's groups and blocks (kv/kivi.h) against float64: each group's dequantized values within
// the format's bound (half a step plus the fp16 step's rounding) on random and adversarial
// groups (an outlier, constants, zeros, fp16's largest and tiniest values, two-valued groups),
// the group's extremes landing on the first and last code; and a sealed block's layout: keys
// per channel over 32-token groups and values per token over 32-channel groups read back from
// the right bytes, a change to one token touching only its own key group and value row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/fp16.h"
#include "kv/kivi.h"
#include "kv/kv_quant.h"

namespace folio {
namespace {

// The bound for one group in float64: the step s (as stored, fp16), half of it for rounding,
// plus what rounding s to fp16 costs at the top code.
double group_bound(const std::vector<double>& x, int bits, double stored_scale) {
  const double lo = *std::min_element(x.begin(), x.end());
  const double hi = *std::max_element(x.begin(), x.end());
  const double levels = (1 << bits) - 1;
  return stored_scale / 2 + levels * std::fabs(stored_scale - (hi - lo) / levels) + 1e-30;
}

void check_group(const std::vector<float>& values, int bits, const char* what) {
  const auto n = static_cast<int32_t>(values.size());
  std::vector<uint8_t> codes(values.size());
  uint16_t scale_bits, min_bits;
  kivi_quantize_group(bits, values.data(), n, 1, codes.data(), &scale_bits, &min_bits);
  const double s = fp16_to_fp32(scale_bits), m = fp16_to_fp32(min_bits);
  std::vector<double> x(values.begin(), values.end());
  const double bound = group_bound(x, bits, s);
  const double lo = *std::min_element(x.begin(), x.end());
  const double hi = *std::max_element(x.begin(), x.end());
  EXPECT_EQ(m, lo) << what << ": the minimum is an fp16 value and is kept exactly";
  for (int32_t i = 0; i < n; ++i) {
    ASSERT_LE(codes[i], (1 << bits) - 1) << what;
    const double restored = codes[i] * s + m;
    EXPECT_LE(std::fabs(restored - x[i]), bound) << what << " bits " << bits << " value " << i;
    if (x[i] == lo) {
      EXPECT_EQ(codes[i], 0) << what;
    }
    if (x[i] == hi && hi > lo && s > 0) {
      EXPECT_EQ(codes[i], (1 << bits) - 1) << what;
    }
  }
}

// Random fp16 values (the staging holds fp16, so the inputs are fp16 too).
std::vector<float> fp16_values(std::mt19937& rng, int32_t n, float sigma) {
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = fp16_to_fp32(fp32_to_fp16(normal(rng)));
  return x;
}

TEST(Kivi, GroupErrorWithinBoundOnRandomAndAdversarialGroups) {
  std::mt19937 rng(5);
  for (int bits : {2, 4}) {
    for (int trial = 0; trial < 2000; ++trial)
      check_group(fp16_values(rng, 32, trial % 7 == 0 ? 100.0f : 1.0f), bits, "random");
    std::vector<float> outlier = fp16_values(rng, 32, 1.0f);
    outlier[7] = 60.0f;
    check_group(outlier, bits, "outlier");
    check_group(std::vector<float>(32, 3.25f), bits, "constant");
    check_group(std::vector<float>(32, 0.0f), bits, "zeros");
    std::vector<float> extremes(32, 65504.0f);
    for (size_t i = 0; i < 32; i += 2) extremes[i] = -65504.0f;
    check_group(extremes, bits, "+-fp16 max");
    std::vector<float> tiny(32);
    for (size_t i = 0; i < 32; ++i) tiny[i] = fp16_to_fp32(static_cast<uint16_t>(i));  // subnormals
    check_group(tiny, bits, "subnormals");
    std::vector<float> two(32, -1.0f);
    two[3] = 2.0f;
    check_group(two, bits, "two values");
  }
}

// A staged value that overflowed fp16 (inf) or a NaN must not spoil its group: it counts as
// fp16's largest (NaN as its smallest) and the other values keep their bound.
TEST(Kivi, NonFiniteValuesDoNotSpoilTheirGroup) {
  std::mt19937 rng(17);
  for (int bits : {2, 4}) {
    std::vector<float> x = fp16_values(rng, 32, 1.0f);
    x[5] = std::numeric_limits<float>::infinity();
    x[9] = std::nanf("");
    uint8_t codes[32];
    uint16_t s, m;
    kivi_quantize_group(bits, x.data(), 32, 1, codes, &s, &m);
    const double scale = fp16_to_fp32(s), minimum = fp16_to_fp32(m);
    ASSERT_TRUE(std::isfinite(scale) && std::isfinite(minimum));
    EXPECT_EQ(minimum, -65504.0);
    EXPECT_EQ(codes[5], (1 << bits) - 1);
    EXPECT_EQ(codes[9], 0);
    std::vector<double> clamped(x.begin(), x.end());
    clamped[5] = 65504.0;
    clamped[9] = -65504.0;
    const double bound = group_bound(clamped, bits, scale);
    for (int i = 0; i < 32; ++i) EXPECT_LE(std::fabs(codes[i] * scale + minimum - clamped[i]), bound) << i;
  }
}

TEST(Kivi, FourBitsAreCloserThanTwo) {
  double err[2] = {0, 0};
  for (int b = 0; b < 2; ++b) {
    std::mt19937 local(9);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> x = fp16_values(local, 32, 1.0f);
      uint8_t codes[32];
      uint16_t s, m;
      kivi_quantize_group(b == 0 ? 2 : 4, x.data(), 32, 1, codes, &s, &m);
      for (int i = 0; i < 32; ++i) err[b] += std::fabs(codes[i] * fp16_to_fp32(s) + fp16_to_fp32(m) - x[i]);
    }
  }
  EXPECT_LT(err[1] * 3, err[0]) << "4-bit error " << err[1] << " vs 2-bit " << err[0];
}

struct SealedBlock {
  int32_t block_size, heads, head_dim;
  KvFormat format;
  std::vector<uint8_t> k, v;
  std::vector<uint16_t> staging_k, staging_v;
  KvLayerView view;

  SealedBlock(KvFormat f, int32_t b, int32_t h, int32_t d)
      : block_size(b),
        heads(h),
        head_dim(d),
        format(f),
        k(2 * kv_block_bytes(f, b, h, d), 0xAB),
        v(2 * kv_block_bytes(f, b, h, d), 0xAB),
        staging_k(static_cast<size_t>(b) * h * d),
        staging_v(static_cast<size_t>(b) * h * d) {
    view = KvLayerView{k.data(), v.data(), 2, b, h, d, f};
    view.staging_k = staging_k.data();
    view.staging_v = staging_v.data();
    view.num_staging = 1;
  }
};

// Per-channel key groups and per-token value groups, from the staged fp16 values in float64.
TEST(Kivi, SealedBlockReadsBackEveryRowWithinItsGroupsBound) {
  for (KvFormat format : {KvFormat::kKivi4, KvFormat::kKivi2}) {
    const int bits = kivi_bits(format);
    SealedBlock b(format, 64, 3, 64);
    std::mt19937 rng(21);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int32_t t = 0; t < b.block_size; ++t) {
      for (int32_t h = 0; h < b.heads; ++h) {
        for (int32_t c = 0; c < b.head_dim; ++c) {
          // Channel c of head h has its own magnitude: per-channel key scales must follow it.
          const float key = normal(rng) * (1.0f + static_cast<float>((c * 7 + h) % 13));
          b.view.staging_row(0, 0, t, h)[c] = fp32_to_fp16(key);
          b.view.staging_row(1, 0, t, h)[c] = fp32_to_fp16(normal(rng));
        }
      }
    }
    kivi_seal_block(b.view, 1, 0);
    // Block 0 (not sealed) keeps its filler: the seal wrote only block 1's bytes.
    EXPECT_TRUE(std::all_of(b.k.begin(), b.k.begin() + static_cast<ptrdiff_t>(b.view.block_bytes()),
                            [](uint8_t x) { return x == 0xAB; }));
    std::vector<float> row(static_cast<size_t>(b.head_dim));
    std::vector<float> k_t(static_cast<size_t>(b.head_dim) * b.block_size);
    for (int32_t h = 0; h < b.heads; ++h) {
      kivi_load_keys_transposed(b.view, 1, h, k_t.data());
      for (int32_t c = 0; c < b.head_dim; ++c) {
        for (int32_t g = 0; g < b.block_size / kKiviGroup; ++g) {
          std::vector<double> group;
          for (int32_t t = g * kKiviGroup; t < (g + 1) * kKiviGroup; ++t) {
            group.push_back(fp16_to_fp32(b.view.staging_row(0, 0, t, h)[c]));
          }
          const double lo = *std::min_element(group.begin(), group.end());
          const double hi = *std::max_element(group.begin(), group.end());
          const double levels = (1 << bits) - 1;
          const double step = (hi - lo) / levels;
          const double bound = step * (0.5 + levels / 1024.0) + 1e-6;  // fp16 rounds the step by < 2^-10
          for (int32_t t = 0; t < kKiviGroup; ++t) {
            const int32_t token = g * kKiviGroup + t;
            kivi_load_key_row(b.view, 1, token, h, row.data());
            EXPECT_NEAR(row[c], group[t], bound) << kv_format_name(format) << " key t" << token << " c" << c;
            EXPECT_EQ(row[c], k_t[static_cast<size_t>(c) * b.block_size + token]) << "transposed load disagrees";
          }
        }
      }
      for (int32_t t = 0; t < b.block_size; ++t) {
        kivi_load_value_row(b.view, 1, t, h, row.data());
        kv_load_row(b.view, 1, static_cast<int64_t>(b.block_size) + t, h, k_t.data());  // the generic reader agrees
        for (int32_t g = 0; g < b.head_dim / kKiviGroup; ++g) {
          double lo = 1e30, hi = -1e30;
          for (int32_t c = g * kKiviGroup; c < (g + 1) * kKiviGroup; ++c) {
            lo = std::min<double>(lo, fp16_to_fp32(b.view.staging_row(1, 0, t, h)[c]));
            hi = std::max<double>(hi, fp16_to_fp32(b.view.staging_row(1, 0, t, h)[c]));
          }
          const double levels = (1 << bits) - 1;
          const double bound = (hi - lo) / levels * (0.5 + levels / 1024.0) + 1e-6;
          for (int32_t c = g * kKiviGroup; c < (g + 1) * kKiviGroup; ++c) {
            EXPECT_NEAR(row[c], fp16_to_fp32(b.view.staging_row(1, 0, t, h)[c]), bound) << "value t" << t << " c" << c;
            EXPECT_EQ(row[c], k_t[c]);
          }
        }
      }
    }
  }
}

// Changing one staged token changes only its key group (of its head) and its value row.
TEST(Kivi, OneTokenTouchesOnlyItsOwnGroups) {
  SealedBlock b(KvFormat::kKivi2, 64, 2, 32);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (uint16_t& x : b.staging_k) x = fp32_to_fp16(normal(rng));
  for (uint16_t& x : b.staging_v) x = fp32_to_fp16(normal(rng));
  kivi_seal_block(b.view, 0, 0);
  const std::vector<uint8_t> k_before = b.k, v_before = b.v;
  const int32_t token = 40, head = 1;
  for (int32_t c = 0; c < b.head_dim; ++c) {
    b.view.staging_row(0, 0, token, head)[c] = fp32_to_fp16(50.0f + c);
    b.view.staging_row(1, 0, token, head)[c] = fp32_to_fp16(-50.0f - c);
  }
  kivi_seal_block(b.view, 0, 0);
  const size_t group_begin = b.view.kivi_key_group_offset(0, head, token / kKiviGroup);
  const size_t group_end = group_begin + static_cast<size_t>(b.head_dim) * (kKiviGroup * 2 / 8 + 4);
  const size_t row_begin = b.view.kivi_value_row_offset(0, token, head);
  const size_t row_end = row_begin + kv_row_bytes(KvFormat::kKivi2, b.head_dim);
  bool key_changed = false, value_changed = false;
  for (size_t i = 0; i < k_before.size(); ++i) {
    if (k_before[i] != b.k[i]) {
      EXPECT_TRUE(i >= group_begin && i < group_end) << "key byte " << i << " outside the token's group";
      key_changed = true;
    }
    if (v_before[i] != b.v[i]) {
      EXPECT_TRUE(i >= row_begin && i < row_end) << "value byte " << i << " outside the token's row";
      value_changed = true;
    }
  }
  EXPECT_TRUE(key_changed && value_changed);
}

TEST(Kivi, FormatNamesSizesAndShapeChecks) {
  std::string error;
  EXPECT_EQ(parse_kv_format("kivi4", &error), KvFormat::kKivi4);
  EXPECT_EQ(parse_kv_format("kivi2", &error), KvFormat::kKivi2);
  EXPECT_EQ(kv_format_name(KvFormat::kKivi2), "kivi2");
  // Llama-3-8B's head: 128 channels. kivi2: 32 code bytes + 4 groups x 2 fp16 = 48 bytes per
  // token and head in V, the same spread over K's groups; fp16 takes 256.
  EXPECT_EQ(kv_row_bytes(KvFormat::kKivi2, 128), 48u);
  EXPECT_EQ(kv_row_bytes(KvFormat::kKivi4, 128), 80u);
  EXPECT_EQ(kv_default_block_size(KvFormat::kKivi4), 128);
  EXPECT_EQ(kv_default_block_size(KvFormat::kInt8), 16);
  EXPECT_TRUE(kv_format_shape_error(KvFormat::kKivi2, 128, 64).empty());
  EXPECT_NE(kv_format_shape_error(KvFormat::kKivi2, 16, 64), "");
  EXPECT_NE(kv_format_shape_error(KvFormat::kKivi4, 32, 48), "");
  EXPECT_TRUE(kv_format_shape_error(KvFormat::kInt8, 16, 48).empty());
}

}  // namespace
}  // namespace folio
