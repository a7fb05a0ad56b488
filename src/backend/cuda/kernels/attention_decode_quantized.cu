// The decode kernel (attention_decode_kernel.cuh) for int8 (fp8, whose newest block waits in
// fp16 staging, runs on the tensor-core kernel only).
#include "backend/cuda/kernels/attention_decode_kernel.cuh"

namespace folio::cuda::decode {

template void launch_decode_kernels<KvFormat::kInt8>(const PagedAttentionArgs&, DecodeSplitPolicy, int32_t, float*,
                                                     float2*, Stream);

}  // namespace folio::cuda::decode
