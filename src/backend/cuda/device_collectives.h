// What a tensor-parallel rank's forward needs from the other ranks on the GPU: the sum of every
// rank's partial products (after the row-parallel attention output and down projections, and
// the vocabulary-parallel embedding) and every rank's slice of the logits. Two implementations:
//  - NcclCollectives (nccl_collectives.h): one GPU per rank, through NCCL; the calls are
//    captured in the decode graphs like any kernel;
//  - SameDeviceCollectives (same_device_collectives.h): every rank on one GPU, joined by events
//    and host barriers; no speed-up and no graphs, but it runs the sharded model's code path
//    on a machine with one GPU, so a single-GPU check compares TP = 2, 3, 4 against TP = 1.
// Every call is made by every rank, each from its own host thread, in the same order.
// Plain C++ (CUDA's stream type only declared), so the executors' headers include it.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace folio::cuda {

class DeviceCollectives {
 public:
  virtual ~DeviceCollectives() = default;
  virtual int32_t num_ranks() const = 0;
  // Whether the calls may be captured in a CUDA graph (decode graphs are off otherwise).
  virtual bool graph_capturable() const = 0;
  // data (n floats, device) <- the element-wise sum over every rank's data; every rank gets the
  // same bits.
  virtual void all_reduce_sum(int32_t rank, float* data, size_t n, CUstream_st* stream) = 0;
  // gathered (num_ranks * n floats, device) <- every rank's send (n floats) in rank order.
  virtual void all_gather(int32_t rank, const float* send, float* gathered, size_t n, CUstream_st* stream) = 0;
};

}  // namespace folio::cuda
