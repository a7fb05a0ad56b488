// How K and V are stored in the paged cache's blocks (`--kv-cache-dtype`), and the byte layout
// of one block in each format. Plain inline arithmetic, usable from CUDA device code.
//
// Per layer, K and V are separate arrays of num_blocks equal-sized blocks; one block of K (or V)
// holds block_size token slots of num_kv_heads heads of head_dim values:
//   fp16:      [block_size][num_kv_heads][head_dim] IEEE half
//   bf16:      the same layout in bfloat16 (fp32's range, 8 bits of mantissa)
//   fp8, int8: [block_size][num_kv_heads][head_dim] one byte each, then
//              [block_size][num_kv_heads] float32 scales, one per (token, head)
//   kivi4, kivi2 (KIVI, Liu et al. 2024: 4 or 2 bits, asymmetric, fp16 scale and minimum):
//     K: [num_kv_heads][block_size / 32 token groups] of
//          codes [head_dim channels][32 tokens] (a channel's 32 tokens packed in 16 or 8 bytes),
//          then scale [head_dim] and minimum [head_dim] fp16: keys per channel over 32 tokens;
//     V: [block_size][num_kv_heads] rows of
//          codes [head_dim] packed, then scale [head_dim / 32] and minimum [head_dim / 32] fp16:
//          values per token over groups of 32 channels.
// A (token, head) scale is the row's absolute maximum over the format's largest value (448 for
// E4M3, 127 for int8), so no calibration is needed, a row always uses the format's whole range,
// and an outlier in one head or token cannot spoil any other row. Everything a block needs is
// inside it, so copy-on-write, swap and prefix caching move blocks as opaque bytes.
//
// The KIVI formats and fp8 keep a residual in full precision: a block is quantized ("sealed")
// when it fills, and until then its tokens live in an fp16 staging block (kv_layer_view.h). A
// query sees the blocks before its own quantized and its own block in fp16, so the residual is
// the newest 0..block_size-1 tokens (KIVI's key residual behaves the same way: it flushes a full
// group of R tokens at once), and block_size is the residual length R (128 by default).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#if defined(__CUDACC__)
#define FOLIO_KV_HD __host__ __device__
#else
#define FOLIO_KV_HD
#endif

namespace folio {

enum class KvFormat : uint8_t {
  kFp16,     // IEEE half (what `auto` means)
  kFp8E4M3,  // OCP E4M3 ("fn": no infinities, max 448) with a float scale per (token, head)
  kInt8,     // symmetric int8 in [-127, 127] with a float scale per (token, head)
  kKivi4,    // KIVI 4-bit: K per channel over 32 tokens, V per token over 32 channels
  kKivi2,    // KIVI 2-bit, same layout
  kBf16,     // bfloat16, fp16's layout: no scales, fp32's range (models whose K/V overflow fp16)
};

// Largest magnitude a quantized value can take: the scale maps a row's absmax onto it.
inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kInt8Max = 127.0f;

// KIVI's quantization group: 32 tokens of a key channel, 32 channels of a value row.
inline constexpr int32_t kKiviGroup = 32;

FOLIO_KV_HD constexpr bool kv_format_is_kivi(KvFormat f) {
  return f == KvFormat::kKivi4 || f == KvFormat::kKivi2;
}
// Formats whose newest tokens wait in fp16 staging blocks until their block is sealed: KIVI, as
// its paper defines it, and fp8, whose 3-bit mantissa costs the keys a relative error of up to
// 1/16 that no scale can fix; an fp16 residual of the newest block took the default model's
// perplexity loss at 4k context from +2.2% to +0.5% (docs/BENCHMARKS.md).
FOLIO_KV_HD constexpr bool kv_format_has_residual(KvFormat f) {
  return kv_format_is_kivi(f) || f == KvFormat::kFp8E4M3;
}
// The fp8/int8 layout: one byte per value, a float scale per (token, head).
FOLIO_KV_HD constexpr bool kv_format_has_scales(KvFormat f) {
  return f == KvFormat::kFp8E4M3 || f == KvFormat::kInt8;
}
// Two-byte formats with fp16's layout and no scales.
FOLIO_KV_HD constexpr bool kv_format_is_16bit(KvFormat f) {
  return f == KvFormat::kFp16 || f == KvFormat::kBf16;
}
FOLIO_KV_HD constexpr size_t kv_format_value_bytes(KvFormat f) {
  return kv_format_is_16bit(f) ? 2 : 1;
}
FOLIO_KV_HD constexpr int32_t kivi_bits(KvFormat f) {
  return f == KvFormat::kKivi2 ? 2 : 4;
}

// Bytes one token of one head takes in one of K or V, its scales included (for KIVI keys, a
// 32-token group's per-channel scales spread over its tokens: K and V come out equal).
FOLIO_KV_HD constexpr size_t kv_row_bytes(KvFormat f, int32_t head_dim) {
  if (kv_format_is_kivi(f)) {
    return static_cast<size_t>(head_dim) * kivi_bits(f) / 8 + static_cast<size_t>(head_dim) / kKiviGroup * 4;
  }
  return kv_format_value_bytes(f) * static_cast<size_t>(head_dim) + (kv_format_has_scales(f) ? sizeof(float) : 0);
}

// Bytes of one block of K (or V) of one layer.
FOLIO_KV_HD constexpr size_t kv_block_bytes(KvFormat f, int32_t block_size, int32_t num_kv_heads, int32_t head_dim) {
  return static_cast<size_t>(block_size) * num_kv_heads * kv_row_bytes(f, head_dim);
}

// The name `--kv-cache-dtype` and /metrics use ("fp16", "bf16", "fp8", "int8", "kivi4", "kivi2").
std::string_view kv_format_name(KvFormat f);

// Parses a --kv-cache-dtype value: auto and fp16 -> kFp16, bf16, fp8 (= fp8_e4m3) -> kFp8E4M3,
// int8 -> kInt8, kivi4, kivi2; anything else -> nullopt with `error` set.
std::optional<KvFormat> parse_kv_format(std::string_view name, std::string* error);

// The block size a format uses when none is given: the residual length of 128 tokens (KIVI's
// default) for the residual formats, 16 otherwise.
int32_t kv_default_block_size(KvFormat f);

// Whether a model's head size and a block size suit the format: KIVI groups 32 tokens and 32
// channels, so both must be multiples of 32; fp8's blocks hold whole 16-key steps of the GPU's
// decode kernel (a step is sealed or staged, never both), so its block size is a multiple of 16.
// Empty when they do, else the reason.
std::string kv_format_shape_error(KvFormat f, int32_t block_size, int32_t head_dim);

}  // namespace folio
