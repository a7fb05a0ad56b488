// Token sampling on the GPU, one 1024-thread CTA per row of logits. Semantics follow
// engine/sampler.h step by step; the random stream differs (Philox instead of mt19937_64).
//
// Algorithm per row (the row, up to ~1 MB, is re-read from L2 by each pass):
//   1. raw log-normalizer: block max, then a float64 sum of exp(x - max).
//   2. penalties in place, one thread per entry; the raw value is kept in penalty_scratch so
//      the raw logprob of the drawn token can still be read afterwards.
//   3. greedy: block argmax, ties to the lowest id, NaN never wins (exactly the CPU's rule).
//   4. scaled = x / T (NaN -> -inf), M = max scaled, weight w = exp(scaled - M).
//   5. top-k: the k-th largest scaled logit by a 4-pass MSB-first radix select over the
//      order-preserving uint32 image of the floats (256-bin shared histograms); every token
//      >= that value stays (boundary ties kept, as on the CPU).
//   6. top-p over the top-k survivors: the same radix walk, but the bins hold probability
//      mass (fixed point, see below) and the walk stops at the bin where the mass above
//      reaches top_p * total. After 4 passes this gives the exact boundary value; tokens above
//      it stay, and of the tokens tied at it the lowest ids stay while the mass above them is
//      still < target (a fifth radix select over their ids), which is the CPU's sorted walk.
//   7. min-p: w >= min_p.
//   8. draw: each thread sums the kept mass of a contiguous id range, a block exclusive scan
//      gives range offsets, u * total picks the range and its thread walks it in id order.
// Masses are accumulated in 2^-40 fixed point in uint64: integer atomics and sums are exact
// and order-independent, so a seed gives the same token on every run (float atomics would
// not), and 2^-40 resolution is far below anything that changes a decision in practice.
// Random numbers: Philox-4x32-10 keyed by the row's seed, counter = the row's offset (not the
// row index, so a request draws the same whichever row it lands in).
#include <cassert>
#include <cfloat>
#include <cmath>

#include "backend/cuda/kernels/common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda {
namespace {

constexpr int kSampleThreads = 1024;
constexpr int kWarps = kSampleThreads / 32;
constexpr double kFixedScale = 1099511627776.0;  // 2^40

__device__ __forceinline__ uint64_t to_fixed(float w) {
  return static_cast<uint64_t>(static_cast<double>(w) * kFixedScale);
}

// Larger float -> larger key; -inf lowest of the non-NaN values (NaN never reaches here).
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t bits = __float_as_uint(x);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}
__device__ __forceinline__ float from_order_key(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

__device__ void philox_4x32_10(uint32_t (&ctr)[4], uint32_t key0, uint32_t key1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(kM0, ctr[0]);
    const uint32_t lo0 = kM0 * ctr[0];
    const uint32_t hi1 = __umulhi(kM1, ctr[2]);
    const uint32_t lo1 = kM1 * ctr[2];
    const uint32_t next[4] = {hi1 ^ ctr[1] ^ key0, lo1, hi0 ^ ctr[3] ^ key1, lo0};
#pragma unroll
    for (int i = 0; i < 4; ++i) ctr[i] = next[i];
    key0 += kW0;
    key1 += kW1;
  }
}

