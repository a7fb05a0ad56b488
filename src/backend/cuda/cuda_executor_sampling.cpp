// The CUDA executor's sampling half: a step's SamplingPlan to the device, the sample_tokens
// kernel over each chunk of logit rows (or the rows' logits to the host when there is no plan),
// and the chosen tokens back.
#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_executor.h"
#include "backend/cuda/cuda_model.h"
#include "backend/cuda/kernels/kernels.h"

namespace folio::cuda {

CudaExecutor::RowSampler CudaExecutor::upload_sampling(const SamplingPlan& plan, int32_t rows) {
  if (plan.rows.size() != static_cast<size_t>(rows) || static_cast<size_t>(rows) > logits_host_rows_ ||
      plan.penalty_tokens.size() != plan.penalty_counts.size()) {
    cuda_fail("CudaExecutor::execute", __FILE__, __LINE__,
              "one RowSampling per logit row and one count per penalty token are required");
  }
  // Plain greedy (the common serving case): the params uploaded at start serve, nothing to copy.
  const bool plain_greedy = plan.penalty_tokens.empty() &&
                            std::all_of(plan.rows.begin(), plan.rows.end(),
                                        [](const RowSampling& r) { return r.is_greedy() && !r.has_penalties(); });
  if (plain_greedy) return RowSampler{greedy_params_.get<RowSampling>(), 0, /*per_row=*/false};
  const size_t entries = plan.penalty_tokens.size();
  if (entries > penalty_capacity_) {
    size_t cap = std::max<size_t>(penalty_capacity_ * 2, 4096);
    while (cap < entries) cap *= 2;
    FOLIO_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (Status s = penalties_.allocate(3 * cap * sizeof(int32_t), "penalty lists"); !s) {
      cuda_fail("CudaExecutor::execute", __FILE__, __LINE__, s.message().c_str());
    }
    penalty_capacity_ = cap;
  }
  // Pageable sources: each copy returns once its source has been staged, and the stream
  // orders it before the kernel that reads it.
  FOLIO_CUDA_CHECK(cudaMemcpyAsync(sample_params_.get(), plan.rows.data(),
                                   static_cast<size_t>(rows) * sizeof(RowSampling), cudaMemcpyHostToDevice, stream_));
  if (entries > 0) {
    penalties_host_.resize(2 * entries);
    std::copy(plan.penalty_tokens.begin(), plan.penalty_tokens.end(), penalties_host_.begin());
    std::copy(plan.penalty_counts.begin(), plan.penalty_counts.end(),
              penalties_host_.begin() + static_cast<std::ptrdiff_t>(entries));
    int32_t* d = penalties_.get<int32_t>();
    FOLIO_CUDA_CHECK(
        cudaMemcpyAsync(d, penalties_host_.data(), entries * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
    FOLIO_CUDA_CHECK(cudaMemcpyAsync(d + penalty_capacity_, penalties_host_.data() + entries, entries * sizeof(int32_t),
                                     cudaMemcpyHostToDevice, stream_));
  }
  return RowSampler{sample_params_.get<RowSampling>(), static_cast<int32_t>(entries), /*per_row=*/true};
}

void CudaExecutor::finish_rows(int32_t first, int32_t count, const RowSampler& sampler) {
  const size_t vocab = static_cast<size_t>(model_->logits_vocab());
  if (sampler.params == nullptr) {
    FOLIO_CUDA_CHECK(cudaMemcpyAsync(logits_host_.get<float>() + first * vocab, model_->logits_buffer(),
                                     count * vocab * sizeof(float), cudaMemcpyDeviceToHost, stream_));
    stats_.logits_bytes_to_host += static_cast<int64_t>(count * vocab * sizeof(float));
    return;
  }
  SampleArgs args;
  // Greedy rows without penalties only read the logits; with penalties the kernel overwrites
  // the rows in place, which is fine: the next step recomputes them.
  args.logits = model_->logits_buffer();
  args.rows = count;
  args.vocab = static_cast<int32_t>(vocab);
  // Per-row params start at this chunk's first row; the greedy ones are the same for every row.
  args.params = sampler.per_row ? sampler.params + first : sampler.params;
  if (sampler.num_penalties > 0) {
    const size_t cap = penalty_capacity_;
    args.penalty_tokens = penalties_.get<int32_t>();
    args.penalty_counts = penalties_.get<int32_t>() + cap;
    args.penalty_scratch = reinterpret_cast<float*>(penalties_.get<int32_t>() + 2 * cap);
  }
  args.out_tokens = sampled_.get<int32_t>() + first;
  args.out_logprobs = reinterpret_cast<float*>(sampled_.get<int32_t>() + logits_host_rows_) + first;
  sample_tokens(args, stream_);
}

std::span<const SampledToken> CudaExecutor::read_samples(int32_t m) {
  const int32_t* tokens = sampled_host_.get<int32_t>();
  const auto* logprobs = reinterpret_cast<const float*>(tokens + logits_host_rows_);
  sampled_out_.resize(static_cast<size_t>(m));
  for (int32_t i = 0; i < m; ++i) sampled_out_[static_cast<size_t>(i)] = SampledToken{tokens[i], logprobs[i]};
  return sampled_out_;
}

}  // namespace folio::cuda
