// GGUF block layouts (bit-compatible with the files): what the model loader reads, what the CPU
// kernels compute with and what the CUDA weights are unpacked from. Every struct is a plain byte
// layout without padding: fp16 fields are stored as their raw bits. The helpers have internal
// linkage (static inline): SIMD files compiled with -m flags include this header too, and a
// shared inline function could be picked by the linker for the scalar path.
#pragma once

#include <cstddef>
#include <cstdint>

namespace folio::quant {

constexpr int kQK = 32;    // elements per block of the 32-element types
constexpr int kQKK = 256;  // elements per K-quant super-block

// x = d * (q - 8), q a nibble. Element j < 16 is the low nibble of qs[j], element j + 16 its
// high nibble.
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};

// x = d * q + m, nibbles as in Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};

// x = d * (q - 16), q = nibble | (bit j of qh) << 4 for element j (qh little-endian).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};

// x = d * q + m, q as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};

// x = d * q.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};

// Activation partner of Q4_1 / Q5_1: x = d * q, s = d * sum(q) (both fp16).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};

// 8 sub-blocks of 32: x = d * sc[j] * q - dmin * m[j], with 6-bit sc/m packed in `scales`
// (see unpack_q4k_scales). Sub-blocks 2c and 2c+1 are the low and high nibbles of qs[32c..32c+31].
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[128];
};

// As Q4_K plus a fifth bit: bit j of qh[l] is the high bit of element l of sub-block j.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[32];
  uint8_t qs[128];
};

// 16 sub-blocks of 16: x = d * scales[j] * (q - 32), q 6 bits. In each 128-element half h
// (ql += 64h, qh += 32h), for l < 32: element l = ql[l] low | qh[l] bits 0-1; element l+32 =
// ql[l+32] low | qh[l] bits 2-3; element l+64 = ql[l] high | bits 4-5; element l+96 = ql[l+32]
// high | bits 6-7.
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};

// Activation partner of the K-quants: x = d * q, bsums[i] = sum of q[16i .. 16i+15].
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(alignof(BlockQ4_0) == 2 && alignof(BlockQ8_K) == 4);

// Q4_K / Q5_K scale bytes: bytes 0-3 hold sc[0..3] (bits 0-5) and the top bits of sc[4..7]
// (bits 6-7); bytes 4-7 the same for the mins; bytes 8-11 the low nibbles of sc[4..7] (bits
// 0-3) and m[4..7] (bits 4-7). Internal linkage: this header is included by SIMD files too.
static inline void unpack_q4k_scales(const uint8_t* packed, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = packed[j] & 63;
    m[j] = packed[j + 4] & 63;
    sc[j + 4] = static_cast<uint8_t>((packed[j + 8] & 0x0f) | ((packed[j] >> 6) << 4));
    m[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
}

// The same unpacking on 32-bit words: sc[0..7] and m[0..7] as 8 bytes each (byte j = entry j).
static inline void unpack_q4k_scales_u64(const uint8_t* packed, uint64_t* sc, uint64_t* m) {
  uint32_t w[3];
  __builtin_memcpy(w, packed, sizeof w);
  const uint32_t low6 = 0x3f3f3f3fu, low4 = 0x0f0f0f0fu, top2 = 0x30303030u;
  const uint32_t sc_lo = w[0] & low6;
  const uint32_t m_lo = w[1] & low6;
  const uint32_t sc_hi = (w[2] & low4) | ((w[0] >> 2) & top2);
  const uint32_t m_hi = ((w[2] >> 4) & low4) | ((w[1] >> 2) & top2);
  *sc = sc_lo | (static_cast<uint64_t>(sc_hi) << 32);
  *m = m_lo | (static_cast<uint64_t>(m_hi) << 32);
}

// The 4- or 5-bit values of a Q4_K / Q5_K block in element order (qh null for Q4_K).
static inline void unpack_q45k(const uint8_t* qs, const uint8_t* qh, uint8_t* q) {
  for (int j = 0; j < 8; ++j) {
    const uint8_t* bytes = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      int value = (bytes[l] >> shift) & 0x0f;
      if (qh != nullptr) value |= ((qh[l] >> j) & 1) << 4;
      q[32 * j + l] = static_cast<uint8_t>(value);
    }
  }
}

// The 6-bit values of a Q6_K block in element order, minus 32.
static inline void unpack_q6k(const BlockQ6_K& x, int8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = x.ql + 64 * h;
    const uint8_t* qh = x.qh + 32 * h;
    int8_t* y = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      y[l] = static_cast<int8_t>(((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32);
      y[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
      y[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      y[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

// The 5-bit values of a Q5_0 / Q5_1 block in element order (qh_bytes little-endian).
static inline void unpack_q5(const uint8_t* qs, const uint8_t* qh_bytes, int* q) {
  uint32_t qh;
  __builtin_memcpy(&qh, qh_bytes, sizeof qh);
  for (int j = 0; j < 16; ++j) {
    q[j] = (qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1u) << 4);
    q[j + 16] = (qs[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1u) << 4);
  }
}

}  // namespace folio::quant
