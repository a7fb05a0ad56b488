// Varlen paged prefill attention: the dispatcher. The kernels are attention_prefill_rows64.cu
// (64 query rows a CTA: FlashAttention-2's algorithm in its plainest form, described there, and
// the one every quantized format uses), attention_prefill_rows128.cu (128 rows a CTA on
// mma.sync: fp16 caches before Hopper and at head_dim 64) and attention_prefill_wgmma.cu (128
// rows, warp-specialized on wgmma: fp16 caches on Hopper at head_dim 128).
#include <cassert>
#include <cstdlib>
#include <cstring>

#include "backend/cuda/kernels/attention_prefill_common.cuh"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda {

PrefillKernel engine_prefill_kernel() {
  static const PrefillKernel kernel = [] {
    const char* v = std::getenv("FOLIO_PREFILL_KERNEL");
    for (const PrefillKernel k : kPrefillKernels) {
      if (v != nullptr && std::strcmp(v, prefill_kernel_name(k)) == 0) return k;
    }
    return kDefaultPrefillKernel;
  }();
  return kernel;
}

void paged_attention_prefill(const PagedAttentionArgs& args, Stream stream, PrefillRows rows, PrefillKernel kernel) {
  assert(args.cache.head_dim == 64 || args.cache.head_dim == 128);
  assert(args.num_heads % args.cache.num_kv_heads == 0);
  if (args.num_seqs == 0 || args.max_query_len <= 0) return;
  const bool skip_single_query = rows == PrefillRows::kMultiTokenOnly;
  // Every quantized format dequantizes its tiles in the 64-row kernel.
  if (args.cache.format != KvFormat::kFp16 || kernel == PrefillKernel::kRows64) {
    return prefill::launch_prefill_rows64(args, skip_single_query, stream);
  }
  // Hopper's warp-specialized kernel where it applies (head_dim 128); the 128-row one elsewhere.
  if (kernel == PrefillKernel::kWgmma && prefill::prefill_wgmma_supported(args)) {
    return prefill::launch_prefill_wgmma(args, skip_single_query, stream);
  }
  prefill::launch_prefill_rows128(args, skip_single_query, stream);
}

}  // namespace folio::cuda
