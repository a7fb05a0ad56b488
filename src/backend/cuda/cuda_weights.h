// A model's weights on the GPU, in one allocation: every matrix as BF16 (BF16 copied from the
// mapping as it is, F16 too and then converted on the device, F32 and block-quantized GGUF
// types converted on the host in 64 MiB chunks), Q|K|V and gate|up concatenated by rows so that
// each is one GEMM, norms and biases as FP32. With WeightFormat::kFp8E4M3 the layers' four
// matrices are quantized on the device after their BF16 upload (a scale per output row,
// fp8_rows.h); the embedding and the vocabulary projection stay BF16 (as vLLM's FP8 keeps
// them: the LM head is where FP8's error would reach the logits unfiltered). With kInt4
// ("quantized as the file is", --quantization auto), GGUF block types keep their bits on the
// device: 4-bit ones 4 bits (plus a BF16 scale and min per 32), 5- to 8-bit ones 8 bits (plus
// a BF16 scale and min per 16 or 32). Rows stored in Hugging Face's Q / K order
// (WeightTensor::interleave_heads) are put in computing order by the copies themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_matrix.h"
#include "core/status.h"
#include "model/model_weights.h"

namespace folio::cuda {

struct DeviceLayer {
  const float* attn_norm = nullptr;  // (hidden,)
  DeviceMatrix qkv;                  // (q_dim + 2 * kv_dim, hidden): rows of q, k, v
  const float* qkv_bias = nullptr;   // (q_dim + 2 * kv_dim,) or null
  DeviceMatrix o;                    // (hidden, q_dim)
  const float* ffn_norm = nullptr;   // (hidden,)
  DeviceMatrix gate_up;              // (2 * ffn, hidden): rows of gate, then up
  DeviceMatrix down;                 // (hidden, ffn)
  // Gemma 3 (Architecture::qk_norm, post_norms); null otherwise.
  const float* q_norm = nullptr;          // (head_dim,)
  const float* k_norm = nullptr;          // (head_dim,)
  const float* post_attn_norm = nullptr;  // (hidden,)
  const float* post_ffn_norm = nullptr;   // (hidden,)
  // RoPE's inverse frequencies for this layer's RopeSpec (rotary_dim / 2,): one table per
  // distinct spec (Gemma 3's local and global layers differ), made on the host at load.
  const float* rope_inv_freq = nullptr;
};

struct DeviceWeights {
  DeviceBuffer arena;
  const uint16_t* embedding = nullptr;  // (vocab, hidden) bf16
  DeviceMatrix output;                  // (vocab, hidden) bf16; == embedding when tied
  const float* output_norm = nullptr;   // (hidden,)
  std::vector<DeviceLayer> layers;
  WeightFormat layer_format = WeightFormat::kBf16;  // what was asked for the layers' matrices
  int32_t num_matrices = 0;                         // 4 per layer
  int32_t int4_matrices = 0;                        // of those, kept 4-bit (kInt4 asked)
  int32_t int8_matrices = 0;                        // of those, kept 8-bit (kInt4 asked)
  int64_t largest_grouped_elems = 0;                // rows * cols of the largest of those two kinds
  int32_t ordered_matrices = 0;                     // of those, act-order (DeviceMatrix::input_order)
  int64_t widest_ordered = 0;                       // the most columns of those
  uint64_t bytes = 0;
};

// progress(bytes uploaded, bytes total).
// format: what the layers' matrices become on the device; kInt4 means "quantized as the file
// is": a matrix (64-column multiples) whose parts are all Q4_0 / Q4_1 / Q4_K is repacked into
// the INT4 layout (quant/int4_groups.h); one whose parts are all GGUF block types of 4 to 8 bits
// (Q8_0, Q5_0, Q5_1, Q5_K, Q6_K, and 4-bit ones beside them, as a Q4_K_M file's Q|K|V mixes Q4_K
// and Q6_K) into the INT8 layout (quant/int8_groups.h), 16 columns a group where a part is Q6_K;
// any other stays BF16.
Status upload_weights(const ModelWeights& model, DeviceWeights& out, WeightFormat format = WeightFormat::kBf16,
                      const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace folio::cuda