__device__ double uniform_double(uint64_t seed, uint64_t offset) {
  uint32_t ctr[4] = {static_cast<uint32_t>(offset), static_cast<uint32_t>(offset >> 32), 0u, 0u};
  philox_4x32_10(ctr, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  const uint64_t bits = (static_cast<uint64_t>(ctr[0]) << 32) | ctr[1];
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

struct Shared {
  uint32_t hist_count[256];
  unsigned long long hist_mass[256];
  float f[kWarps];
  double d[kWarps];
  unsigned long long u[kWarps];
  int32_t i[kWarps];
  uint32_t select_prefix;
  uint32_t select_rank;
  unsigned long long select_mass;
  int32_t found;
  float found_value;
};

__device__ float block_max(float x, Shared& sh) {
  x = detail::warp_max(x);
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.f[threadIdx.x / 32] = x;
  __syncthreads();
  return detail::warp_max(threadIdx.x % 32 < kWarps ? sh.f[threadIdx.x % 32] : -INFINITY);
}

__device__ double block_sum_double(double x, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.d[threadIdx.x / 32] = x;
  __syncthreads();
  x = threadIdx.x % 32 < kWarps ? sh.d[threadIdx.x % 32] : 0.0;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

__device__ unsigned long long block_sum_u64(unsigned long long x, Shared& sh) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  __syncthreads();
  if (threadIdx.x % 32 == 0) sh.u[threadIdx.x / 32] = x;
  __syncthreads();
  x = threadIdx.x % 32 < kWarps ? sh.u[threadIdx.x % 32] : 0ull;
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Exclusive prefix sum over the threads in thread order.
__device__ unsigned long long block_exclusive_scan_u64(unsigned long long x, Shared& sh) {
  const int lane = threadIdx.x % 32;
  unsigned long long inclusive = x;
  for (int o = 1; o < 32; o <<= 1) {
    const unsigned long long y = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += y;
  }
  __syncthreads();
  if (lane == 31) sh.u[threadIdx.x / 32] = inclusive;
  __syncthreads();
  unsigned long long warp_offset = 0;
  for (int w = 0; w < static_cast<int>(threadIdx.x / 32); ++w) warp_offset += sh.u[w];
  return warp_offset + inclusive - x;
}

// Argmax with ties to the lowest index; the initial (-inf, 0) makes "all -inf or NaN" give 0,
// as the CPU's argmax does.
__device__ int32_t block_argmax(float value, int32_t index, Shared& sh) {
  auto better = [](float v, int32_t i, float bv, int32_t bi) { return v > bv || (v == bv && i < bi); };
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, value, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, index, o);
    if (better(ov, oi, value, index)) {
      value = ov;
      index = oi;
    }
  }
  __syncthreads();
  if (threadIdx.x % 32 == 0) {
    sh.f[threadIdx.x / 32] = value;
    sh.i[threadIdx.x / 32] = index;
  }
  __syncthreads();
  if (threadIdx.x % 32 < kWarps) {
    value = sh.f[threadIdx.x % 32];
    index = sh.i[threadIdx.x % 32];
  } else {
    value = -INFINITY;
    index = 0;
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, value, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, index, o);
    if (better(ov, oi, value, index)) {
      value = ov;
      index = oi;
    }
  }
  return index;
}

// Key of the rank-th largest (1-based) key among the elements for which key_of gives one.
// key_of(i, &key) -> bool.
template <class KeyOf>
__device__ uint32_t radix_select_largest(int n, uint32_t rank, KeyOf key_of, Shared& sh) {
  uint32_t prefix = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t high_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    for (int b = threadIdx.x; b < 256; b += blockDim.x) sh.hist_count[b] = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      uint32_t key;
      if (key_of(i, key) && (key & high_mask) == prefix) atomicAdd(&sh.hist_count[(key >> shift) & 255u], 1u);
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int d = 255;
      for (; d > 0; --d) {
        if (rank <= sh.hist_count[d]) break;
        rank -= sh.hist_count[d];
      }
      sh.select_prefix = prefix | (static_cast<uint32_t>(d) << shift);
      sh.select_rank = rank;
    }
    __syncthreads();
    prefix = sh.select_prefix;
    rank = sh.select_rank;
  }
  return prefix;
}

// Top-p boundary: the largest key such that the mass of keys strictly above it is < target
// while including it reaches target (or the smallest non-empty key). Returns the key and the
// mass strictly above it. mass_of(i, &key, &mass) -> bool.
template <class MassOf>
__device__ uint32_t radix_mass_boundary(int n, unsigned long long target, MassOf mass_of,
                                        unsigned long long& mass_above_out, Shared& sh) {
  uint32_t prefix = 0;
  unsigned long long mass_above = 0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    const uint32_t high_mask = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
    for (int b = threadIdx.x; b < 256; b += blockDim.x) {
      sh.hist_count[b] = 0;
      sh.hist_mass[b] = 0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
      uint32_t key;
      unsigned long long mass;
      if (mass_of(i, key, mass) && (key & high_mask) == prefix) {
        atomicAdd(&sh.hist_count[(key >> shift) & 255u], 1u);
        atomicAdd(&sh.hist_mass[(key >> shift) & 255u], mass);
      }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      int chosen = -1;
      int lowest_nonempty = -1;
      for (int d = 255; d >= 0; --d) {
        if (sh.hist_count[d] == 0) continue;
        lowest_nonempty = d;
        if (mass_above + sh.hist_mass[d] >= target) {
          chosen = d;
          break;
        }
        mass_above += sh.hist_mass[d];
      }
      if (chosen < 0) {  // rounding: the whole rest is below target; keep everything
        chosen = lowest_nonempty;
        // mass_above then includes the chosen bin's mass; take it back out
        mass_above -= sh.hist_mass[chosen];
      }
      sh.select_prefix = prefix | (static_cast<uint32_t>(chosen) << shift);
      sh.select_mass = mass_above;
    }
    __syncthreads();
    prefix = sh.select_prefix;
    mass_above = sh.select_mass;
  }
  mass_above_out = mass_above;
  return prefix;
}

