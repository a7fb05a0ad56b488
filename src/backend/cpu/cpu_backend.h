// The CPU backend: the reference implementation of every Backend op, multi-threaded through
// a ThreadPool, with quantized matmuls on the SIMD kernels in quant/.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "backend/cpu/quant/quant_kernels.h"
#include "core/aligned_bytes.h"
#include "core/thread_pool.h"

namespace folio::cpu {

// How matmuls treat activations. kQuantized converts them to each weight type's 8-bit partner
// format (fast, and what llama.cpp does); kFloat32 keeps them in float32 and dequantizes each
// weight row on the fly (slower, and the numerics a float reference can be compared with).
enum class ActivationPrecision { kQuantized, kFloat32 };

class CpuBackend final : public Backend {
 public:
  // num_threads <= 0: all hardware threads. isa: the kernel path (default: the best one).
  explicit CpuBackend(int num_threads = 0, Isa isa = detect_isa(),
                      ActivationPrecision precision = ActivationPrecision::kQuantized);

  std::string_view name() const override { return "cpu"; }
  // This backend's repacked copy of a matrix (WeightTensor::packed), or empty where it computes
  // from the stored blocks: the panels (quant/panel_gemm.h: panel_gemm_supports' types).
  // packed_rows(begin, end) hears of each run of rows packed, in order, as it is done.
  using PackedRows = std::function<void(int64_t row_begin, int64_t row_end)>;
  AlignedBytes pack_for_matmul(const WeightTensor& w, const PackedRows& packed_rows = {});
  int num_threads() const { return pool_.num_threads(); }
  Isa isa() const { return isa_; }

  void embed(const WeightTensor& table, std::span<const int32_t> tokens, float* out) override;
  void rms_norm(const float* x, const float* weight, float* out, int64_t rows, int64_t dim, float eps) override;
  void matmul(const WeightTensor& w, const float* x, float* y, int64_t n) override;
  void matmul_shared_input(std::span<const WeightTensor* const> ws, const float* x, std::span<float* const> ys,
                           int64_t n) override;
  void add_bias(float* x, const float* bias, int64_t rows, int64_t dim) override;
  void rope(float* x, std::span<const int32_t> positions, int32_t num_heads, int32_t head_dim,
            const RopeParams& params) override;
  void write_kv(const KvLayerView& cache, const float* k, const float* v,
                std::span<const int32_t> slot_mapping) override;
  void seal_kv(const KvLayerView& cache, std::span<const KvSeal> seals) override;
  void attention(const AttentionBatch& batch, const KvLayerView& cache) override;
  void swiglu(const float* gate, const float* up, float* out, int64_t n) override;
  // Fused on AMX and AVX-512 where both matrices are packed panels (quant/panel_gemm.h), else
  // Backend's.
  void matmul_swiglu(const WeightTensor& gate, const WeightTensor& up, const float* x, float* out, float* up_scratch,
                     int64_t n) override;
  void geglu_tanh(const float* gate, const float* up, float* out, int64_t n) override;
  void scale(float* x, float factor, int64_t n) override;
  void add(float* x, const float* y, int64_t n) override;

 private:
  // matmul_shared_input over matrices of one type, width and input order, x already in that order.
  void matmul_in_stored_order(std::span<const WeightTensor* const> ws, const float* x, std::span<float* const> ys,
                              int64_t n);
  // x's n rows gathered into w's input order (WeightTensor::input_order), in ordered_inputs_.
  const float* inputs_in_order(const WeightTensor& w, const float* x, int64_t n);
  void matmul_float_activations(const WeightTensor& w, const float* x, float* y, int64_t n);
  // x converted into converted_activations_ for the kernels' activation format.
  const uint8_t* convert_activations(const QuantKernels& kernels, const float* x, int64_t n, int64_t cols);
  // activation_terms_ for panels of w's type and width (panel_activation_terms).
  // Whether a matrix runs on the panels on this CPU (packed beforehand where its type needs it).
  bool on_panels(const WeightTensor& w) const;
  void prepare_activation_terms(const WeightTensor& w, const uint8_t* acts, size_t act_row_bytes, int64_t n);
  void matmul_panels(std::span<const WeightTensor* const> ws, const uint8_t* acts, size_t act_row_bytes,
                     std::span<float* const> ys, int64_t n);

  ThreadPool pool_;
  Isa isa_;
  ActivationPrecision precision_;
  std::vector<float> ordered_inputs_;           // (n, cols): inputs_in_order
  std::vector<uint8_t> converted_activations_;  // (n, row_bytes(activation_type, cols))
  std::vector<float> activation_terms_;         // panels: panel_activation_terms
  std::vector<std::vector<float>> more_terms_;  // of a call's matrices whose terms differ from the first's
};

}  // namespace folio::cpu
