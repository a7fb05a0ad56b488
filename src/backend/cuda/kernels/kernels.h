// Host-callable launchers of folio's CUDA kernels. Plain C++: no CUDA header is needed to
// include this, so model and engine code can call the kernels from .cpp files.
//
// Conventions (every launcher):
//   - all pointers are device pointers, non-owning; shapes are in the comments, rows contiguous;
//   - fp16 and bf16 tensors are stored as uint16_t bits;
//   - `stream` is a cudaStream_t (CUstream_st* is its definition); nullptr = legacy stream;
//   - nothing allocates or synchronizes, so every launcher may be captured in a CUDA graph;
//   - unsupported shapes fail an assert on the host (head_dim, dims not multiples of 4, ...).
//   - errors of the launch itself are left to the caller's cudaGetLastError / stream sync.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/cuda/kernels/attention_plan.h"
#include "executor/sampling_plan.h"  // RowSampling
#include "kv/kv_layer_view.h"
#include "model/rope.h"

struct CUstream_st;

namespace folio::cuda {

using Stream = CUstream_st*;  // == cudaStream_t

// ---------------------------------------------------------------------------------------
// Elementwise and row ops (memory-bound, one pass, 16-byte accesses where shapes allow).

// data[i] = bf16(fp16 data[i]), rounded to nearest even. data: (n,) 16-bit words.
void f16_to_bf16_inplace(uint16_t* data, int64_t n, Stream stream);

// out[t] = table[tokens[t] - first] widened to fp32, times scale (Gemma: sqrt(hidden)). Tokens
// outside [first, first + vocab) give a zero row (a tensor-parallel rank's table holds the
// vocabulary slice from `first`). table: (vocab, hidden) bf16; tokens: (n,); out: (n, hidden)
// fp32. hidden % 8 == 0.
void embed_rows(const uint16_t* table, int64_t vocab, int64_t hidden, const int32_t* tokens, int64_t n, float* out,
                Stream stream, float scale = 1.0f, int64_t first = 0);

// The fused "residual add, then RMS norm" between blocks:
//   if add != null: residual += add (written back);  out = residual / rms(residual) * weight.
// residual: (n, dim) fp32 in/out; add: (n, dim) fp32 or null; weight: (dim,) fp32;
// out: (n, dim) bf16. dim % 4 == 0. The sum of squares is accumulated in fp32 per thread and
// reduced as a tree (the CPU uses float64; the difference is far below bf16 rounding).
// out_position: null, or (dim,) device: feature i is written to column out_position[i] of its
// row (the input order of the act-order matrix that reads out: DeviceMatrix::input_position).
void rms_norm(float* residual, const float* add, const float* weight, uint16_t* out, int64_t n, int64_t dim, float eps,
              Stream stream, const int32_t* out_position = nullptr);
// Same, fp32 output (the final norm before the vocabulary projection if that GEMM is fp32).
void rms_norm_f32(float* residual, const float* add, const float* weight, float* out, int64_t n, int64_t dim, float eps,
                  Stream stream);

// RoPE as the Backend interface defines it (see RopeParams in backend/backend.h), with the
// pairs' inverse frequencies as a DEVICE table (rope_inverse_frequencies in model/rope.h: the
// CPU's own numbers, made once at load; computing them per CTA in float64 was most of the
// kernel's time at 512 tokens).
struct DeviceRope {
  RopeStyle style = RopeStyle::kAdjacentPairs;
  int32_t rotary_dim = 0;  // even, <= head_dim
  float position_scale = 1.0f;
  const float* inv_freq = nullptr;  // device, (rotary_dim / 2,)
};

// One kernel for what sits between the QKV GEMM and attention:
//   x = qkv[t] (+ bias); rope(q heads), rope(k heads); q_out[t] = fp16(q);
//   cache.k[slot] = fp16(k), cache.v[slot] = fp16(v) where slot = slot_mapping[t].
// A negative slot skips the K/V write for that token (padding rows of a captured graph);
// q_out is still written. fp8/int8 caches get the row quantized (values and scale); residual
// formats (KIVI) get fp16 rows in the staging blocks, slot = staging * block_size + offset.
// qkv: (n, (num_heads + 2 * num_kv_heads) * head_dim) fp32 = [q | k | v] per row;
// bias: same width, fp32, or null; positions, slot_mapping: (n,) int32;
// q_out: (n, num_heads, head_dim) fp16. head_dim % 8 == 0 and <= 256.
// Angles: theta = (position * position_scale) * inv_freq[i] in fp32, inv_freq the table the
// CPU computes too; sin/cos with sincosf (full precision, not the fast intrinsics).
void rope_write_kv(const float* qkv, const float* bias, const int32_t* positions, const int32_t* slot_mapping,
                   int32_t n, int32_t num_heads, const DeviceRope& rope, uint16_t* q_out, const KvLayerView& cache,
                   Stream stream);

// Residual formats (KIVI, fp8): quantizes each listed block from its fp16 staging block into the
// block's bytes (the bytes kv_seal_block writes: kv/kivi.h's groups, kv/kv_quant.h's rows).
// seals: (max_seals, 2) int32 (block, staging) pairs, the first *num_seals valid (both device
// memory, so a graph replays any count up to max_seals). Runs after rope_write_kv and before
// the layer's attention.
void kv_seal_blocks(const KvLayerView& cache, const int32_t* seals, const int32_t* num_seals, int32_t max_seals,
                    Stream stream);

// out = silu(gate) * up.  gate_up: (n, 2 * ffn) fp32 = [gate | up] per row;
// out: (n, ffn) bf16. ffn % 4 == 0. out_position as rms_norm's.
void swiglu(const float* gate_up, int64_t n, int64_t ffn, uint16_t* out, Stream stream,
            const int32_t* out_position = nullptr);

// Gemma's row ops (gemma_row_ops.cu).
// out = gelu_tanh(gate) * up, GELU's tanh approximation with tanhf as the CPU has it; shapes as
// swiglu's.
void geglu_tanh(const float* gate_up, int64_t n, int64_t ffn, uint16_t* out, Stream stream,
                const int32_t* out_position = nullptr);
// QK norm, in place before RoPE: every q head of qkv's rows RMS-normed and multiplied by
// q_weight, every k head by k_weight (v untouched). qkv: (n, (num_heads + 2 num_kv_heads) *
// head_dim) fp32; weights: (head_dim,) fp32. head_dim % 32 == 0, <= 256. One warp per head.
void rms_norm_heads(float* qkv, const float* q_weight, const float* k_weight, int64_t n, int32_t num_heads,
                    int32_t num_kv_heads, int32_t head_dim, float eps, Stream stream);
// Gemma's post norms: residual += rms_norm(proj) * weight. residual, proj: (n, dim) fp32;
// weight: (dim,) fp32. dim % 4 == 0.
void rms_norm_into_residual(float* residual, const float* proj, const float* weight, int64_t n, int64_t dim, float eps,
                            Stream stream);

// ---------------------------------------------------------------------------------------
// Paged attention over the fp16 cache (layout in backend/attention_batch.h).
//
// Sequence s owns query rows [cu_query_starts[s], cu_query_starts[s+1]); its query_len rows
// sit at positions context_len - query_len + i and attend causally to cache positions
// <= their own (context_len already counts the new tokens, whose K/V rope_write_kv wrote).
// Earlier context (prefix-cache hits, earlier chunks of a chunked prefill) comes from the
// cache, so one launch serves any mix of prefill chunks and decode tokens.
struct PagedAttentionArgs {
  const uint16_t* q = nullptr;               // (num_tokens, num_heads, head_dim) fp16
  uint16_t* out = nullptr;                   // (num_tokens, num_heads, head_dim) bf16
  KvLayerView cache;                         // device pointers; head_dim 64 or 128 (fast kernels)
  const int32_t* cu_query_starts = nullptr;  // (num_seqs + 1,), [0] = 0, last = num_tokens
  const int32_t* context_lens = nullptr;     // (num_seqs,), >= query_len of the sequence, >= 1
  const int32_t* block_tables = nullptr;     // (num_seqs, max_blocks_per_seq) block ids
  int32_t max_blocks_per_seq = 0;            // row stride of block_tables
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;
  int32_t num_heads = 0;      // multiple of cache.num_kv_heads
  int32_t max_query_len = 0;  // host-known upper bounds (a graph may pass its capture bounds)
  int32_t max_context_len = 0;
  float scale = 1.0f;  // softmax scale, usually 1/sqrt(head_dim)
  // Residual formats (KIVI): (num_tokens,) the staging slot each query token's K/V went to
  // (staging * block_size + offset, the ForwardBatch's slot_mapping; negative for padding). A
  // query reads the blocks before its own sealed and its own block from that staging block,
  // and a prefill chunk finds the staging block of each block it covers through its rows.
  const int32_t* slot_mapping = nullptr;
  // Sliding-window layers: a query at position p sees keys p - window + 1 .. p (0: all). Only
  // the reference kernel reads windows so far; paged_attention routes windowed layers to it.
  int32_t window = 0;
};

// Caller-provided scratch for split-KV decode, allocated once (never in the decode loop).
struct Workspace {
  void* ptr = nullptr;
  size_t bytes = 0;
};

// The dispatcher. Batch-invariant: a sequence's output does not depend on what else is in
// the batch (its split plan follows its own context, attention_plan.h), and a query_len == 1
// row always goes through the decode kernel:
//   max_query_len <= 1 (all decode) -> paged_attention_decode;
//   else paged_attention_prefill over the query_len > 1 sequences, then paged_attention_decode
//   over the query_len == 1 ones (each kernel skips the other's sequences on the device).
// Windowed layers and head sizes other than 64 / 128 (Gemma 3: 256) go to
// paged_attention_reference (fp16 caches only), until the fast kernels learn them.
// `sm_count` is no longer used (kept for the callers). The workspace must hold
// attention_workspace_bytes(...) for the maxima the caller will ever pass (attention_plan.h);
// mixed batches use it too.
void paged_attention(const PagedAttentionArgs& args, Workspace workspace, int32_t sm_count, Stream stream);

// Split-KV (flash-decoding) decode of the query_len == 1 sequences (others are skipped). Each
// sequence cuts its context by DecodeSplitPolicy{} (a function of that context alone); the
// grid is sized from max_context_len, so a graph captured with max_context_len = the model's
// maximum stays valid (and gives the same bits) for every shorter context.
void paged_attention_decode(const PagedAttentionArgs& args, Workspace workspace, int32_t sm_count, Stream stream);
// Same with another split policy (checks and benchmarks); DecodeSplitPolicy{1 << 30, 1} never
// splits. Workspace: decode_workspace_layout(num_seqs, num_heads, head_dim,
// decode_grid_splits(max_context_len, policy)).total_bytes when that grid is > 1.
// kernel: every format but bf16 decodes on tensor cores by default (attention_decode_tc_direct.cu
// for fp16, fp8 and int8, attention_decode_tc_kivi.cu for KIVI), bf16 on CUDA cores
// (attention_decode_kernel.cuh); kCudaCores runs the CUDA-core kernel for every format but fp8,
// whose staged block only the tensor-core kernel reads (checks, benchmarks).
enum class DecodeKernel { kDefault, kCudaCores };
void paged_attention_decode_policy(const PagedAttentionArgs& args, Workspace workspace, DecodeSplitPolicy policy,
                                   Stream stream, DecodeKernel kernel = DecodeKernel::kDefault);

// FlashAttention-2-style varlen prefill on tensor cores (mma.sync m16n8k16 fp16, fp32
// accumulate); any query_len / context_len mix, including decode rows (kAll), or only the
// sequences with query_len > 1 (kMultiTokenOnly: the dispatcher's prefill half).
// Kernel shapes: kRows64 (4 warps x 16 query rows per CTA, 2-stage K/V ring; every quantized
// format prefills on it) and kRows128 (4 warps x 32 rows, FA2's register blocking in 32-key
// halves, 2 CTAs per SM, heaviest tiles first over the whole grid) and kWgmma (Hopper, head_dim
// 128, fp16 caches: a producer warpgroup and two consumer warpgroups of 64 rows on wgmma; the
// 128-row kernel where it does not apply). folio_cuda_check checks and benchmarks each;
// kDefaultPrefillKernel is what the dispatcher and the executor use.
enum class PrefillRows { kAll, kMultiTokenOnly };
enum class PrefillKernel { kRows64, kRows128, kWgmma };
inline constexpr PrefillKernel kPrefillKernels[] = {PrefillKernel::kRows64, PrefillKernel::kRows128,
                                                    PrefillKernel::kWgmma};
inline const char* prefill_kernel_name(PrefillKernel kernel) {
  return kernel == PrefillKernel::kRows64 ? "rows64" : kernel == PrefillKernel::kRows128 ? "rows128" : "wgmma";
}
// wgmma (with bulk tensor copies) where it applies: H100, 8k causal x 4, 484 TFLOP/s against
// rows128's 349 and torch SDPA's 643 in the same run (2026-12-07, every check passing).
inline constexpr PrefillKernel kDefaultPrefillKernel = PrefillKernel::kWgmma;
void paged_attention_prefill(const PagedAttentionArgs& args, Stream stream, PrefillRows rows = PrefillRows::kAll,
                             PrefillKernel kernel = kDefaultPrefillKernel);
// The kernel paged_attention's prefill half uses: kDefaultPrefillKernel, or FOLIO_PREFILL_KERNEL
// (rows64 | rows128 | wgmma) for end-to-end A/B measurements.
PrefillKernel engine_prefill_kernel();

// Obviously-correct reference: one warp per (query token, head), scalar online softmax in
// fp32. Any head_dim % 32 == 0 up to 256, windows too, fp16 caches. Slow; for checks and as
// the fallback of the shapes the fast kernels lack.
void paged_attention_reference(const PagedAttentionArgs& args, Stream stream);

// ---------------------------------------------------------------------------------------
// Sampling, one CTA per row. See sample.cu for the algorithm; the semantics are those of
// engine/sampler.h (order: raw logprob, penalties, greedy, temperature, top-k, top-p, min-p,
// draw). Greedy is argmax with ties to the lowest id, NaN never wins.
// A row's settings are executor/sampling_plan.h's RowSampling, read by the kernel as they are:
// seed is the Philox key, offset its counter (the request's step index, so each step draws anew).

struct SampleArgs {
  float* logits = nullptr;  // (rows, vocab) fp32; OVERWRITTEN: penalties are applied in place
  int32_t rows = 0;
  int32_t vocab = 0;
  const RowSampling* params = nullptr;  // (rows,) device
  // Penalty entries, each token at most once per row: count > 0 = occurrences in the output
  // (repetition + frequency + presence); count == 0 = seen only in the prompt (repetition).
  const int32_t* penalty_tokens = nullptr;  // (num_entries,) device
  const int32_t* penalty_counts = nullptr;  // (num_entries,) device
  float* penalty_scratch = nullptr;         // (num_entries,) device scratch (raw logits)
  int32_t* out_tokens = nullptr;            // (rows,)
  float* out_logprobs = nullptr;            // (rows,) raw log-softmax of the token, or null
};

void sample_tokens(const SampleArgs& args, Stream stream);

}  // namespace folio::cuda
