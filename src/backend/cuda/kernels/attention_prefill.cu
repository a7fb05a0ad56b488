// Varlen paged prefill attention: the dispatcher. The kernels are attention_prefill_rows64.cu
// (64 query rows a CTA: FlashAttention-2's algorithm in its plainest form, described there, and
// the one every quantized format uses) and attention_prefill_rows128.cu (128 rows a CTA: the
// default for fp16 caches).
#include <cassert>

#include "backend/cuda/kernels/attention_prefill_common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda {

void paged_attention_prefill(const PagedAttentionArgs& args, Stream stream, PrefillRows rows, PrefillKernel kernel) {
  assert(args.cache.head_dim == 64 || args.cache.head_dim == 128);
  assert(args.num_heads % args.cache.num_kv_heads == 0);
  if (args.num_seqs == 0 || args.max_query_len <= 0) return;
  const bool skip_single_query = rows == PrefillRows::kMultiTokenOnly;
  // Every quantized format dequantizes its tiles in the 64-row kernel.
  if (args.cache.format != KvFormat::kFp16 || kernel == PrefillKernel::kRows64) {
    return prefill::launch_prefill_rows64(args, skip_single_query, stream);
  }
  prefill::launch_prefill_rows128(args, skip_single_query, stream);
}

}  // namespace folio::cuda