__global__ void __launch_bounds__(kSampleThreads) sample_kernel(const SampleArgs args) {
  __shared__ Shared sh;
  const int row = blockIdx.x;
  const int vocab = args.vocab;
  float* logits = args.logits + static_cast<size_t>(row) * vocab;
  const RowSampling p = args.params[row];
  const int tid = threadIdx.x;

  // 1. raw log-normalizer (fmaxf drops NaN).
  float local_max = -INFINITY;
  for (int i = tid; i < vocab; i += kSampleThreads) local_max = fmaxf(local_max, logits[i]);
  const float raw_max = block_max(local_max, sh);
  double local_sum = 0.0;
  for (int i = tid; i < vocab; i += kSampleThreads) {
    const float x = logits[i];
    if (x == x) local_sum += static_cast<double>(expf(x - raw_max));
  }
  const double log_normalizer = static_cast<double>(raw_max) + log(block_sum_double(local_sum, sh));

  // 2. penalties, in place.
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool output_penalties = p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
  const bool any_penalty = (repetition || output_penalties) && p.penalty_end > p.penalty_begin;
  if (any_penalty) {
    for (int e = p.penalty_begin + tid; e < p.penalty_end; e += kSampleThreads) {
      const int32_t token = args.penalty_tokens[e];
      if (token < 0 || token >= vocab) continue;
      const int32_t count = args.penalty_counts[e];
      float logit = logits[token];
      args.penalty_scratch[e] = logit;
      if (repetition) logit = logit > 0.0f ? logit / p.repetition_penalty : logit * p.repetition_penalty;
      if (count > 0) {
        logit -= p.frequency_penalty * static_cast<float>(count);
        logit -= p.presence_penalty;
      }
      logits[token] = logit;
    }
    __syncthreads();  // orders the global writes for the rest of the block
  }

  int32_t token = 0;
  const bool greedy = p.temperature < 1e-5f;
  if (greedy) {
    // 3. argmax, ties to the lowest id: each thread scans ids in increasing order.
    float best = -INFINITY;
    int32_t best_index = 0;
    for (int i = tid; i < vocab; i += kSampleThreads) {
      const float x = logits[i];
      if (x > best) {
        best = x;
        best_index = i;
      }
    }
    token = block_argmax(best, best_index, sh);
  } else {
    // 4. temperature (division, as the CPU does), NaN -> -inf.
    const float temperature = p.temperature;
    auto scaled_at = [&](int i) {
      const float x = logits[i];
      return x == x ? x / temperature : -INFINITY;
    };
    float m = -INFINITY;
    float best = -INFINITY;
    int32_t best_index = 0;
    for (int i = tid; i < vocab; i += kSampleThreads) {
      const float s = scaled_at(i);
      if (s > best) {
        best = s;
        best_index = i;
      }
    }
    m = block_max(best, sh);
    if (m == -INFINITY) {
      token = block_argmax(best, best_index, sh);  // everything masked: the CPU's argmax
    } else {
      const bool top_k = p.top_k > 0 && p.top_k < vocab;
      const bool top_p = p.top_p < 1.0f;
      const bool min_p = p.min_p > 0.0f;

      // 5. top-k threshold.
      float kth = -INFINITY;
      if (top_k) {
        const uint32_t key = radix_select_largest(
            vocab, static_cast<uint32_t>(p.top_k),
            [&](int i, uint32_t& k) {
              k = order_key(scaled_at(i));
              return true;
            },
            sh);
        kth = from_order_key(key);
      }
      auto weight_at = [&](float s) { return expf(s - m); };
      auto in_top_k = [&](float s) { return !top_k || s >= kth; };

      // 6. top-p boundary over the top-k survivors with non-zero weight.
      uint32_t boundary_key = 0;
      int32_t boundary_id_cut = 0x7fffffff;
      if (top_p) {
        unsigned long long local_total = 0;
        for (int i = tid; i < vocab; i += kSampleThreads) {
          const float s = scaled_at(i);
          const float w = weight_at(s);
          if (in_top_k(s) && w > 0.0f) local_total += to_fixed(w);
        }
        const unsigned long long total = block_sum_u64(local_total, sh);
        const unsigned long long target =
            static_cast<unsigned long long>(static_cast<double>(p.top_p) * static_cast<double>(total));
        unsigned long long mass_above = 0;
        boundary_key = radix_mass_boundary(
            vocab, target,
            [&](int i, uint32_t& k, unsigned long long& mass) {
              const float s = scaled_at(i);
              const float w = weight_at(s);
              if (!(in_top_k(s) && w > 0.0f)) return false;
              k = order_key(s);
              mass = to_fixed(w);
              return true;
            },
            mass_above, sh);
        // Ties at the boundary value: keep the first n_keep by id, where token j of the tie
        // (0-based in id order) stays while mass_above + j * w < target.
        const float boundary_value = from_order_key(boundary_key);
        const unsigned long long w_fixed = to_fixed(weight_at(boundary_value));
        uint32_t local_ties = 0;
        for (int i = tid; i < vocab; i += kSampleThreads) local_ties += order_key(scaled_at(i)) == boundary_key;
        const uint32_t ties = static_cast<uint32_t>(block_sum_u64(local_ties, sh));
        uint32_t keep = ties;
        if (w_fixed > 0 && target > mass_above) {
          const unsigned long long need = (target - mass_above + w_fixed - 1) / w_fixed;
          keep = static_cast<uint32_t>(need < ties ? need : ties);
        }
        if (keep < 1) keep = 1;
        if (keep < ties) {
          const uint32_t id_key = radix_select_largest(
              vocab, keep,
              [&](int i, uint32_t& k) {
                if (order_key(scaled_at(i)) != boundary_key) return false;
                k = ~static_cast<uint32_t>(i);
                return true;
              },
              sh);
          boundary_id_cut = static_cast<int32_t>(~id_key);
        }
      }

      // 7 + 8. draw among the kept tokens.
      auto kept_mass = [&](int i) -> unsigned long long {
        const float s = scaled_at(i);
        const float w = weight_at(s);
        if (!(w > 0.0f) || !in_top_k(s)) return 0ull;
        if (min_p && w < p.min_p) return 0ull;
        if (top_p) {
          const uint32_t k = order_key(s);
          if (k < boundary_key || (k == boundary_key && i > boundary_id_cut)) return 0ull;
        }
        return to_fixed(w);
      };
      const int chunk = (vocab + kSampleThreads - 1) / kSampleThreads;
      const int begin = min(vocab, tid * chunk);
      const int end = min(vocab, begin + chunk);
      unsigned long long own = 0;
      for (int i = begin; i < end; ++i) own += kept_mass(i);
      const unsigned long long offset = block_exclusive_scan_u64(own, sh);
      const unsigned long long total = block_sum_u64(own, sh);
      if (tid == 0) sh.found = -1;
      __syncthreads();
      if (total > 0) {
        const double u = uniform_double(p.seed, p.offset);
        unsigned long long target = static_cast<unsigned long long>(u * static_cast<double>(total));
        if (target >= total) target = total - 1;
        if (own > 0 && target >= offset && target < offset + own) {
          unsigned long long cumulative = offset;
          for (int i = begin; i < end; ++i) {
            cumulative += kept_mass(i);
            if (cumulative > target) {
              sh.found = i;
              break;
            }
          }
        }
      }
      __syncthreads();
      token = sh.found >= 0 ? sh.found : block_argmax(best, best_index, sh);
    }
  }

  // Raw logprob of the token: its raw logit is in the scratch if it was penalized.
  if (args.out_logprobs != nullptr) {
    if (tid == 0) sh.found_value = logits[token];
    __syncthreads();
    if (any_penalty) {
      for (int e = p.penalty_begin + tid; e < p.penalty_end; e += kSampleThreads) {
        if (args.penalty_tokens[e] == token) sh.found_value = args.penalty_scratch[e];
      }
      __syncthreads();
    }
    if (tid == 0) {
      args.out_logprobs[row] = static_cast<float>(static_cast<double>(sh.found_value) - log_normalizer);
    }
  }
  if (tid == 0) args.out_tokens[row] = token;
}

}  // namespace

void sample_tokens(const SampleArgs& args, Stream stream) {
  assert(args.vocab > 0);
  if (args.rows == 0) return;
  sample_kernel<<<args.rows, kSampleThreads, 0, stream>>>(args);
}

}  // namespace folio::cuda
