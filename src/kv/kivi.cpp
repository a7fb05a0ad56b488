#include "kv/kivi.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"

namespace folio {
namespace {

// Code i of a packed run: 2-bit codes four to a byte, 4-bit codes two to a byte, low bits first.
inline int32_t code_at(const uint8_t* packed, int32_t bits, int32_t i) {
  const int32_t per_byte = 8 / bits;
  return (packed[i / per_byte] >> ((i % per_byte) * bits)) & ((1 << bits) - 1);
}

inline void pack_codes(const uint8_t* codes, int32_t n, int32_t bits, uint8_t* packed) {
  const int32_t per_byte = 8 / bits;
  std::memset(packed, 0, static_cast<size_t>(n / per_byte));
  for (int32_t i = 0; i < n; ++i) packed[i / per_byte] |= static_cast<uint8_t>(codes[i] << ((i % per_byte) * bits));
}

inline uint16_t load_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return h;
}

inline void store_half(uint8_t* p, uint16_t h) {
  std::memcpy(p, &h, sizeof h);
}

}  // namespace

void kivi_quantize_group(int32_t bits, const float* x, int32_t n, int32_t stride, uint8_t* codes, uint16_t* scale,
                         uint16_t* minimum) {
  assert(n > 0 && (bits == 2 || bits == 4));
  // Staged values are fp16, but one that overflowed to inf (or a NaN) would make the scale
  // non-finite and spoil its whole group: such values count as fp16's largest (NaN as its
  // smallest), the error a finite fp16 cache would have anyway.
  auto value = [&](int32_t i) { return std::fmin(std::fmax(x[static_cast<size_t>(i) * stride], -65504.0f), 65504.0f); };
  float lo = value(0);
  float hi = lo;
  for (int32_t i = 1; i < n; ++i) {
    lo = std::fmin(lo, value(i));
    hi = std::fmax(hi, value(i));
  }
  const float levels = static_cast<float>((1 << bits) - 1);
  *scale = fp32_to_fp16((hi - lo) / levels);
  *minimum = fp32_to_fp16(lo);
  const float s = fp16_to_fp32(*scale);
  const float m = fp16_to_fp32(*minimum);
  for (int32_t i = 0; i < n; ++i) {
    float q = 0.0f;
    if (s > 0.0f) q = std::fmin(std::fmax(std::nearbyint((value(i) - m) / s), 0.0f), levels);
    codes[i] = static_cast<uint8_t>(q);
  }
}

void kivi_seal_block(const KvLayerView& cache, int32_t block, int32_t staging) {
  assert(kv_format_is_kivi(cache.format) && staging >= 0 && staging < cache.num_staging);
  const int32_t bits = kivi_bits(cache.format);
  const int32_t d = cache.head_dim;
  const int32_t groups_per_row = d / kKiviGroup;
  std::vector<float> x(static_cast<size_t>(kKiviGroup) * d);
  std::vector<uint8_t> row_codes(static_cast<size_t>(d));
  uint8_t codes[kKiviGroup];
  for (int32_t head = 0; head < cache.num_kv_heads; ++head) {
    // Keys: each channel over each 32-token group.
    for (int32_t group = 0; group < cache.block_size / kKiviGroup; ++group) {
      for (int32_t t = 0; t < kKiviGroup; ++t) {
        const uint16_t* row = cache.staging_row(0, staging, group * kKiviGroup + t, head);
        for (int32_t c = 0; c < d; ++c) x[static_cast<size_t>(t) * d + c] = fp16_to_fp32(row[c]);
      }
      uint8_t* base = cache.k + cache.kivi_key_group_offset(block, head, group);
      const int32_t channel_bytes = kKiviGroup * bits / 8;
      uint8_t* scales = base + static_cast<size_t>(d) * channel_bytes;
      uint8_t* minima = scales + static_cast<size_t>(d) * 2;
      for (int32_t c = 0; c < d; ++c) {
        uint16_t scale, minimum;
        kivi_quantize_group(bits, x.data() + c, kKiviGroup, d, codes, &scale, &minimum);
        pack_codes(codes, kKiviGroup, bits, base + static_cast<size_t>(c) * channel_bytes);
        store_half(scales + 2 * c, scale);
        store_half(minima + 2 * c, minimum);
      }
    }
    // Values: each token over each 32-channel group.
    for (int32_t t = 0; t < cache.block_size; ++t) {
      const uint16_t* row = cache.staging_row(1, staging, t, head);
      for (int32_t c = 0; c < d; ++c) x[c] = fp16_to_fp32(row[c]);
      uint8_t* base = cache.v + cache.kivi_value_row_offset(block, t, head);
      uint8_t* scales = base + static_cast<size_t>(d) * bits / 8;
      uint8_t* minima = scales + static_cast<size_t>(groups_per_row) * 2;
      for (int32_t g = 0; g < groups_per_row; ++g) {
        uint16_t scale, minimum;
        kivi_quantize_group(bits, x.data() + g * kKiviGroup, kKiviGroup, 1, row_codes.data() + g * kKiviGroup, &scale,
                            &minimum);
        store_half(scales + 2 * g, scale);
        store_half(minima + 2 * g, minimum);
      }
      pack_codes(row_codes.data(), d, bits, base);
    }
  }
}

