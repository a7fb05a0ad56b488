#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_attention.h"
#include "backend/cpu/elementwise_avx512.h"
#include "backend/cpu/quant/panel_gemm.h"
#include "core/fp16_rows.h"
#include "kv/kv_quant.h"
#include "model/rope.h"

namespace folio::cpu {

namespace {

// Element-wise work smaller than this stays on the calling thread (a decode token's rows).
constexpr int64_t kElementwiseParallelMin = 32768;

}  // namespace

CpuBackend::CpuBackend(int num_threads, Isa isa, ActivationPrecision precision)
    : pool_(num_threads), isa_(isa), precision_(precision) {}

void CpuBackend::embed(const WeightTensor& table, std::span<const int32_t> tokens, float* out) {
  const QuantKernels* kernels = quant_kernels(table.type, isa_);
  assert(kernels != nullptr);
  for (size_t t = 0; t < tokens.size(); ++t) {
    assert(tokens[t] >= 0 && tokens[t] < table.rows);
    kernels->dequantize_row(table.row(tokens[t]), out + t * table.cols, table.cols);
  }
}

void CpuBackend::rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps) {
  const auto run = [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* row = x + r * dim;
      // In double (a 4k-wide sum of squares in float loses digits), as eight partial sums side by
      // side: one chain waited on each add's latency (3% of prompt processing). They are added
      // in a fixed order, so a row has the same bits in every batch.
      double part[8] = {};
      int64_t i = 0;
      for (; i + 8 <= dim; i += 8) {
        for (int j = 0; j < 8; ++j) part[j] += static_cast<double>(row[i + j]) * row[i + j];
      }
      double sum_squares = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
      for (; i < dim; ++i) sum_squares += static_cast<double>(row[i]) * row[i];
      const float inv_rms = static_cast<float>(1.0 / std::sqrt(sum_squares / dim + eps));
      float* out_row = out + r * dim;
      for (int64_t c = 0; c < dim; ++c) out_row[c] = row[c] * inv_rms * weight[c];
    }
  };
  if (rows * dim >= kElementwiseParallelMin) {
    pool_.parallel_for(rows, run);
  } else {
    run(0, 0, rows);
  }
}

bool CpuBackend::on_panels(const WeightTensor& w) const {
  return isa_ >= Isa::kAvx2 && panel_gemm_supports(w.type, w.rows, w.cols) &&
         (w.packed != nullptr || !panel_needs_packing(w.type));
}

void CpuBackend::matmul(const WeightTensor& w, const float* x, float* y, int64_t n) {
  const WeightTensor* ws[1] = {&w};
  float* ys[1] = {y};
  matmul_shared_input(ws, x, ys, n);
}

void CpuBackend::matmul_shared_input(std::span<const WeightTensor* const> ws, const float* x,
                                     std::span<float* const> ys, int64_t n) {
  if (n <= 0 || ws.empty()) return;
  const WeightTensor& first = *ws[0];
  bool together = true;  // one conversion and one loop need one type, width and input order
  // ... or, on the panels, one activation format: a Q4_K_M file's Q5_0 Q and K beside a Q8_0 V,
  // or Q6_K beside Q4_K (matmul_panels makes each type its activation terms).
  bool panels = precision_ == ActivationPrecision::kQuantized;
  const auto activation_format = [&](DType type) {
    const QuantKernels* partner = quant_kernels(panel_activation_partner(type), isa_);
    return partner != nullptr ? partner->activation_type : DType::F32;
  };
  for (const WeightTensor* w : ws) {
    const bool shape = w->cols == first.cols && w->input_order == first.input_order;
    together = together && shape && w->type == first.type;
    panels = panels && shape && w->packed != nullptr && on_panels(*w) &&
             activation_format(w->type) == activation_format(first.type);
  }
  if (!together && !panels) {
    for (size_t i = 0; i < ws.size(); ++i) matmul(*ws[i], x, ys[i], n);
    return;
  }
  matmul_in_stored_order(ws, first.input_order ? inputs_in_order(first, x, n) : x, ys, n);
}

