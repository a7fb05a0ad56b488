// The parts of panel_gemm.h and panel_layout.h that run before any ISA check: which weights have
// a panel path, the shared layout, and the activation terms. Compiled without SIMD flags.
#include "backend/cpu/quant/panel_gemm.h"

#include <cstdlib>
#include <cstring>

#include "backend/cpu/quant/panel_layout.h"
#include "core/fp16.h"
#include "quant/block_formats.h"

namespace folio::cpu {

bool panel_gemm_supports(DType weight_type, int64_t rows, int64_t cols) {
  const bool type = weight_type == DType::Q4_0 || weight_type == DType::Q4_1 || weight_type == DType::Q5_0 ||
                    weight_type == DType::Q5_1 || weight_type == DType::Q8_0;
  return type && rows > 0 && rows % 16 == 0 && cols > 0 && cols % 32 == 0;
}

PanelLayout panel_layout_of(DType type) {
  switch (type) {
    case DType::Q4_0: return {sizeof(quant::BlockQ4_0), 2, sizeof(quant::BlockQ8_0), 2, 8, true, -1};
    case DType::Q4_1: return {sizeof(quant::BlockQ4_1), 4, sizeof(quant::BlockQ8_1), 4, 0, true, -1};
    // Five bits: the low four packed as Q4's nibbles, the fifth in a plane of bits beside them.
    case DType::Q5_0: return {sizeof(quant::BlockQ5_0), 6, sizeof(quant::BlockQ8_0), 2, 16, true, 2};
    case DType::Q5_1: return {sizeof(quant::BlockQ5_1), 8, sizeof(quant::BlockQ8_1), 4, 0, true, 4};
    default: return {sizeof(quant::BlockQ8_0), 2, sizeof(quant::BlockQ8_0), 2, 128, false, -1};  // Q8_0
  }
}

void panel_high_bits(const PanelLayout& l, const uint8_t* const* rows, uint8_t out[64]) {
  uint64_t words[8] = {};
  for (int n = 0; n < kPanelWeightRows; ++n) {
    uint32_t high;
    std::memcpy(&high, rows[n] + l.high_bits_offset, 4);
    for (int j = 0; j < 8; ++j) words[j] |= static_cast<uint64_t>((high >> (4 * j)) & 0x0F) << (4 * n);
  }
  std::memcpy(out, words, sizeof words);
}

size_t panel_packed_codes_bytes(const PanelLayout& l) {
  return l.four_bit ? 256 + (l.high_bits_offset >= 0 ? 64 : 0) : 512;
}

size_t panel_packed_block_bytes(const PanelLayout& l) {
  return panel_packed_codes_bytes(l) + kPanelWeightRows * sizeof(uint16_t) * (l.offset == 0 ? 2 : 1);
}

size_t panel_terms_index(int64_t blocks, int64_t m, int64_t b) {
  return static_cast<size_t>(((m / kPanelTermRows) * blocks + b) * 2 * kPanelTermRows + (m % kPanelTermRows) * 2);
}

namespace {

struct PanelScratch {
  uint8_t* bytes = nullptr;
  size_t capacity = 0;
  ~PanelScratch() { std::free(bytes); }
};

float half_to_float(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

}  // namespace

uint8_t* panel_scratch(size_t bytes) {
  static thread_local PanelScratch scratch;
  if (bytes > scratch.capacity) {
    std::free(scratch.bytes);
    scratch.capacity = (bytes + 4095) / 4096 * 4096;
    scratch.bytes = static_cast<uint8_t*>(std::aligned_alloc(64, scratch.capacity));
  }
  return scratch.bytes;
}

// Plain C++: once per matmul, n x blocks sums of 32 bytes (the compiler vectorizes it for the
// baseline ISA); the sum is an exact integer, so every path gets the same floats.
void panel_activation_terms(DType weight_type, const uint8_t* acts, size_t act_row_bytes, int64_t n, int64_t cols,
                            float* terms) {
  const PanelLayout l = panel_layout_of(weight_type);
  const int64_t blocks = cols / kPanelBlock;
  for (int64_t m = 0; m < n; ++m) {
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* block = acts + m * act_row_bytes + b * l.act_block_bytes;
      float* out = terms + panel_terms_index(blocks, m, b);
      out[0] = half_to_float(block);
      if (l.offset == 0) {
        out[1] = half_to_float(block + 2);  // Q8_1's s = d sum(q)
        continue;
      }
      const auto* q = reinterpret_cast<const int8_t*>(block + l.act_codes_offset);
      int32_t sum = 0;
      for (int k = 0; k < kPanelBlock; ++k) sum += q[k];
      out[1] = static_cast<float>(l.offset * sum);
    }
  }
}

size_t panel_terms_floats(int64_t n, int64_t cols) {
  return static_cast<size_t>((n + kPanelTermRows - 1) / kPanelTermRows * kPanelTermRows * (cols / kPanelBlock) * 2);
}

size_t panel_packed_bytes(DType weight_type, int64_t rows, int64_t cols) {
  return static_cast<size_t>(rows / kPanelWeightRows) * static_cast<size_t>(cols / kPanelBlock) *
         panel_packed_block_bytes(panel_layout_of(weight_type));
}

}  // namespace folio::cpu
