// Sums of tensor-parallel ranks' buffers on the GPU: the one SameDeviceCollectives
// (same_device_collectives.h) computes, several ranks' buffers on one GPU added element by
// element in rank order so that every rank gets the same bits; and the residual add a rank
// makes once its all-reduced partial sum is complete.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace folio::cuda {

constexpr int32_t kMaxRankSumInputs = 8;

// out[i] = ((in[0][i] + in[1][i]) + in[2][i]) + ...  count <= kMaxRankSumInputs; in and out
// device pointers of n floats (out may not alias an input).
void sum_rank_buffers(const float* const* in, int32_t count, float* out, size_t n, CUstream_st* stream);

// x[i] += y[i] over n floats (device).
void add_in_place(float* x, const float* y, size_t n, CUstream_st* stream);

}  // namespace folio::cuda
