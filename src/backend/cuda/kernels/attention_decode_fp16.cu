// The decode kernel (attention_decode_kernel.cuh) for the 16-bit formats (fp16, bf16).
#include "backend/cuda/kernels/attention_decode_kernel.cuh"

namespace folio::cuda::decode {

template void launch_decode_kernels<KvFormat::kFp16>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                     float2*, Stream);
template void launch_decode_kernels<KvFormat::kBf16>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                     float2*, Stream);

}  // namespace folio::cuda::decode
