// The row ops Gemma 3 adds to the Llama recipe: the tanh-GELU gated MLP, the per-head RMS norm
// of q and k before RoPE (QK norm), and the RMS norm of the attention's and the MLP's outputs
// before they join the residual stream (post norms). Memory-bound single passes like
// elementwise.cu's; the same formulas as the CPU backend's (tanhf, rsqrt of the mean square).
#include <algorithm>
#include <cassert>
#include <cmath>

#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda {
namespace {

using namespace detail;

__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

__global__ void geglu_tanh_kernel(const float* gate_up, int64_t n, int64_t ffn, uint16_t* out,
                                  const int32_t* out_position) {
  const int64_t vecs_per_row = ffn / 4;
  const int64_t total = n * vecs_per_row;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / vecs_per_row;
    const int64_t c = i % vecs_per_row;
    const float4 g = reinterpret_cast<const float4*>(gate_up + r * 2 * ffn)[c];
    const float4 u = reinterpret_cast<const float4*>(gate_up + r * 2 * ffn + ffn)[c];
    const float y0 = gelu_tanh(g.x) * u.x, y1 = gelu_tanh(g.y) * u.y;
    const float y2 = gelu_tanh(g.z) * u.z, y3 = gelu_tanh(g.w) * u.w;
    store_bf16x4(out + r * ffn, c, y0, y1, y2, y3, out_position);
  }
}

constexpr int kHeadWarpsPerBlock = 4;
constexpr int kMaxHeadDim = 256;

// One warp per (token, q or k head): each lane holds head_dim / 32 values between the sum of
// squares and the scaling.
__global__ void rms_norm_heads_kernel(float* qkv, const float* q_weight, const float* k_weight, int64_t n,
                                      int32_t num_heads, int32_t num_kv_heads, int32_t head_dim, float eps) {
  const int64_t unit = static_cast<int64_t>(blockIdx.x) * kHeadWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int32_t heads = num_heads + num_kv_heads;  // q heads, then k heads: contiguous in a row
  if (unit >= n * heads) return;
  const int64_t token = unit / heads;
  const int32_t head = static_cast<int32_t>(unit % heads);
  const int64_t row_width = static_cast<int64_t>(num_heads + 2 * num_kv_heads) * head_dim;
  float* x = qkv + token * row_width + static_cast<int64_t>(head) * head_dim;
  const float* weight = head < num_heads ? q_weight : k_weight;
  float values[kMaxHeadDim / 32];
  float sum_squares = 0.0f;
  const int per_lane = head_dim / 32;
#pragma unroll
  for (int i = 0; i < kMaxHeadDim / 32; ++i) {
    if (i < per_lane) {
      values[i] = x[lane + 32 * i];
      sum_squares += values[i] * values[i];
    }
  }
  const float inv_rms = rsqrtf(warp_sum(sum_squares) / static_cast<float>(head_dim) + eps);
#pragma unroll
  for (int i = 0; i < kMaxHeadDim / 32; ++i) {
    if (i < per_lane) x[lane + 32 * i] = values[i] * inv_rms * weight[lane + 32 * i];
  }
}

// One CTA per row: the sum of squares of proj, then residual += proj / rms * weight.
__global__ void rms_norm_into_residual_kernel(float* residual, const float* proj, const float* weight, int64_t dim,
                                              float eps) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const float4* y = reinterpret_cast<const float4*>(proj + row * dim);
  float4* x = reinterpret_cast<float4*>(residual + row * dim);
  const float4* w = reinterpret_cast<const float4*>(weight);
  const int64_t vecs = dim / 4;
  float sum_squares = 0.0f;
  for (int64_t i = threadIdx.x; i < vecs; i += blockDim.x) {
    const float4 v = y[i];
    sum_squares += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  sum_squares = block_sum(sum_squares, scratch);
  const float inv_rms = rsqrtf(sum_squares / static_cast<float>(dim) + eps);
  for (int64_t i = threadIdx.x; i < vecs; i += blockDim.x) {
    const float4 v = y[i];
    const float4 g = w[i];
    float4 r = x[i];
    r.x += v.x * inv_rms * g.x;
    r.y += v.y * inv_rms * g.y;
    r.z += v.z * inv_rms * g.z;
    r.w += v.w * inv_rms * g.w;
    x[i] = r;
  }
}

}  // namespace

void geglu_tanh(const float* gate_up, int64_t n, int64_t ffn, uint16_t* out, Stream stream,
                const int32_t* out_position) {
  assert(ffn % 4 == 0);
  const int64_t total = n * (ffn / 4);
  if (total == 0) return;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 132 * 16);
  geglu_tanh_kernel<<<static_cast<unsigned>(blocks), threads, 0, stream>>>(gate_up, n, ffn, out, out_position);
}

void rms_norm_heads(float* qkv, const float* q_weight, const float* k_weight, int64_t n, int32_t num_heads,
                    int32_t num_kv_heads, int32_t head_dim, float eps, Stream stream) {
  assert(head_dim % 32 == 0 && head_dim <= kMaxHeadDim);
  const int64_t warps = n * (num_heads + num_kv_heads);
  if (warps == 0) return;
  const int64_t blocks = (warps + kHeadWarpsPerBlock - 1) / kHeadWarpsPerBlock;
  rms_norm_heads_kernel<<<static_cast<unsigned>(blocks), 32 * kHeadWarpsPerBlock, 0, stream>>>(
      qkv, q_weight, k_weight, n, num_heads, num_kv_heads, head_dim, eps);
}

void rms_norm_into_residual(float* residual, const float* proj, const float* weight, int64_t n, int64_t dim, float eps,
                            Stream stream) {
  assert(dim % 4 == 0);
  if (n == 0) return;
  rms_norm_into_residual_kernel<<<static_cast<unsigned>(n), 256, 0, stream>>>(residual, proj, weight, dim, eps);
}

}  // namespace folio::cuda
