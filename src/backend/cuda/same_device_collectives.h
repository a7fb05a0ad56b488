// Tensor-parallel ranks that share one GPU (DeviceCollectives, device_collectives.h): each rank
// a host thread with its own stream. A collective records an event on each rank's stream, meets
// the other ranks at a host barrier, makes its stream wait for theirs, works (a kernel summing
// every rank's buffer in rank order into this rank's scratch, or copies of their slices), and
// meets them again behind a second set of events, so that no rank overwrites a buffer another
// rank still reads. Sums run in rank order on every rank: all ranks get the same bits, and the
// same bits run to run.
//
// This is a checking device, not a speed-up (the ranks' kernels share one GPU): it lets the
// sharded model run where only one GPU is lent. The host barriers and cross-stream events cannot
// be captured in a graph, so its ranks run eagerly.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/cuda/device_buffer.h"
#include "backend/cuda/device_collectives.h"
#include "core/status.h"

struct CUevent_st;

namespace folio::cuda {

class SameDeviceCollectives final : public DeviceCollectives {
 public:
  // max_elems: the longest all_reduce_sum (its scratch, per rank). On the current device.
  static Expected<std::unique_ptr<SameDeviceCollectives>> create(int32_t num_ranks, size_t max_elems);
  ~SameDeviceCollectives() override;

  int32_t num_ranks() const override { return num_ranks_; }
  bool graph_capturable() const override { return false; }
  void all_reduce_sum(int32_t rank, float* data, size_t n, CUstream_st* stream) override;
  void all_gather(int32_t rank, const float* send, float* gathered, size_t n, CUstream_st* stream) override;

 private:
  explicit SameDeviceCollectives(int32_t num_ranks);
  void arrive_and_wait();
  // Records `events[rank]` on the stream, waits at the barrier, then makes the stream wait for
  // every other rank's event.
  void exchange(int32_t rank, std::vector<CUevent_st*>& events, CUstream_st* stream);

  int32_t num_ranks_;
  size_t max_elems_ = 0;
  std::vector<const float*> buffers_;  // each rank's operand of the call in progress
  std::vector<CUevent_st*> ready_;     // a rank's operand is written
  std::vector<CUevent_st*> read_;      // a rank has read every operand
  std::vector<DeviceBuffer> scratch_;  // (max_elems,) per rank: its sums before they replace its data
  std::atomic<int32_t> arrived_{0};
  std::atomic<uint32_t> generation_{0};
};

}  // namespace folio::cuda
