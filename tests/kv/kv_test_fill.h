// Fake K/V for KV-cache tests. A real token's K/V depend on every token up to it and on the
// extra key (adapter), so the fake is a fingerprint of exactly that: any block reused for the
// wrong prefix, copied wrong, or placed in the wrong slot reads back a different value.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/host_kv_pool.h"
#include "kv/kv_cache_storage.h"

namespace folio::testing {

inline uint64_t mix_fingerprint(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// fingerprints[p] names the prefix tokens[0..p] under extra_key.
inline std::vector<uint64_t> prefix_fingerprints(std::span<const int32_t> tokens, uint64_t extra_key) {
  std::vector<uint64_t> fingerprints;
  uint64_t state = mix_fingerprint(extra_key + 1);
  for (int32_t token : tokens) {
    state = mix_fingerprint(state ^ static_cast<uint32_t>(token)) + 0x9e3779b97f4a7c15ull;
    fingerprints.push_back(state);
  }
  return fingerprints;
}

// Element e of (layer, half: 0 = K, 1 = V) for a token with this fingerprint.
inline uint16_t fake_kv_element(uint64_t fingerprint, int32_t layer, int32_t half, int32_t element) {
  return static_cast<uint16_t>(mix_fingerprint(fingerprint ^ (static_cast<uint64_t>(layer) << 40) ^
                                               (static_cast<uint64_t>(half) << 48) ^
                                               (static_cast<uint64_t>(element) << 52)));
}

// Writes one token's K and V, every layer, at a slot, through the view kernels use.
inline void write_fake_kv(KvCacheStorage& storage, int32_t slot, uint64_t fingerprint) {
  const KvCacheShape& shape = storage.shape();
  const int32_t row = shape.num_kv_heads * shape.head_dim;  // elements per slot
  for (int32_t layer = 0; layer < shape.num_layers; ++layer) {
    KvLayerView view = storage.layer(layer);
    for (int32_t element = 0; element < row; ++element) {
      view.fp16_keys()[static_cast<size_t>(slot) * row + element] = fake_kv_element(fingerprint, layer, 0, element);
      view.fp16_values()[static_cast<size_t>(slot) * row + element] = fake_kv_element(fingerprint, layer, 1, element);
    }
  }
}

// Reads back through the block table the way attention does: block table[p / block_size],
// offset p % block_size.
inline bool fake_kv_matches(KvCacheStorage& storage, std::span<const int32_t> block_table, int32_t position,
                            uint64_t fingerprint) {
  const KvCacheShape& shape = storage.shape();
  const int32_t row = shape.num_kv_heads * shape.head_dim;
  const int32_t block = block_table[position / shape.block_size];
  const size_t base = (static_cast<size_t>(block) * shape.block_size + position % shape.block_size) * row;
  for (int32_t layer = 0; layer < shape.num_layers; ++layer) {
    KvLayerView view = storage.layer(layer);
    for (int32_t element = 0; element < row; ++element) {
      if (view.fp16_keys()[base + element] != fake_kv_element(fingerprint, layer, 0, element)) return false;
      if (view.fp16_values()[base + element] != fake_kv_element(fingerprint, layer, 1, element)) return false;
    }
  }
  return true;
}

// The same check for a swapped-out sequence, whose blocks live in the host pool.
inline bool host_fake_kv_matches(const HostKvPool& host, const KvCacheShape& shape, std::span<const int32_t> host_table,
                                 int32_t position, uint64_t fingerprint) {
  const int32_t row = shape.num_kv_heads * shape.head_dim;
  const int32_t block = host_table[position / shape.block_size];
  const size_t base = static_cast<size_t>(position % shape.block_size) * row;
  // fp16 storage: the host block's bytes read as halves.
  for (int32_t layer = 0; layer < shape.num_layers; ++layer) {
    const auto* keys = reinterpret_cast<const uint16_t*>(host.block_keys(block, layer).data());
    const auto* values = reinterpret_cast<const uint16_t*>(host.block_values(block, layer).data());
    for (int32_t element = 0; element < row; ++element) {
      if (keys[base + element] != fake_kv_element(fingerprint, layer, 0, element)) return false;
      if (values[base + element] != fake_kv_element(fingerprint, layer, 1, element)) return false;
    }
  }
  return true;
}

}  // namespace folio::testing
