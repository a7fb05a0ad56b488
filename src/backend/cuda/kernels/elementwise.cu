// The memory-bound row ops of the forward pass: embedding gather, fused residual-add + RMS
// norm, bias + RoPE + fp16 rounding + paged K/V write, and SwiGLU. Each is one pass over its
// data with 16-byte (embed, norm) or 8/16-byte (swiglu) accesses.
#include <algorithm>
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"
#include "backend/cuda/kernels/kv_quant.cuh"
#include "backend/cuda/programmatic_launch.cuh"

namespace folio::cuda {
namespace {

using namespace detail;

// --- embed ----------------------------------------------------------------------------------

__global__ void embed_kernel(const uint16_t* table, int64_t vocab, int64_t hidden, const int32_t* tokens, float* out,
                             float scale, int64_t first) {
  const int64_t t = blockIdx.x;
  const int64_t token = tokens[t] - first;
  const bool valid = token >= 0 && token < vocab;
  const uint4* src = reinterpret_cast<const uint4*>(table + static_cast<int64_t>(valid ? token : 0) * hidden);
  float4* dst = reinterpret_cast<float4*>(out + t * hidden);
  for (int64_t i = threadIdx.x; i < hidden / 8; i += blockDim.x) {
    float4 lo = make_float4(0.f, 0.f, 0.f, 0.f);
    float4 hi = lo;
    if (valid) {
      const uint4 v = src[i];
      lo = make_float4(bf16_bits_to_float(v.x & 0xffff) * scale, bf16_bits_to_float(v.x >> 16) * scale,
                       bf16_bits_to_float(v.y & 0xffff) * scale, bf16_bits_to_float(v.y >> 16) * scale);
      hi = make_float4(bf16_bits_to_float(v.z & 0xffff) * scale, bf16_bits_to_float(v.z >> 16) * scale,
                       bf16_bits_to_float(v.w & 0xffff) * scale, bf16_bits_to_float(v.w >> 16) * scale);
    }
    dst[2 * i] = lo;
    dst[2 * i + 1] = hi;
  }
}

// --- rms norm -------------------------------------------------------------------------------

// Up to kMaxVecs float4 per thread stay in registers between the two halves of the op.
constexpr int kNormMaxVecs = 8;

template <bool kBf16Out>
__global__ void rms_norm_kernel(float* residual, const float* add, const float* weight, void* out, int64_t dim,
                                float eps, const int32_t* out_position) {
  let_next_kernel_start();  // the product after it prefetches its weights meanwhile
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  float4* x = reinterpret_cast<float4*>(residual + row * dim);
  const float4* y = add != nullptr ? reinterpret_cast<const float4*>(add + row * dim) : nullptr;
  const int vecs = static_cast<int>(dim / 4);
  const float4* w = reinterpret_cast<const float4*>(weight);
  float4 values[kNormMaxVecs];
  float4 adds[kNormMaxVecs];
  float4 gains[kNormMaxVecs];
  // Every load before the first store: with the store of the sum in the same loop, the compiler
  // cannot move the next loads above it (x and y may alias), and a decode step's row (one CTA)
  // waited one memory round trip per vector (7.3 us a norm on an H100, 11% of a GPTQ decode
  // step; hoisting them gave 474 -> 450 us a step). The gains too, so that the reduction is
  // not followed by a second trip to memory.
#pragma unroll
  for (int k = 0; k < kNormMaxVecs; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < vecs) {
      values[k] = x[i];
      if (y != nullptr) adds[k] = y[i];
      gains[k] = w[i];
    }
  }
  float sum_squares = 0.0f;
#pragma unroll
  for (int k = 0; k < kNormMaxVecs; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < vecs) {
      float4 v = values[k];
      if (y != nullptr) {
        const float4 a = adds[k];
        v.x += a.x;
        v.y += a.y;
        v.z += a.z;
        v.w += a.w;
        x[i] = v;
        values[k] = v;
      }
      sum_squares += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
    }
  }
  sum_squares = block_sum(sum_squares, scratch);
  const float inv_rms = rsqrtf(sum_squares / static_cast<float>(dim) + eps);
#pragma unroll
  for (int k = 0; k < kNormMaxVecs; ++k) {
    const int i = threadIdx.x + k * blockDim.x;
    if (i < vecs) {
      const float4 v = values[k];
      const float4 g = gains[k];
      const float4 r = make_float4(v.x * inv_rms * g.x, v.y * inv_rms * g.y, v.z * inv_rms * g.z, v.w * inv_rms * g.w);
      if constexpr (kBf16Out) {
        store_bf16x4(static_cast<uint16_t*>(out) + row * dim, i, r.x, r.y, r.z, r.w, out_position);
      } else {
        reinterpret_cast<float4*>(static_cast<float*>(out) + row * dim)[i] = r;
      }
    }
  }
}

