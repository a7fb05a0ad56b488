#include "kv/kv_quant.h"

#include <array>
#include <cassert>
#include <cmath>
#include <cstring>

#include "core/fp16.h"
#include "core/fp16_rows.h"
#include "kv/kivi.h"

namespace folio {

uint8_t fp8_e4m3_from_float(float x) {
  const uint32_t bits = fp32_to_bits(x);
  const uint8_t sign = static_cast<uint8_t>((bits >> 24) & 0x80u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);  // NaN
  const float a = fp32_from_bits(abs_bits);
  if (a >= kFp8E4M3Max) return static_cast<uint8_t>(sign | 0x7eu);  // saturate (inf too)
  if (a < 0.015625f) {
    // Subnormal range (below 2^-6): units of 2^-9, rounded to nearest even; 8 units is the
    // smallest normal, whose encoding 0x08 is the same integer.
    const float units = std::nearbyint(a * 512.0f);
    return static_cast<uint8_t>(sign | static_cast<uint8_t>(units));
  }
  // Normal: keep 3 of the 23 mantissa bits, round to nearest even; a carry bumps the exponent.
  const uint32_t rounded = abs_bits + 0x7ffffu + ((abs_bits >> 20) & 1u);
  const int32_t exponent = static_cast<int32_t>(rounded >> 23) - 127 + 7;
  const uint32_t mantissa = (rounded >> 20) & 7u;
  const uint32_t code = (static_cast<uint32_t>(exponent) << 3) | mantissa;
  return static_cast<uint8_t>(sign | (code > 0x7eu ? 0x7eu : code));
}

float fp8_e4m3_to_float(uint8_t bits) {
  const float sign = (bits & 0x80u) ? -1.0f : 1.0f;
  const int32_t exponent = (bits >> 3) & 0xf;
  const int32_t mantissa = bits & 7;
  if (exponent == 15 && mantissa == 7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);
  return sign * std::ldexp(1.0f + static_cast<float>(mantissa) / 8.0f, exponent - 7);
}

const float* fp8_e4m3_values() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<size_t>(i)] = fp8_e4m3_to_float(static_cast<uint8_t>(i));
    return t;
  }();
  return table.data();
}

void kv_quantize_row(KvFormat format, const float* x, int32_t n, uint8_t* values, float* scale) {
  assert(kv_format_has_scales(format));
  float amax = 0.0f;
  for (int32_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float max_q = format == KvFormat::kFp8E4M3 ? kFp8E4M3Max : kInt8Max;
  const float inv = amax > 0.0f ? max_q / amax : 0.0f;
  *scale = amax > 0.0f ? amax / max_q : 0.0f;
  if (format == KvFormat::kFp8E4M3) {
    for (int32_t i = 0; i < n; ++i) values[i] = fp8_e4m3_from_float(x[i] * inv);
  } else {
    for (int32_t i = 0; i < n; ++i) {
      const float q = std::fmin(std::fmax(std::nearbyint(x[i] * inv), -kInt8Max), kInt8Max);
      values[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
  }
}

void kv_dequantize_row(KvFormat format, const uint8_t* values, float scale, int32_t n, float* out) {
  assert(kv_format_has_scales(format));
  if (format == KvFormat::kFp8E4M3) {
    const float* table = fp8_e4m3_values();
    for (int32_t i = 0; i < n; ++i) out[i] = table[values[i]] * scale;
  } else {
    for (int32_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(values[i])) * scale;
  }
}

void kv_store_row(const KvLayerView& cache, int which, int64_t slot, int32_t head, const float* x) {
  assert(!kv_format_is_kivi(cache.format) && "KIVI rows are written to staging and sealed a block at a time");
  uint8_t* base = which == 0 ? cache.k : cache.v;
  uint8_t* values = base + cache.value_offset(slot, head);
  if (cache.format == KvFormat::kFp16) {
    fp32_to_fp16_row(x, reinterpret_cast<uint16_t*>(values), cache.head_dim);
    return;
  }
  if (cache.format == KvFormat::kBf16) {
    auto* out = reinterpret_cast<uint16_t*>(values);
    for (int32_t d = 0; d < cache.head_dim; ++d) out[d] = fp32_to_bf16(x[d]);
    return;
  }
  float scale = 0.0f;
  kv_quantize_row(cache.format, x, cache.head_dim, values, &scale);
  std::memcpy(base + cache.scale_offset(slot, head), &scale, sizeof scale);
}

void kv_load_row(const KvLayerView& cache, int which, int64_t slot, int32_t head, float* out) {
  if (kv_format_is_kivi(cache.format)) {  // a sealed block
    const auto block = static_cast<int32_t>(slot / cache.block_size);
    const auto in_block = static_cast<int32_t>(slot % cache.block_size);
    if (which == 0) {
      kivi_load_key_row(cache, block, in_block, head, out);
    } else {
      kivi_load_value_row(cache, block, in_block, head, out);
    }
    return;
  }
  const uint8_t* base = which == 0 ? cache.k : cache.v;
  const uint8_t* values = base + cache.value_offset(slot, head);
  if (cache.format == KvFormat::kFp16) {
    fp16_to_fp32_row(reinterpret_cast<const uint16_t*>(values), out, cache.head_dim);
    return;
  }
  if (cache.format == KvFormat::kBf16) {
    const auto* in = reinterpret_cast<const uint16_t*>(values);
    for (int32_t d = 0; d < cache.head_dim; ++d) out[d] = bf16_to_fp32(in[d]);
    return;
  }
  float scale;
  std::memcpy(&scale, base + cache.scale_offset(slot, head), sizeof scale);
  kv_dequantize_row(cache.format, values, scale, cache.head_dim, out);
}

}  // namespace folio
