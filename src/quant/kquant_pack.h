// Packing of K-quant super-blocks from unpacked codes (the layouts of block_formats.h), shared by
// the reference quantizer and the searching one (quantize_search.h). Internal linkage, as in
// block_formats.h.
#pragma once

#include <cstdint>

namespace folio::quant {

// Q4_K / Q5_K: 6-bit sub-block scales sc[8] and mins m[8] into the 12 scale bytes.
static inline void pack_q4k_scales(const uint8_t* sc, const uint8_t* m, uint8_t* packed) {
  for (int j = 0; j < 4; ++j) {
    packed[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    packed[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    packed[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4));
  }
}

// Q4_K / Q5_K: codes q[256] (0..15, or 0..31 with qh) into qs[128] (and qh[32] for Q5_K).
static inline void pack_q45k_values(const uint8_t* q, uint8_t* qs, uint8_t* qh) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      qs[32 * c + l] = static_cast<uint8_t>((q[64 * c + l] & 0x0f) | ((q[64 * c + 32 + l] & 0x0f) << 4));
    }
  }
  if (qh == nullptr) return;
  for (int l = 0; l < 32; ++l) {
    uint8_t bits = 0;
    for (int j = 0; j < 8; ++j) bits = static_cast<uint8_t>(bits | ((q[32 * j + l] >> 4) << j));
    qh[l] = bits;
  }
}

// Q6_K: codes q[256] (0..63, i.e. value + 32) into ql[128] and qh[64].
static inline void pack_q6k_values(const uint8_t* q, uint8_t* ql, uint8_t* qh) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* qq = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      ql[64 * h + l] = static_cast<uint8_t>((qq[l] & 0x0f) | ((qq[l + 64] & 0x0f) << 4));
      ql[64 * h + l + 32] = static_cast<uint8_t>((qq[l + 32] & 0x0f) | ((qq[l + 96] & 0x0f) << 4));
      qh[32 * h + l] = static_cast<uint8_t>((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                            ((qq[l + 96] >> 4) << 6));
    }
  }
}

}  // namespace folio::quant
