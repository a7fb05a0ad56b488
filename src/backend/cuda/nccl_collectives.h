// Tensor-parallel ranks on separate GPUs of one host, through NCCL (DeviceCollectives,
// device_collectives.h): one communicator per GPU, made together by ncclCommInitAll in this
// process (one process, one host thread per GPU: the engine keeps one scheduler, one KV manager
// and one set of block tables, and the ranks need no inter-process launch or rendezvous). The
// collectives are NCCL's all-reduce (sum, fp32) and all-gather, issued on the rank's stream, so
// the decode graphs capture them.
//
// Built where CMake finds NCCL (FOLIO_HAVE_NCCL); without it, create() says so. NCCL's NVLink
// multicast (NVLS) stays off unless the caller's environment asks for it: a program that uses
// it can take a shared host's GPUs out of service.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cuda/device_collectives.h"
#include "core/status.h"

namespace folio::cuda {

class NcclCollectives final : public DeviceCollectives {
 public:
  // One communicator per entry of devices (distinct GPUs), rank r on devices[r].
  static Expected<std::unique_ptr<NcclCollectives>> create(const std::vector<int32_t>& devices);
  ~NcclCollectives() override;

  int32_t num_ranks() const override { return static_cast<int32_t>(comms_.size()); }
  bool graph_capturable() const override { return true; }
  void all_reduce_sum(int32_t rank, float* data, size_t n, CUstream_st* stream) override;
  void all_gather(int32_t rank, const float* send, float* gathered, size_t n, CUstream_st* stream) override;
  // NCCL's version, for logs ("2.27.3"); empty where NCCL is not built in.
  static std::string version();

 private:
  NcclCollectives() = default;
  std::vector<void*> comms_;  // ncclComm_t, one per rank
};

}  // namespace folio::cuda
