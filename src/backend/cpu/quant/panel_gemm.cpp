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
  const bool k_quant = weight_type == DType::Q4_K || weight_type == DType::Q5_K || weight_type == DType::Q6_K;
  const bool type = k_quant || weight_type == DType::Q4_0 || weight_type == DType::Q4_1 || weight_type == DType::Q5_0 ||
                    weight_type == DType::Q5_1 || weight_type == DType::Q8_0;
  return type && rows > 0 && rows % 16 == 0 && cols > 0 && cols % (k_quant ? 256 : 32) == 0;
}

PanelLayout panel_layout_of(DType type) {
  switch (type) {
    case DType::Q4_0: return {sizeof(quant::BlockQ4_0), 2, sizeof(quant::BlockQ8_0), 2, 8, true, -1, false};
    case DType::Q4_1: return {sizeof(quant::BlockQ4_1), 4, sizeof(quant::BlockQ8_1), 4, 0, true, -1, false};
    case DType::Q4_K: return {sizeof(quant::BlockQ4_K) / 8, 0, sizeof(quant::BlockQ8_0), 2, 0, true, -1, true};
    case DType::Q5_K: return {sizeof(quant::BlockQ5_K) / 8, 0, sizeof(quant::BlockQ8_0), 2, 0, true, 0, true};
    case DType::Q6_K: return {0, 0, sizeof(quant::BlockQ8_0), 2, 0, true, -1, true, 16, true};
    // Five bits: the low four packed as Q4's nibbles, the fifth in a plane of bits beside them.
    case DType::Q5_0: return {sizeof(quant::BlockQ5_0), 6, sizeof(quant::BlockQ8_0), 2, 16, true, 2, false};
    case DType::Q5_1: return {sizeof(quant::BlockQ5_1), 8, sizeof(quant::BlockQ8_1), 4, 0, true, 4, false};
    default: return {sizeof(quant::BlockQ8_0), 2, sizeof(quant::BlockQ8_0), 2, 128, false, -1, false};  // Q8_0
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
  if (l.six_bit) return 128 + 2 * 32;
  return l.four_bit ? 256 + (l.high_bits_offset >= 0 ? 64 : 0) : 512;
}

size_t panel_packed_block_bytes(const PanelLayout& l) {
  const size_t scale_bytes = l.k_quant ? sizeof(float) : sizeof(uint16_t);
  return panel_packed_codes_bytes(l) + kPanelWeightRows * scale_bytes * (l.offset == 0 && !l.six_bit ? 2 : 1);
}

size_t panel_code_bytes(const PanelLayout& l) {
  return static_cast<size_t>(l.block_inputs) * kPanelWeightRows;
}

DType panel_activation_partner(DType weight_type) {
  return panel_needs_packing(weight_type) ? DType::Q4_0 : weight_type;
}

bool panel_needs_packing(DType weight_type) {
  return weight_type == DType::Q4_K || weight_type == DType::Q5_K || weight_type == DType::Q6_K;
}

namespace {

// Q6_K: each super-block's sixteen 16-input sub-blocks are the panel's blocks. Codes u = q + 32
// (0..63): nibbles at byte 64 v + 4 n + i, input 4 v + i (low) and 8 + 4 v + i (high) of row n,
// v = 0, 1 (so code vector j = 0..3, inputs 4j..4j+3, is v = j's low nibbles or v = j - 2's
// high ones); then the planes of bits 4 and 5, 32 bytes each: word j, bit 4 n + i = input
// 4 j + i's; then the rows' scales d * sc as float32 (exact: an fp16 times an int8).
void pack_q6k(const PanelLayout& l, int64_t cols, const uint8_t* weights, int64_t r0, uint8_t* panel) {
  const int64_t supers = cols / 256;
  const size_t row_bytes = static_cast<size_t>(supers) * sizeof(quant::BlockQ6_K);
  const size_t stride = panel_packed_block_bytes(l), codes_bytes = panel_packed_codes_bytes(l);
  std::memset(panel, 0, static_cast<size_t>(supers) * 16 * stride);  // the planes are or-ed into
  for (int n = 0; n < kPanelWeightRows; ++n) {
    const uint8_t* row = weights + static_cast<size_t>(r0 + n) * row_bytes;
    for (int64_t s = 0; s < supers; ++s) {
      quant::BlockQ6_K x;
      std::memcpy(&x, row + s * sizeof(quant::BlockQ6_K), sizeof x);
      int8_t q[256];
      quant::unpack_q6k(x, q);
      const float d = fp16_to_fp32(x.d);
      for (int j = 0; j < 16; ++j) {
        uint8_t* out = panel + (s * 16 + j) * stride;
        uint8_t u[16];
        for (int i = 0; i < 16; ++i) u[i] = static_cast<uint8_t>(q[16 * j + i] + 32);
        for (int v = 0; v < 2; ++v) {
          for (int i = 0; i < 4; ++i) {
            out[64 * v + 4 * n + i] = static_cast<uint8_t>((u[4 * v + i] & 0x0F) | ((u[8 + 4 * v + i] & 0x0F) << 4));
          }
        }
        for (int plane = 0; plane < 2; ++plane) {
          for (int w = 0; w < 4; ++w) {
            uint64_t word;
            std::memcpy(&word, out + 128 + 32 * plane + 8 * w, 8);
            for (int i = 0; i < 4; ++i) {
              word |= static_cast<uint64_t>((u[4 * w + i] >> (4 + plane)) & 1) << (4 * n + i);
            }
            std::memcpy(out + 128 + 32 * plane + 8 * w, &word, 8);
          }
        }
        const float scale = d * static_cast<float>(x.scales[j]);
        std::memcpy(out + codes_bytes + 4 * n, &scale, 4);
      }
    }
  }
}

}  // namespace

void panel_pack_k_quant(const PanelLayout& l, int64_t cols, const uint8_t* weights, int64_t r0, uint8_t* panel) {
  if (l.six_bit) {
    pack_q6k(l, cols, weights, r0, panel);
    return;
  }
  const int64_t supers = cols / 256;
  const size_t super_bytes = 8 * l.weight_block_bytes, row_bytes = static_cast<size_t>(supers) * super_bytes;
  const size_t stride = panel_packed_block_bytes(l), codes_bytes = panel_packed_codes_bytes(l);
  const bool five = l.high_bits_offset >= 0;
  for (int n = 0; n < kPanelWeightRows; ++n) {
    const uint8_t* row = weights + static_cast<size_t>(r0 + n) * row_bytes;
    for (int64_t s = 0; s < supers; ++s) {
      const uint8_t* block = row + s * super_bytes;
      uint8_t q[256], sc[8], m[8];
      uint16_t d_bits, dmin_bits;
      std::memcpy(&d_bits, block, 2);
      std::memcpy(&dmin_bits, block + 2, 2);
      quant::unpack_q4k_scales(block + 4, sc, m);
      if (five) {
        const auto* x = reinterpret_cast<const quant::BlockQ5_K*>(block);
        quant::unpack_q45k(x->qs, x->qh, q);
      } else {
        quant::unpack_q45k(reinterpret_cast<const quant::BlockQ4_K*>(block)->qs, nullptr, q);
      }
      const float d = fp16_to_fp32(d_bits), dmin = fp16_to_fp32(dmin_bits);
      for (int j = 0; j < 8; ++j) {
        uint8_t* out = panel + (s * 8 + j) * stride;
        const uint8_t* c = q + 32 * j;
        // The nibbles as transposed Q4_0 blocks: byte 64 v + 4 n + i holds input 4 v + i
        // (low nibble) and 16 + 4 v + i (high nibble) of row n, v = 0..3.
        for (int v = 0; v < 4; ++v) {
          for (int i = 0; i < 4; ++i) {
            out[64 * v + 4 * n + i] = static_cast<uint8_t>((c[4 * v + i] & 0x0F) | ((c[16 + 4 * v + i] & 0x0F) << 4));
          }
        }
        if (five) {  // panel_high_bits' plane: word v, bit 4 n + i = input 4 v + i's fifth bit
          for (int v = 0; v < 8; ++v) {
            uint64_t word = 0;  // row 0 starts the word; the others add their bits
            if (n > 0) std::memcpy(&word, out + 256 + 8 * v, 8);
            for (int i = 0; i < 4; ++i) word |= static_cast<uint64_t>((c[4 * v + i] >> 4) & 1) << (4 * n + i);
            std::memcpy(out + 256 + 8 * v, &word, 8);
          }
        }
        // Exact in float32: an fp16 times an integer below 64.
        const float scale = d * static_cast<float>(sc[j]), minimum = -dmin * static_cast<float>(m[j]);
        std::memcpy(out + codes_bytes + 4 * n, &scale, 4);
        std::memcpy(out + codes_bytes + 4 * kPanelWeightRows + 4 * n, &minimum, 4);
      }
    }
  }
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
  const int64_t blocks = cols / l.block_inputs;
  for (int64_t m = 0; m < n; ++m) {
    for (int64_t b = 0; b < blocks; ++b) {
      // Q6_K: two panel blocks a Q8_0 block, each summing its half's codes.
      const int64_t first = b * l.block_inputs;
      const uint8_t* block = acts + m * act_row_bytes + first / kPanelBlock * l.act_block_bytes;
      float* out = terms + panel_terms_index(blocks, m, b);
      out[0] = half_to_float(block);
      if (l.offset == 0 && !l.k_quant) {
        out[1] = half_to_float(block + 2);  // Q8_1's s = d sum(q)
        continue;
      }
      const auto* q = reinterpret_cast<const int8_t*>(block + l.act_codes_offset + first % kPanelBlock);
      int32_t sum = 0;
      for (int k = 0; k < l.block_inputs; ++k) sum += q[k];
      // The K-quants' minimum meets d sum(q) from Q8_0's codes: one rounding, not Q8_1's fp16.
      out[1] = l.k_quant ? out[0] * static_cast<float>(sum) : static_cast<float>(l.offset * sum);
    }
  }
}

size_t panel_terms_floats(DType weight_type, int64_t n, int64_t cols) {
  const int64_t blocks = cols / panel_layout_of(weight_type).block_inputs;
  return static_cast<size_t>((n + kPanelTermRows - 1) / kPanelTermRows * kPanelTermRows * blocks * 2);
}

bool panel_same_terms(DType a, DType b) {
  const PanelLayout x = panel_layout_of(a), y = panel_layout_of(b);
  return x.block_inputs == y.block_inputs && x.k_quant == y.k_quant && x.offset == y.offset &&
         x.act_block_bytes == y.act_block_bytes;
}

size_t panel_packed_bytes(DType weight_type, int64_t rows, int64_t cols) {
  const PanelLayout l = panel_layout_of(weight_type);
  return static_cast<size_t>(rows / kPanelWeightRows) * static_cast<size_t>(cols / l.block_inputs) *
         panel_packed_block_bytes(l);
}

}  // namespace folio::cpu
