#include "kv/block_copy.h"

#include <cassert>

#include "kv/host_kv_pool.h"
#include "kv/kv_cache_storage.h"

namespace folio {

std::string to_string(const BlockCopy& copy) {
  const bool source_on_host = copy.direction == BlockCopyDirection::kHostToDevice;
  const bool destination_on_host = copy.direction == BlockCopyDirection::kDeviceToHost;
  std::string text = std::string(source_on_host ? "host " : "device ") + std::to_string(copy.src_block) +
                     (destination_on_host ? " -> host " : " -> device ") + std::to_string(copy.dst_block);
  if (copy.src_staging >= 0) {
    text += " (staging " + std::to_string(copy.src_staging) + " -> " + std::to_string(copy.dst_staging) + ")";
  }
  return text;
}

void execute_block_copies(std::span<const BlockCopy> copies, KvCacheStorage& device, HostKvPool* host) {
  for (const BlockCopy& copy : copies) {
    switch (copy.direction) {
      case BlockCopyDirection::kDeviceToDevice:
        device.copy_block(copy.src_block, copy.dst_block);
        if (copy.src_staging >= 0) device.copy_staging(copy.src_staging, copy.dst_staging);
        break;
      case BlockCopyDirection::kDeviceToHost:
        assert(host != nullptr && "swap out without a host pool");
        host->copy_to_host(device, copy.src_block, copy.dst_block);
        if (copy.src_staging >= 0) host->copy_staging_to_host(device, copy.src_staging, copy.dst_staging);
        break;
      case BlockCopyDirection::kHostToDevice:
        assert(host != nullptr && "swap in without a host pool");
        host->copy_from_host(copy.src_block, device, copy.dst_block);
        if (copy.src_staging >= 0) host->copy_staging_from_host(copy.src_staging, device, copy.dst_staging);
        break;
    }
  }
}

}  // namespace folio