const float* CpuBackend::inputs_in_order(const WeightTensor& w, const float* x, int64_t n) {
  ordered_inputs_.resize(static_cast<size_t>(n * w.cols));
  float* out = ordered_inputs_.data();
  const auto run = [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x + r * w.cols;
      float* row = out + r * w.cols;
      for (int64_t c = 0; c < w.cols; ++c) row[c] = in[w.input_order[c]];
    }
  };
  if (n * w.cols >= kElementwiseParallelMin) {
    pool_.parallel_for(n, run);
  } else {
    run(0, 0, n);
  }
  return out;
}

void CpuBackend::matmul_in_stored_order(std::span<const WeightTensor* const> ws, const float* x,
                                        std::span<float* const> ys, int64_t n) {
  const WeightTensor& first = *ws[0];
  const QuantKernels* kernels = quant_kernels(first.type, isa_);
  assert(kernels != nullptr);
  if (precision_ == ActivationPrecision::kFloat32 && kernels->activation_type != DType::F32) {
    for (size_t i = 0; i < ws.size(); ++i) matmul_float_activations(*ws[i], x, ys[i], n);
    return;
  }
  const int64_t cols = first.cols;
  // The panels on AMX (tiles + VNNI), on AVX-512 (VNNI rows: one pass over a packed panel for
  // every row, and decode streaming the panels, with prefetch, at the stored size) and on AVX2
  // (four rows at a time per loaded block). They read their own activation format.
  bool panels = true;
  for (const WeightTensor* w : ws) {
    panels = panels && on_panels(*w);
  }
  if (panels) {
    const QuantKernels* partner = quant_kernels(panel_activation_partner(first.type), isa_);
    const uint8_t* acts = convert_activations(*partner, x, n, cols);
    return matmul_panels(ws, acts, row_bytes(partner->activation_type, cols), ys, n);
  }
  const size_t act_row_bytes = row_bytes(kernels->activation_type, cols);
  const uint8_t* acts = convert_activations(*kernels, x, n, cols);

  // Each thread takes a run of the matrices' rows (one after another, as one matrix).
  // Activations go by in panels of kPanelRows rows small enough to stay in L1 while the thread's
  // weight rows (in L2) stream past them, and each kernel call takes 8 activation rows so a
  // weight block is unpacked once for all 8.
  constexpr int kActRowsPerCall = 8;
  constexpr int64_t kPanelRows = 32;
  const int64_t grain = 16;
  int64_t total = 0;
  for (const WeightTensor* w : ws) total += w->rows;
  pool_.parallel_for(
      total,
      [&](int, int64_t begin, int64_t end) {
        float partial[kActRowsPerCall];
        int64_t offset = 0;  // rows of the matrices before ws[i]
        for (size_t i = 0; i < ws.size(); offset += ws[i]->rows, ++i) {
          const WeightTensor& w = *ws[i];
          const int64_t lo = std::max(begin, offset) - offset, hi = std::min(end, offset + w.rows) - offset;
          for (int64_t panel = 0; panel < n && lo < hi; panel += kPanelRows) {
            const int64_t panel_end = std::min(n, panel + kPanelRows);
            for (int64_t r = lo; r < hi; ++r) {
              const void* weight_row = w.row(r);
              for (int64_t j = panel; j < panel_end; j += kActRowsPerCall) {
                const int count = static_cast<int>(std::min<int64_t>(kActRowsPerCall, panel_end - j));
                kernels->dot_rows(cols, weight_row, acts + j * act_row_bytes, act_row_bytes, count, partial);
                for (int c = 0; c < count; ++c) ys[i][(j + c) * w.rows + r] = partial[c];
              }
            }
          }
        }
      },
      grain);
}

const uint8_t* CpuBackend::convert_activations(const QuantKernels& kernels, const float* x, int64_t n, int64_t cols) {
  const size_t act_row_bytes = row_bytes(kernels.activation_type, cols);
  converted_activations_.resize(static_cast<size_t>(n) * act_row_bytes);
  uint8_t* acts = converted_activations_.data();
  pool_.parallel_for(n, [&](int, int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) kernels.convert_activation_row(x + r * cols, acts + r * act_row_bytes, cols);
  });
  return acts;
}