template <bool kBf16Out>
void launch_rms_norm(float* residual, const float* add, const float* weight, void* out, int64_t n, int64_t dim,
                     float eps, Stream stream, const int32_t* out_position = nullptr) {
  assert(dim % 4 == 0);
  const int64_t vecs = dim / 4;
  int threads = 128;
  while (threads < 1024 && threads * kNormMaxVecs < vecs) threads *= 2;
  assert(vecs <= static_cast<int64_t>(threads) * kNormMaxVecs);  // dim <= 32768
  if (n == 0) return;
  rms_norm_kernel<kBf16Out>
      <<<static_cast<unsigned>(n), threads, 0, stream>>>(residual, add, weight, out, dim, eps, out_position);
}

// --- rope + kv write --------------------------------------------------------------------------

constexpr int kRopeThreads = 128;
constexpr int kMaxHeadDim = 256;

// One CTA per (token, group of heads_per_cta whole heads). Work unit = one rotated pair (or one
// pass-through element pair) of one head; q heads come first, then k heads (rotated, written to
// the cache), then v heads (copied). Whole heads per CTA, so a quantized row's scale is the
// CTA's own. (One CTA per token took 21 us a layer at batch 1 on an H100, 16% of a GPTQ decode
// step: 48 heads' pairs in 24 dependent round trips per thread.)
__global__ void rope_write_kv_kernel(const float* qkv, const float* bias, const int32_t* positions,
                                     const int32_t* slot_mapping, int32_t num_heads, int32_t heads_per_cta,
                                     DeviceRope rope, uint16_t* q_out, KvLayerView cache) {
  __shared__ float inv_freq[kMaxHeadDim / 2];
  extern __shared__ float kv_rows[];  // quantized formats: (2 * num_kv_heads, head_dim) rotated K, then V
  const bool residual = kv_format_has_residual(cache.format);
  const bool quantized = kv_format_has_scales(cache.format) && !residual;  // fp8's rows wait in staging
  const bool bf16 = cache.format == KvFormat::kBf16;
  const int t = blockIdx.x;
  const int head_dim = cache.head_dim;
  const int half_rot = rope.rotary_dim / 2;
  for (int i = threadIdx.x; i < half_rot; i += blockDim.x) inv_freq[i] = rope.inv_freq[i];
  __syncthreads();

  const int num_kv_heads = cache.num_kv_heads;
  const int row_width = (num_heads + 2 * num_kv_heads) * head_dim;
  const float* row = qkv + static_cast<int64_t>(t) * row_width;
  const float position = static_cast<float>(positions[t]) * rope.position_scale;
  const int slot = slot_mapping[t];
  const int pairs_per_head = head_dim / 2;
  const int first_head = blockIdx.y * heads_per_cta;
  const int end_head = min(first_head + heads_per_cta, num_heads + 2 * num_kv_heads);
  const int end_pair = end_head * pairs_per_head;
  for (int u = first_head * pairs_per_head + threadIdx.x; u < end_pair; u += blockDim.x) {
    const int head = u / pairs_per_head;  // over q, k, v heads
    const int i = u % pairs_per_head;
    int a, b;  // the two elements of the pair within the head
    bool rotate = head < num_heads + num_kv_heads && i < half_rot;
    if (rope.style == RopeStyle::kAdjacentPairs || !rotate) {
      // Pass-through dims and v heads use adjacent pairs too: only coverage matters there.
      if (rope.style == RopeStyle::kHalves && !rotate && head < num_heads + num_kv_heads) {
        // Halves: pairs i < half_rot rotate (i, i + half_rot); the rest cover
        // [rotary_dim, head_dim) two at a time.
        a = rope.rotary_dim + 2 * (i - half_rot);
        b = a + 1;
      } else {
        a = 2 * i;
        b = 2 * i + 1;
      }
    } else {
      a = i;
      b = i + half_rot;
    }
    const int col = head * head_dim;
    float x0 = row[col + a];
    float x1 = row[col + b];
    if (bias != nullptr) {
      x0 += bias[col + a];
      x1 += bias[col + b];
    }
    if (rotate) {
      float sin_theta, cos_theta;
      sincosf(position * inv_freq[i], &sin_theta, &cos_theta);
      const float r0 = x0 * cos_theta - x1 * sin_theta;
      const float r1 = x0 * sin_theta + x1 * cos_theta;
      x0 = r0;
      x1 = r1;
    }
    if (head < num_heads) {
      uint16_t* dst = q_out + (static_cast<int64_t>(t) * num_heads + head) * head_dim;
      dst[a] = float_to_half_bits(x0);
      dst[b] = float_to_half_bits(x1);
    } else if (slot >= 0) {
      const bool is_k = head < num_heads + num_kv_heads;
      const int kv_head = head - num_heads - (is_k ? 0 : num_kv_heads);
      if (quantized) {  // whole rows are needed for their scale: stage them in shared memory
        float* staged = kv_rows + ((is_k ? 0 : num_kv_heads) + kv_head) * head_dim;
        staged[a] = x0;
        staged[b] = x1;
        continue;
      }
      // Residual formats: the row waits in fp16 in its staging block (laid out as an fp16 cache).
      uint16_t* keys = residual ? cache.staging_k : cache.fp16_keys();
      uint16_t* values = residual ? cache.staging_v : cache.fp16_values();
      uint16_t* dst = (is_k ? keys : values) + (static_cast<int64_t>(slot) * num_kv_heads + kv_head) * head_dim;
      dst[a] = bf16 ? float_to_bf16_bits(x0) : float_to_half_bits(x0);
      dst[b] = bf16 ? float_to_bf16_bits(x1) : float_to_half_bits(x1);
    }
  }
  if (!quantized || slot < 0) return;  // both uniform across the CTA: the barrier below is safe
  __syncthreads();
  // One warp per staged row (K rows, then V rows): absmax, scale, then the bytes and the scale
  // at their places in the slot's block (kv_layer_view.h's offsets).
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // This CTA's K and V rows: heads [first_head, end_head) past the q heads.
  const int first_row = max(0, first_head - num_heads);
  const int end_row = max(0, end_head - num_heads);
  for (int r = first_row + warp; r < end_row; r += blockDim.x / 32) {
    const float* staged = kv_rows + r * head_dim;
    const bool is_k = r < num_kv_heads;
    warp_store_row(cache, is_k ? cache.k : cache.v, slot, is_k ? r : r - num_kv_heads, lane,
                   [&](int d) { return staged[d]; });
  }
}

