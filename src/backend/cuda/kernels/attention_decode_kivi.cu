// The decode kernel (attention_decode_kernel.cuh) for KIVI (kivi4, kivi2).
#include "backend/cuda/kernels/attention_decode_kernel.cuh"

namespace folio::cuda::decode {

template void launch_decode_kernels<KvFormat::kKivi4>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                      float2*, Stream);
template void launch_decode_kernels<KvFormat::kKivi2>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                      float2*, Stream);

}  // namespace folio::cuda::decode
