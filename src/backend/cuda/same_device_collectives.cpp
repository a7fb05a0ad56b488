#include "backend/cuda/same_device_collectives.h"

#include <cuda_runtime.h>

#include <cassert>
#include <string>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/rank_sum.h"

namespace folio::cuda {

SameDeviceCollectives::SameDeviceCollectives(int32_t num_ranks)
    : num_ranks_(num_ranks),
      buffers_(static_cast<size_t>(num_ranks), nullptr),
      ready_(static_cast<size_t>(num_ranks), nullptr),
      read_(static_cast<size_t>(num_ranks), nullptr),
      scratch_(static_cast<size_t>(num_ranks)) {}

Expected<std::unique_ptr<SameDeviceCollectives>> SameDeviceCollectives::create(int32_t num_ranks, size_t max_elems) {
  if (num_ranks < 1 || num_ranks > kMaxRankSumInputs) {
    return Status::error("tensor parallel on one GPU: 1 to " + std::to_string(kMaxRankSumInputs) + " ranks, not " +
                         std::to_string(num_ranks));
  }
  std::unique_ptr<SameDeviceCollectives> c(new SameDeviceCollectives(num_ranks));
  c->max_elems_ = max_elems;
  for (int32_t r = 0; r < num_ranks; ++r) {
    const auto i = static_cast<size_t>(r);
    // Timing off: these events only order the ranks' streams.
    for (CUevent_st** event : {&c->ready_[i], &c->read_[i]}) {
      if (Status s = cuda_status(cudaEventCreateWithFlags(event, cudaEventDisableTiming), "rank events"); !s) return s;
    }
    if (Status s = c->scratch_[i].allocate(max_elems * sizeof(float), "rank all-reduce scratch"); !s) return s;
  }
  return c;
}

SameDeviceCollectives::~SameDeviceCollectives() {
  for (std::vector<CUevent_st*>* events : {&ready_, &read_}) {
    for (CUevent_st* event : *events) {
      if (event != nullptr) cudaEventDestroy(event);
    }
  }
}

void SameDeviceCollectives::arrive_and_wait() {
  const uint32_t generation = generation_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) == num_ranks_ - 1) {
    arrived_.store(0, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);  // publishes every rank's operand and event
    generation_.notify_all();
    return;
  }
  while (generation_.load(std::memory_order_acquire) == generation) generation_.wait(generation);
}

void SameDeviceCollectives::exchange(int32_t rank, std::vector<CUevent_st*>& events, CUstream_st* stream) {
  FOLIO_CUDA_CHECK(cudaEventRecord(events[static_cast<size_t>(rank)], stream));
  // Every rank's record is made before anyone waits on it; no rank records the same event again
  // before every rank has passed the next barrier, so each wait sees this call's record.
  arrive_and_wait();
  for (int32_t r = 0; r < num_ranks_; ++r) {
    if (r != rank) FOLIO_CUDA_CHECK(cudaStreamWaitEvent(stream, events[static_cast<size_t>(r)], 0));
  }
}

void SameDeviceCollectives::all_reduce_sum(int32_t rank, float* data, size_t n, CUstream_st* stream) {
  if (num_ranks_ == 1) return;
  assert(n <= max_elems_);
  buffers_[static_cast<size_t>(rank)] = data;
  exchange(rank, ready_, stream);  // every operand is written
  float* scratch = scratch_[static_cast<size_t>(rank)].get<float>();
  sum_rank_buffers(buffers_.data(), num_ranks_, scratch, n, stream);
  exchange(rank, read_, stream);  // every rank has read every operand: each may overwrite its own
  FOLIO_CUDA_CHECK(cudaMemcpyAsync(data, scratch, n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
}

void SameDeviceCollectives::all_gather(int32_t rank, const float* send, float* gathered, size_t n,
                                       CUstream_st* stream) {
  buffers_[static_cast<size_t>(rank)] = send;
  exchange(rank, ready_, stream);
  for (int32_t r = 0; r < num_ranks_; ++r) {
    FOLIO_CUDA_CHECK(cudaMemcpyAsync(gathered + static_cast<size_t>(r) * n, buffers_[static_cast<size_t>(r)],
                                     n * sizeof(float), cudaMemcpyDeviceToDevice, stream));
  }
  exchange(rank, read_, stream);
}

}  // namespace folio::cuda
