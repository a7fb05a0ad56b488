// A model's weights on the GPU, in one allocation: every matrix as BF16 (BF16 copied from the
// mapping as it is, F16 too and then converted on the device, F32 and block-quantized GGUF
// types converted on the host in 64 MiB chunks), Q|K|V and gate|up concatenated by rows so that
// each is one GEMM, norms and biases as FP32. Rows stored in Hugging Face's Q / K order
// (WeightTensor::interleave_heads) are put in computing order by the copies themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "core/status.h"
#include "model/model_weights.h"

namespace folio::cuda {

struct DeviceLayer {
  const float* attn_norm = nullptr;   // (hidden,)
  const uint16_t* qkv = nullptr;      // (q_dim + 2 * kv_dim, hidden) bf16: rows of q, k, v
  const float* qkv_bias = nullptr;    // (q_dim + 2 * kv_dim,) or null
  const uint16_t* o = nullptr;        // (hidden, q_dim) bf16
  const float* ffn_norm = nullptr;    // (hidden,)
  const uint16_t* gate_up = nullptr;  // (2 * ffn, hidden) bf16: rows of gate, then up
  const uint16_t* down = nullptr;     // (hidden, ffn) bf16
};

struct DeviceWeights {
  DeviceBuffer arena;
  const uint16_t* embedding = nullptr;       // (vocab, hidden) bf16
  const uint16_t* output = nullptr;          // (vocab, hidden) bf16; == embedding when tied
  const float* output_norm = nullptr;        // (hidden,)
  const float* rope_freq_factors = nullptr;  // (rope_dim / 2,) or null
  std::vector<DeviceLayer> layers;
  uint64_t bytes = 0;
};

// progress(bytes uploaded, bytes total).
Status upload_weights(const ModelWeights& model, DeviceWeights& out,
                      const std::function<void(uint64_t, uint64_t)>& progress = {});

}  // namespace folio::cuda
