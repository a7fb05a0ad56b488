#include "kv/kv_quant.h"

#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/fp16.h"
#include "core/fp16_rows.h"
#include "kv/kivi.h"

namespace folio {

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

void kv_seal_block(const KvLayerView& cache, int32_t block, int32_t staging) {
  assert(kv_format_has_residual(cache.format) && staging >= 0 && staging < cache.num_staging);
  if (kv_format_is_kivi(cache.format)) {
    kivi_seal_block(cache, block, staging);
    return;
  }
  std::vector<float> row(static_cast<size_t>(cache.head_dim));
  for (int32_t t = 0; t < cache.block_size; ++t) {
    const int64_t slot = static_cast<int64_t>(block) * cache.block_size + t;
    for (int32_t head = 0; head < cache.num_kv_heads; ++head) {
      for (int which = 0; which < 2; ++which) {
        fp16_to_fp32_row(cache.staging_row(which, staging, t, head), row.data(), cache.head_dim);
        kv_store_row(cache, which, slot, head, row.data());
      }
    }
  }
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