void CpuBackend::matmul_swiglu(const WeightTensor& gate, const WeightTensor& up, const float* x, float* out,
                               float* up_scratch, int64_t n) {
  const bool fused = isa_ >= Isa::kAvx512 && precision_ == ActivationPrecision::kQuantized && n > 0 &&
                     gate.packed != nullptr && up.packed != nullptr && gate.type == up.type && gate.rows == up.rows &&
                     gate.cols == up.cols && gate.input_order == up.input_order &&
                     panel_gemm_supports(gate.type, gate.rows, gate.cols);
  if (!fused) return Backend::matmul_swiglu(gate, up, x, out, up_scratch, n);
  if (gate.input_order != nullptr) x = inputs_in_order(gate, x, n);
  const QuantKernels* kernels = quant_kernels(panel_activation_partner(gate.type), isa_);
  const size_t act_row_bytes = row_bytes(kernels->activation_type, gate.cols);
  const uint8_t* acts = convert_activations(*kernels, x, n, gate.cols);
  prepare_activation_terms(gate, acts, act_row_bytes, n);
  // Gate panel p and up panel p together; chunks as in matmul_panels.
  pool_.parallel_for_dynamic(
      gate.rows / 16,
      [&](int, int64_t begin, int64_t end) {
        amx_panel_gemm_swiglu(gate.type, gate.cols, static_cast<const uint8_t*>(gate.packed),
                              static_cast<const uint8_t*>(up.packed), acts, act_row_bytes, activation_terms_.data(), n,
                              begin, end, out, gate.rows, isa_ == Isa::kAmx);
      },
      2);
}

void CpuBackend::prepare_activation_terms(const WeightTensor& w, const uint8_t* acts, size_t act_row_bytes, int64_t n) {
  activation_terms_.resize(panel_terms_floats(w.type, n, w.cols));
  panel_activation_terms(w.type, acts, act_row_bytes, n, w.cols, activation_terms_.data());
}

// AMX, AVX-512 and AVX2: the weights go by in panels of 16 rows, repacked at load (w.packed) or packed
// as each is reached, and met by every activation row (panel_gemm.h: tiles where there is AMX,
// VNNI rows on AVX-512, four rows a block on AVX2); the threads take the matrices' panels as
// one run.
void CpuBackend::matmul_panels(std::span<const WeightTensor* const> ws, const uint8_t* acts, size_t act_row_bytes,
                               std::span<float* const> ys, int64_t n) {
  constexpr int64_t kPanelRows = 16;
  prepare_activation_terms(*ws[0], acts, act_row_bytes, n);
  // Each matrix's terms: the first's, or those of another type where they differ (a Q4_K_M
  // layer's Q6_K V, whose blocks are 16 inputs, beside Q4_K Q and K).
  std::vector<const float*> terms(ws.size(), activation_terms_.data());
  std::vector<DType> other_types;
  for (size_t i = 1; i < ws.size(); ++i) {
    if (panel_same_terms(ws[i]->type, ws[0]->type)) continue;
    size_t k = 0;
    while (k < other_types.size() && !panel_same_terms(ws[i]->type, other_types[k])) ++k;
    if (k == other_types.size()) {
      other_types.push_back(ws[i]->type);
      if (more_terms_.size() < other_types.size()) more_terms_.resize(other_types.size());
      more_terms_[k].resize(panel_terms_floats(ws[i]->type, n, ws[i]->cols));
      panel_activation_terms(ws[i]->type, acts, act_row_bytes, n, ws[i]->cols, more_terms_[k].data());
    }
    terms[i] = more_terms_[k].data();
  }
  int64_t total = 0;
  for (const WeightTensor* w : ws) total += w->rows / kPanelRows;
  // Chunks of 4 panels (2 x 2 tile groups stay whole), taken as the threads get to them: in
  // decode the two cores stream weights at unequal rates, and fixed halves left one waiting
  // ~15% of a token.
  pool_.parallel_for_dynamic(
      total,
      [&](int, int64_t begin, int64_t end) {
        int64_t offset = 0;  // panels of the matrices before ws[i]
        for (size_t i = 0; i < ws.size(); offset += ws[i]->rows / kPanelRows, ++i) {
          const WeightTensor& w = *ws[i];
          const int64_t lo = std::max(begin, offset) - offset,
                        hi = std::min(end, offset + w.rows / kPanelRows) - offset;
          if (lo >= hi) continue;
          const auto* data = static_cast<const uint8_t*>(w.data);
          const auto* packed = static_cast<const uint8_t*>(w.packed);
          if (isa_ >= Isa::kAvx512) {
            amx_panel_gemm(w.type, w.cols, data, packed, acts, act_row_bytes, terms[i], n, lo, hi, ys[i], w.rows,
                           isa_ == Isa::kAmx);
          } else {
            avx2_panel_gemm(w.type, w.cols, data, packed, acts, act_row_bytes, terms[i], n, lo, hi, ys[i], w.rows);
          }
        }
      },
      4);
}

