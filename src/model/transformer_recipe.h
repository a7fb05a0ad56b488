// The forward pass of every architecture folio runs, written once over a device's operations.
// The CPU executor (backend/cpu/cpu_forward.h) and the CUDA model (backend/cuda/cuda_forward.h)
// each implement the operations below on their own memory and kernels, fusing neighbours where
// their hardware likes it (the GPU's Q|K|V is one GEMM and its bias rides in the RoPE kernel;
// the CPU's is three matmuls); the order, and what runs in which layer, lives only here.
//
// A Device provides, for the batch it was bound to (x is the residual stream, normed, q/k/v,
// attn, gate/up and act its activation buffers):
//   embed()                          x = embedding[tokens] * arch.embedding_scale
//   norm(NormSite, l)                normed = rms_norm(x) * weight of that site in layer l
//   project_qkv(l)                   q | k | v = normed Wq, Wk, Wv (+ the layer's bias)
//   qk_norm(l)                       every head of q and k: rms_norm(head) * the layer's weight
//   rope_and_store_kv(l, rope)       rotate q and k by position; K, V of every token to its slot
//   attend(l, scale, window)         attn = causal softmax(q K^T * scale) V over the paged cache,
//                                    each query seeing its last `window` keys (0: all)
//   project_output_add(l)            x += attn Wo
//   project_output(l)                proj = attn Wo
//   project_gate_up_activate(l, activation)
//                                    act = silu(normed Wgate) * (normed Wup), or gelu_tanh(..) *
//                                    (..): one step, so a device may fuse the two products and
//                                    the activation
//   project_down_add(l)              x += act Wdown
//   project_down(l)                  proj = act Wdown
//   post_norm_add(NormSite, l)       x += rms_norm(proj) * weight of that site (the outputs')
//   gather_logit_rows(first, count)  final = x[logit_rows[first + i]] for i < count
//   final_norm(count)                final_normed = rms_norm(final) * output_norm
//   project_vocab(count)             logits = final_normed Woutput (the device's logits buffer)
#pragma once

#include <cstdint>

#include "model/architecture.h"

namespace folio {

enum class NormSite { kAttentionInput, kMlpInput, kAttentionOutput, kMlpOutput };

// Layer l over the bound batch: its K/V end up in the cache, x goes from its input to its output.
template <typename Device>
void run_transformer_layer(const Architecture& arch, Device& device, int32_t l) {
  const LayerSpec& layer = arch.layers[static_cast<size_t>(l)];
  device.norm(NormSite::kAttentionInput, l);
  device.project_qkv(l);
  if (arch.qk_norm) device.qk_norm(l);
  device.rope_and_store_kv(l, layer.rope);
  device.attend(l, arch.attention_scale, layer.sliding_window);
  if (arch.post_norms) {
    device.project_output(l);
    device.post_norm_add(NormSite::kAttentionOutput, l);
  } else {
    device.project_output_add(l);
  }
  device.norm(NormSite::kMlpInput, l);
  device.project_gate_up_activate(l, arch.activation);
  if (arch.post_norms) {
    device.project_down(l);
    device.post_norm_add(NormSite::kMlpOutput, l);
  } else {
    device.project_down_add(l);
  }
}

// Every layer over the bound batch: its K/V end up in the cache, its residual stream in x.
template <typename Device>
void run_transformer_layers(const Architecture& arch, Device& device) {
  device.embed();
  for (int32_t l = 0; l < arch.num_layers(); ++l) run_transformer_layer(arch, device, l);
}

// The head over some of the batch's logit rows (devices with a bounded logits buffer take them
// in pieces).
template <typename Device>
void run_transformer_head(Device& device, int32_t first, int32_t count) {
  device.gather_logit_rows(first, count);
  device.final_norm(count);
  device.project_vocab(count);
}

}  // namespace folio
