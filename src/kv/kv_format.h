// How K and V are stored in the paged cache's blocks (`--kv-cache-dtype`), and the byte layout
// of one block in each format. Plain inline arithmetic, usable from CUDA device code.
//
// Per layer, K and V are separate arrays of num_blocks equal-sized blocks; one block of K (or V)
// holds block_size token slots of num_kv_heads heads of head_dim values:
//   fp16:      [block_size][num_kv_heads][head_dim] IEEE half
//   fp8, int8: [block_size][num_kv_heads][head_dim] one byte each, then
//              [block_size][num_kv_heads] float32 scales, one per (token, head)
// A (token, head) scale is the row's absolute maximum over the format's largest value (448 for
// E4M3, 127 for int8), so no calibration is needed, a row always uses the format's whole range,
// and an outlier in one head or token cannot spoil any other row. Everything a block needs is
// inside it, so copy-on-write, swap and prefix caching move blocks as opaque bytes.
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
};

// Largest magnitude a quantized value can take: the scale maps a row's absmax onto it.
inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kInt8Max = 127.0f;

FOLIO_KV_HD constexpr bool kv_format_has_scales(KvFormat f) { return f != KvFormat::kFp16; }
FOLIO_KV_HD constexpr size_t kv_format_value_bytes(KvFormat f) { return f == KvFormat::kFp16 ? 2 : 1; }

// Bytes one token of one head takes in one of K or V, its scale included.
FOLIO_KV_HD constexpr size_t kv_row_bytes(KvFormat f, int32_t head_dim) {
  return kv_format_value_bytes(f) * static_cast<size_t>(head_dim) + (kv_format_has_scales(f) ? sizeof(float) : 0);
}

// Bytes of one block of K (or V) of one layer.
FOLIO_KV_HD constexpr size_t kv_block_bytes(KvFormat f, int32_t block_size, int32_t num_kv_heads,
                                            int32_t head_dim) {
  return static_cast<size_t>(block_size) * num_kv_heads * kv_row_bytes(f, head_dim);
}

// The name `--kv-cache-dtype` and /metrics use ("fp16", "fp8", "int8").
std::string_view kv_format_name(KvFormat f);

// Parses a --kv-cache-dtype value: auto and fp16 -> kFp16, fp8 (= fp8_e4m3) -> kFp8E4M3,
// int8 -> kInt8; anything else (and the formats still to come) -> nullopt with `error` set.
std::optional<KvFormat> parse_kv_format(std::string_view name, std::string* error);

}  // namespace folio
