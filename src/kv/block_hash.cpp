#include "kv/block_hash.h"

namespace folio {
namespace {

// The splitmix64 finalizer (Steele, Lea, Flood 2014): a bijection on 64 bits with full
// avalanche, i.e. each input bit flips each output bit with probability close to 1/2.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// One absorption step: xor the word into the state, then mix. For a fixed word this is a
// bijection of the state; adding a per-step odd constant keeps runs of zero words from
// cycling through fixed points of mix64 (mix64(0) == 0).
uint64_t absorb(uint64_t state, uint64_t word) {
  return mix64(state ^ word) + 0x9e3779b97f4a7c15ull;
}

}  // namespace

uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> token_ids, uint64_t extra_key) {
  uint64_t state = absorb(parent_hash, extra_key);
  state = absorb(state, static_cast<uint64_t>(token_ids.size()));
  // Two 32-bit token ids per 64-bit word halves the mixing work; the length absorbed above
  // keeps an odd tail (padded with zero) from matching a block that really ends in token 0.
  size_t index = 0;
  for (; index + 1 < token_ids.size(); index += 2) {
    const uint64_t word = static_cast<uint64_t>(static_cast<uint32_t>(token_ids[index])) |
                          static_cast<uint64_t>(static_cast<uint32_t>(token_ids[index + 1])) << 32;
    state = absorb(state, word);
  }
  if (index < token_ids.size()) {
    state = absorb(state, static_cast<uint64_t>(static_cast<uint32_t>(token_ids[index])));
  }
  return mix64(state);
}

uint64_t hash_extra_keys(std::span<const uint64_t> keys) {
  uint64_t state = absorb(0x632be59bd9b4e019ull, static_cast<uint64_t>(keys.size()));
  for (uint64_t key : keys) state = absorb(state, key);
  state = mix64(state);
  return state == kNoExtraKey ? 1 : state;
}

BlockKey make_block_key(uint64_t parent_hash, std::span<const int32_t> token_ids, uint64_t extra_key) {
  return BlockKey{hash_block(parent_hash, token_ids, extra_key), parent_hash, extra_key, token_ids};
}

}  // namespace folio