// --- swiglu ---------------------------------------------------------------------------------

__global__ void swiglu_kernel(const float* gate_up, int64_t n, int64_t ffn, uint16_t* out,
                              const int32_t* out_position) {
  let_next_kernel_start();  // the product after it prefetches its weights meanwhile
  const int64_t vecs_per_row = ffn / 4;
  const int64_t total = n * vecs_per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / vecs_per_row;
    const int64_t c = i % vecs_per_row;
    const float4 g = reinterpret_cast<const float4*>(gate_up + r * 2 * ffn)[c];
    const float4 u = reinterpret_cast<const float4*>(gate_up + r * 2 * ffn + ffn)[c];
    // expf, not __expf: the CPU reference uses std::exp.
    const float y0 = g.x / (1.0f + expf(-g.x)) * u.x;
    const float y1 = g.y / (1.0f + expf(-g.y)) * u.y;
    const float y2 = g.z / (1.0f + expf(-g.z)) * u.z;
    const float y3 = g.w / (1.0f + expf(-g.w)) * u.w;
    store_bf16x4(out + r * ffn, c, y0, y1, y2, y3, out_position);
  }
}

}  // namespace

void embed_rows(const uint16_t* table, int64_t vocab, int64_t hidden, const int32_t* tokens, int64_t n, float* out,
                Stream stream, float scale, int64_t first) {
  assert(hidden % 8 == 0);
  if (n == 0) return;
  embed_kernel<<<static_cast<unsigned>(n), 128, 0, stream>>>(table, vocab, hidden, tokens, out, scale, first);
}

void rms_norm(float* residual, const float* add, const float* weight, uint16_t* out, int64_t n, int64_t dim, float eps,
              Stream stream, const int32_t* out_position) {
  launch_rms_norm<true>(residual, add, weight, out, n, dim, eps, stream, out_position);
}

void rms_norm_f32(float* residual, const float* add, const float* weight, float* out, int64_t n, int64_t dim, float eps,
                  Stream stream) {
  launch_rms_norm<false>(residual, add, weight, out, n, dim, eps, stream);
}

void rope_write_kv(const float* qkv, const float* bias, const int32_t* positions, const int32_t* slot_mapping,
                   int32_t n, int32_t num_heads, const DeviceRope& rope, uint16_t* q_out, const KvLayerView& cache,
                   Stream stream) {
  assert(cache.head_dim % 2 == 0 && cache.head_dim <= kMaxHeadDim);
  assert(rope.rotary_dim % 2 == 0 && rope.rotary_dim <= cache.head_dim);
  assert(num_heads % cache.num_kv_heads == 0);
  if (n == 0) return;
  const size_t staged_bytes = kv_format_has_scales(cache.format) && !kv_format_has_residual(cache.format)
                                  ? 2 * sizeof(float) * cache.num_kv_heads * cache.head_dim
                                  : 0;
  assert(staged_bytes <= 48 * 1024);  // 2 x 48 heads of 128: more than any model folio runs
  // Enough heads per CTA for one pair per thread (head_dim 128: 2 heads, 64: 4, 256: 1).
  const int pairs_per_head = cache.head_dim / 2;
  const int heads_per_cta = std::max(1, kRopeThreads / pairs_per_head);
  const int total_heads = num_heads + 2 * cache.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>((total_heads + heads_per_cta - 1) / heads_per_cta));
  rope_write_kv_kernel<<<grid, kRopeThreads, staged_bytes, stream>>>(qkv, bias, positions, slot_mapping, num_heads,
                                                                     heads_per_cta, rope, q_out, cache);
}

void swiglu(const float* gate_up, int64_t n, int64_t ffn, uint16_t* out, Stream stream, const int32_t* out_position) {
  assert(ffn % 4 == 0);
  const int64_t total = n * (ffn / 4);
  if (total == 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 132 * 16);
  swiglu_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(gate_up, n, ffn, out, out_position);
}

}  // namespace folio::cuda