AlignedBytes CpuBackend::pack_for_matmul(const WeightTensor& w, const PackedRows& packed_rows) {
  if (isa_ < Isa::kAvx2 || !panel_gemm_supports(w.type, w.rows, w.cols)) return {};
  AlignedBytes packed(panel_packed_bytes(w.type, w.rows, w.cols));
  const auto* weights = static_cast<const uint8_t*>(w.data);
  const bool avx512 = isa_ >= Isa::kAvx512;
  // In chunks of panels, each reported when done: the caller may let go of those stored rows
  // before the next chunk is read, so a large matrix is never resident twice.
  constexpr int64_t kChunkPanels = 256;
  const int64_t panels = w.rows / 16;
  for (int64_t chunk = 0; chunk < panels; chunk += kChunkPanels) {
    const int64_t chunk_end = std::min(panels, chunk + kChunkPanels);
    pool_.parallel_for(
        chunk_end - chunk,
        [&](int, int64_t begin, int64_t end) {
          if (avx512) {
            amx_pack_panels(w.type, w.cols, weights, chunk + begin, chunk + end, packed.data());
          } else {
            avx2_pack_panels(w.type, w.cols, weights, chunk + begin, chunk + end, packed.data());
          }
        },
        4);
    if (packed_rows) packed_rows(chunk * 16, chunk_end * 16);
  }
  return packed;
}

void CpuBackend::matmul_float_activations(const WeightTensor& w, const float* x, float* y, int64_t n) {
  const QuantKernels* kernels = quant_kernels(w.type, isa_);
  const QuantKernels* float_kernels = quant_kernels(DType::F32, isa_);
  const size_t x_row_bytes = static_cast<size_t>(w.cols) * sizeof(float);
  constexpr int kActRowsPerCall = 8;
  pool_.parallel_for(
      w.rows,
      [&](int, int64_t begin, int64_t end) {
        std::vector<float> weight_row(w.cols);
        float partial[kActRowsPerCall];
        for (int64_t r = begin; r < end; ++r) {
          kernels->dequantize_row(w.row(r), weight_row.data(), w.cols);
          for (int64_t j = 0; j < n; j += kActRowsPerCall) {
            const int count = static_cast<int>(std::min<int64_t>(kActRowsPerCall, n - j));
            float_kernels->dot_rows(w.cols, weight_row.data(), x + j * w.cols, x_row_bytes, count, partial);
            for (int c = 0; c < count; ++c) y[(j + c) * w.rows + r] = partial[c];
          }
        }
      },
      16);
}

void CpuBackend::add_bias(float* x, const float* bias, int64_t rows, int64_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dim; ++i) x[r * dim + i] += bias[i];
  }
}

void CpuBackend::rope(float* x, std::span<const int32_t> positions, int32_t num_heads, int32_t head_dim,
                      const RopeParams& params) {
  const int32_t half = params.rotary_dim / 2;
  // Per-pair inverse frequencies, computed once per call: base^(-2i/d) / factor_i.
  const std::vector<float> inv_freq =
      rope_inverse_frequencies(params.rotary_dim, params.freq_base, params.freq_factors);
  std::vector<float> cos_table(half), sin_table(half);
  for (size_t t = 0; t < positions.size(); ++t) {
    const float position = static_cast<float>(positions[t]) * params.position_scale;
    for (int32_t i = 0; i < half; ++i) {
      const float theta = position * inv_freq[i];
      cos_table[i] = std::cos(theta);
      sin_table[i] = std::sin(theta);
    }
    for (int32_t h = 0; h < num_heads; ++h) {
      float* head = x + (t * num_heads + h) * head_dim;
      for (int32_t i = 0; i < half; ++i) {
        const int32_t a = params.style == RopeStyle::kAdjacentPairs ? 2 * i : i;
        const int32_t b = params.style == RopeStyle::kAdjacentPairs ? 2 * i + 1 : i + half;
        const float x0 = head[a];
        const float x1 = head[b];
        head[a] = x0 * cos_table[i] - x1 * sin_table[i];
        head[b] = x0 * sin_table[i] + x1 * cos_table[i];
      }
    }
  }
}

