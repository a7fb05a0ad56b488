// Quantized matmuls by panels of weight rows, for prompt processing and decode alike: each
// thread takes 16 weight rows at a time (a panel), unpacks their blocks once into the layout
// the dot-product instructions read (codes as unsigned bytes, 4 consecutive inputs of each row
// side by side: AMX's and VNNI's "B" layout, with each row's block scales as floats beside
// them), then runs every activation row past the panel: 16 rows at a time on AMX tiles, the
// rest on AVX-512 VNNI; on AVX2 CPUs four rows at a time. Each gives each block's exact integer
// dot product, and each folds it into a row's float sums by the same operations in the same
// order, so a row's result does not depend on which path computed it, nor on the batch it came
// in (batch invariance). The layout they share is in panel_layout.h.
//
// Weight types: Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 whose row count is a multiple of 16, and Q4_K /
// Q5_K / Q6_K whose column count is also a multiple of 256; activations in Q8_0 or Q8_1
// (panel_activation_partner). A block's (or K sub-block's) contribution to output (m, r):
//   Q4_0 / Q5_0 / Q8_0: d_w d_a (dot(c, a) - o sum(a)), c = q + o the unsigned code (o = 8, 16, 128)
//   Q4_1 / Q5_1:        d_w d_a dot(q, a) + m_w s_a        (s_a: Q8_1's fp16 d_a sum(a))
//   Q4_K / Q5_K:        (d sc) d_a dot(q, a) - (dmin m) d_a sum(a)
//   Q6_K (16 inputs):   (d sc) d_a dot(u, a) - (32 d sc) d_a sum(a), u = q + 32
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace folio::cpu {

// Whether the panel paths compute matmuls with weights of this type and shape.
bool panel_gemm_supports(DType weight_type, int64_t rows, int64_t cols);
// The weight type whose activation format (Q8_0 or Q8_1) the panels read: the type itself, or
// Q4_0 for the K-quants (Q8_0 activations in place of their dot kernels' Q8_K).
DType panel_activation_partner(DType weight_type);
// Whether a panel matmul of this type needs the matrix packed beforehand (the K-quants: their
// packing is plain C++, too slow to repeat per call).
bool panel_needs_packing(DType weight_type);

// What each activation block contributes besides its codes, once per matmul: row m's block b
// scale d_a as a float, then o * sum(q_a) (Q4_0, Q5_0, Q8_0), s_a (Q4_1, Q5_1) or d_a * sum(q_a)
// (Q4_K, Q5_K; Q6_K over its block's 16 inputs), laid out by tiles of 16
// rows (a tile's terms for one block side by side). acts as in amx_panel_gemm; terms holds
// panel_terms_floats(n, cols).
void panel_activation_terms(DType weight_type, const uint8_t* acts, size_t act_row_bytes, int64_t n, int64_t cols,
                            float* terms);
size_t panel_terms_floats(DType weight_type, int64_t n, int64_t cols);
// Whether matrices of these types read the same activation terms (one matmul call's matrices
// of another type, such as a Q4_K_M layer's Q6_K V beside Q4_K Q and K, need their own).
bool panel_same_terms(DType a, DType b);

// Bytes of a matrix's panels, unpacked once for good (amx_pack_panels).
size_t panel_packed_bytes(DType weight_type, int64_t rows, int64_t cols);

// The rest of the amx_ functions run AVX-512 VNNI code, and AMX tiles where use_tiles is set:
// call them only when detect_isa() is Isa::kAvx512 or Isa::kAmx, with use_tiles only for kAmx.
// (The panels were laid out for AMX's tiles; VNNI rows read them as well.)
// Panels [panel_begin, panel_end) of the matrix at `weights` (rows of row_bytes(type, cols)
// bytes) into `packed`, the whole matrix's panel_packed_bytes.
void amx_pack_panels(DType weight_type, int64_t cols, const uint8_t* weights, int64_t panel_begin, int64_t panel_end,
                     uint8_t* packed);

// y[m * y_stride + r] = dot(weight row r, activation row m) for rows r of panels
// [panel_begin, panel_end) (16 rows each) and every m < n. packed: amx_pack_panels' copy of the
// matrix, or null to unpack each panel from `weights` as it is reached (the same bits); acts: n
// rows of act_row_bytes, converted to the type's activation format; terms:
// panel_activation_terms' of those rows.
void amx_panel_gemm(DType weight_type, int64_t cols, const uint8_t* weights, const uint8_t* packed, const uint8_t* acts,
                    size_t act_row_bytes, const float* terms, int64_t n, int64_t panel_begin, int64_t panel_end,
                    float* y, int64_t y_stride, bool use_tiles);

// out[m * out_stride + r] = silu(dot(gate row r, act m)) * dot(up row r, act m) for the rows r
// of panels [panel_begin, panel_end) of two matrices of one type and shape, both packed
// (amx_pack_panels): the MLP's gate | up and SwiGLU in one pass, the two products never
// written out. Each value has the bits of amx_panel_gemm's products put through swiglu_avx512.
void amx_panel_gemm_swiglu(DType weight_type, int64_t cols, const uint8_t* gate, const uint8_t* up, const uint8_t* acts,
                           size_t act_row_bytes, const float* terms, int64_t n, int64_t panel_begin, int64_t panel_end,
                           float* out, int64_t out_stride, bool use_tiles);

// AVX2 (+ FMA, F16C; panel_gemm_avx2.cpp): the same panels, terms and results, bit for bit,
// with the dot products made from vpmaddubsw / vpmaddwd instead of VNNI. Call only when
// detect_isa() is at least Isa::kAvx2. Packing makes amx_pack_panels' bytes.
void avx2_pack_panels(DType weight_type, int64_t cols, const uint8_t* weights, int64_t panel_begin, int64_t panel_end,
                      uint8_t* packed);
void avx2_panel_gemm(DType weight_type, int64_t cols, const uint8_t* weights, const uint8_t* packed,
                     const uint8_t* acts, size_t act_row_bytes, const float* terms, int64_t n, int64_t panel_begin,
                     int64_t panel_end, float* y, int64_t y_stride);

}  // namespace folio::cpu
