// Block copies that the KV cache manager decides and the model runner performs: copy-on-write
// (device -> device), swap out (device -> host) and swap in (host -> device). Plain data, so a
// scheduler's output can carry them and print them.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace folio {

class KvCacheStorage;
class HostKvPool;

enum class BlockCopyDirection : uint8_t { kDeviceToDevice, kDeviceToHost, kHostToDevice };

struct BlockCopy {
  BlockCopyDirection direction = BlockCopyDirection::kDeviceToDevice;
  int32_t src_block = 0;  // a device block, or a host block for kHostToDevice
  int32_t dst_block = 0;  // a device block, or a host block for kDeviceToHost
  // An unsealed block of a residual format (kv_format.h) has its tokens in a staging block,
  // on the same side as the block: both are copied. -1 when the block is sealed.
  int32_t src_staging = -1;
  int32_t dst_staging = -1;

  bool operator==(const BlockCopy&) const = default;
};

std::string to_string(const BlockCopy& copy);

// Performs copies in the order given. Order matters: a block freed by one operation (the
// source of a swap out, the shared source of a copy-on-write) may be handed out again as the
// destination of a later one in the same step, so copies must run in the order they were
// decided, and all of them before the forward pass writes new K/V. host may be null when no
// copy touches the host.
void execute_block_copies(std::span<const BlockCopy> copies, KvCacheStorage& device, HostKvPool* host);

}  // namespace folio