void CpuBackend::write_kv(const KvLayerView& cache, const float* k, const float* v,
                          std::span<const int32_t> slot_mapping) {
  const size_t token_elems = static_cast<size_t>(cache.num_kv_heads) * cache.head_dim;
  if (kv_format_has_residual(cache.format)) {  // new tokens wait in fp16 in their staging blocks
    for (size_t t = 0; t < slot_mapping.size(); ++t) {
      const int32_t slot = slot_mapping[t];
      assert(slot >= 0 && slot < cache.num_staging * cache.block_size);
      fp32_to_fp16_row(k + t * token_elems, cache.staging_k + slot * token_elems, static_cast<int64_t>(token_elems));
      fp32_to_fp16_row(v + t * token_elems, cache.staging_v + slot * token_elems, static_cast<int64_t>(token_elems));
    }
    return;
  }
  for (size_t t = 0; t < slot_mapping.size(); ++t) {
    const int32_t slot = slot_mapping[t];
    assert(slot >= 0 && slot < cache.num_blocks * cache.block_size);
    if (cache.format == KvFormat::kFp16) {  // all heads of a token are contiguous: one row
      fp32_to_fp16_row(k + t * token_elems, cache.fp16_keys() + slot * token_elems, static_cast<int64_t>(token_elems));
      fp32_to_fp16_row(v + t * token_elems, cache.fp16_values() + slot * token_elems,
                       static_cast<int64_t>(token_elems));
      continue;
    }
    for (int32_t h = 0; h < cache.num_kv_heads; ++h) {
      kv_store_row(cache, 0, slot, h, k + t * token_elems + static_cast<size_t>(h) * cache.head_dim);
      kv_store_row(cache, 1, slot, h, v + t * token_elems + static_cast<size_t>(h) * cache.head_dim);
    }
  }
}

void CpuBackend::seal_kv(const KvLayerView& cache, std::span<const KvSeal> seals) {
  if (seals.empty()) return;
  pool_.parallel_for(static_cast<int64_t>(seals.size()), [&](int, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) kv_seal_block(cache, seals[i].block, seals[i].staging);
  });
}

void CpuBackend::attention(const AttentionBatch& batch, const KvLayerView& cache) {
  paged_attention(batch, cache, pool_);
}

void CpuBackend::swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const bool avx512 = isa_ >= Isa::kAvx512;
  const auto run = [&](int, int64_t begin, int64_t end) {
    if (avx512) return swiglu_avx512(gate + begin, up + begin, out + begin, end - begin);
    for (int64_t i = begin; i < end; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  };
  // A prompt's worth across the threads (each element alone, so the split changes no bits); a
  // decode token's on this thread, where a hand-off would cost more than the work.
  if (n >= kElementwiseParallelMin) {
    pool_.parallel_for(n, run, 4096);
  } else {
    run(0, 0, n);
  }
}

void CpuBackend::geglu_tanh(const float* gate, const float* up, float* out, int64_t n) {
  const bool avx512 = isa_ >= Isa::kAvx512;
  const auto run = [&](int, int64_t begin, int64_t end) {
    if (avx512) return geglu_tanh_avx512(gate + begin, up + begin, out + begin, end - begin);
    // The AVX-512 path's form, 0.5 g (1 + tanh(z)) = g / (1 + exp(-2z)): no cancellation in
    // 1 + tanh(z) for negative gates, and one formula on every ISA.
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    for (int64_t i = begin; i < end; ++i) {
      const float g = gate[i];
      out[i] = g / (1.0f + std::exp(-2.0f * kSqrt2OverPi * (g + 0.044715f * g * g * g))) * up[i];
    }
  };
  // As swiglu: a prompt's worth across the threads, a decode token's on this thread.
  if (n >= kElementwiseParallelMin) {
    pool_.parallel_for(n, run, 4096);
  } else {
    run(0, 0, n);
  }
}

void CpuBackend::scale(float* x, float factor, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

void CpuBackend::add(float* x, const float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += y[i];
}

}  // namespace folio::cpu