namespace {

// The kKiviGroup codes of one group (a key channel over 32 tokens, or 32 channels of a value
// row) -> code * s + m.
template <int kBits>
void unpack_group(const uint8_t* packed, float s, float m, float* out) {
  constexpr int32_t kPerByte = 8 / kBits;
  constexpr uint32_t kMask = (1u << kBits) - 1;
  for (int32_t byte = 0; byte < kKiviGroup / kPerByte; ++byte) {
    const uint32_t b = packed[byte];
    for (int32_t j = 0; j < kPerByte; ++j)
      out[byte * kPerByte + j] = static_cast<float>((b >> (j * kBits)) & kMask) * s + m;
  }
}

// The loaders attention calls once per block and head, with the code width known at compile
// time (a runtime width costs a division and a variable shift per value) and each group's
// scale and minimum converted once.
template <int kBits>
void load_keys_transposed(const KvLayerView& cache, int32_t block, int32_t head, float* k_t) {
  constexpr int32_t kChannelBytes = kKiviGroup * kBits / 8;
  const int32_t d = cache.head_dim;
  for (int32_t group = 0; group < cache.block_size / kKiviGroup; ++group) {
    const uint8_t* base = cache.k + cache.kivi_key_group_offset(block, head, group);
    const uint8_t* scales = base + static_cast<size_t>(d) * kChannelBytes;
    const uint8_t* minima = scales + static_cast<size_t>(d) * 2;
    for (int32_t c = 0; c < d; ++c) {
      const float s = fp16_to_fp32(load_half(scales + 2 * c));
      const float m = fp16_to_fp32(load_half(minima + 2 * c));
      const uint8_t* packed = base + static_cast<size_t>(c) * kChannelBytes;
      unpack_group<kBits>(packed, s, m, k_t + static_cast<size_t>(c) * cache.block_size + group * kKiviGroup);
    }
  }
}

template <int kBits>
void load_value_row(const KvLayerView& cache, int32_t block, int32_t in_block, int32_t head, float* out) {
  constexpr int32_t kGroupBytes = kKiviGroup * kBits / 8;
  const int32_t d = cache.head_dim;
  const uint8_t* base = cache.v + cache.kivi_value_row_offset(block, in_block, head);
  const uint8_t* scales = base + static_cast<size_t>(d) * kBits / 8;
  const uint8_t* minima = scales + static_cast<size_t>(d / kKiviGroup) * 2;
  for (int32_t g = 0; g < d / kKiviGroup; ++g) {
    const float s = fp16_to_fp32(load_half(scales + 2 * g));
    const float m = fp16_to_fp32(load_half(minima + 2 * g));
    unpack_group<kBits>(base + static_cast<size_t>(g) * kGroupBytes, s, m, out + g * kKiviGroup);
  }
}

}  // namespace

void kivi_load_keys_transposed(const KvLayerView& cache, int32_t block, int32_t head, float* k_t) {
  if (kivi_bits(cache.format) == 2) {
    load_keys_transposed<2>(cache, block, head, k_t);
  } else {
    load_keys_transposed<4>(cache, block, head, k_t);
  }
}

void kivi_load_key_row(const KvLayerView& cache, int32_t block, int32_t in_block, int32_t head, float* out) {
  const int32_t bits = kivi_bits(cache.format);
  const int32_t d = cache.head_dim;
  const int32_t channel_bytes = kKiviGroup * bits / 8;
  const uint8_t* base = cache.k + cache.kivi_key_group_offset(block, head, in_block / kKiviGroup);
  const uint8_t* scales = base + static_cast<size_t>(d) * channel_bytes;
  const uint8_t* minima = scales + static_cast<size_t>(d) * 2;
  for (int32_t c = 0; c < d; ++c) {
    const int32_t code = code_at(base + static_cast<size_t>(c) * channel_bytes, bits, in_block % kKiviGroup);
    out[c] =
        static_cast<float>(code) * fp16_to_fp32(load_half(scales + 2 * c)) + fp16_to_fp32(load_half(minima + 2 * c));
  }
}

void kivi_load_value_row(const KvLayerView& cache, int32_t block, int32_t in_block, int32_t head, float* out) {
  if (kivi_bits(cache.format) == 2) {
    load_value_row<2>(cache, block, in_block, head, out);
  } else {
    load_value_row<4>(cache, block, in_block, head, out);
  }
}

}  // namespace folio
