// The decode kernel (attention_decode_kernel.cuh) for fp8 and int8.
#include "backend/cuda/kernels/attention_decode_kernel.cuh"

namespace folio::cuda::decode {

template void launch_decode_kernels<KvFormat::kFp8E4M3>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                        float2*, Stream);
template void launch_decode_kernels<KvFormat::kInt8>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                     float2*, Stream);

}  // namespace folio::cuda::decode
