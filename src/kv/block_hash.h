// The identity of a full KV block, for automatic prefix caching.
//
// A block's K/V depend on every token before it and on anything else that changes the model
// (a LoRA adapter, an image embedding). So a full block is named by a chain:
//   hash(block i) = hash_block(hash(block i - 1), token ids of block i, extra key)
// with kRootBlockHash as the parent of block 0. Equal chains mean equal prefixes, hence equal
// K/V, and the chain is computed once per block rather than over the whole prefix.
//
// Collisions. The hash is 64 bits; the prefix cache never trusts it alone. A cached block keeps
// its parent hash, extra key and token ids (BlockKey), and a lookup compares all three exactly
// (BlockPool::find_cached_block). Because lookups walk a prompt from block 0 and stop at the
// first miss, block 0 is matched by its exact tokens, and block i is matched by its exact tokens
// plus its parent's hash, which was itself verified one step earlier. A wrong hit would need two
// different prefixes whose whole 64-bit chains agree at the parent while the block's own tokens
// are equal: a random 64-bit collision (about n^2 / 2^65 for n cached blocks, 3e-8 for a
// million blocks), never a collision of the block's own contents. Blocks whose hashes collide
// but whose contents differ both stay cached side by side (the map is a multimap).
#pragma once

#include <cstdint>
#include <span>

namespace folio {

// Parent of every sequence's first block. Any fixed odd constant works; this one is the
// fractional part of the golden ratio, the usual "nothing up my sleeve" seed.
inline constexpr uint64_t kRootBlockHash = 0x9e3779b97f4a7c15ull;

// Extra keys: 0 means none. Callers fold several (adapter id, media hashes) with hash_extra_keys.
inline constexpr uint64_t kNoExtraKey = 0;

// Mixes parent hash, extra key, token count and token ids into 64 bits. Every step is a
// bijection of the running state for fixed input, so two inputs that differ only in their last
// word never collide, and earlier differences are spread over all 64 bits before the next word.
uint64_t hash_block(uint64_t parent_hash, std::span<const int32_t> token_ids, uint64_t extra_key);

// Folds a list of extra keys (e.g. adapter id, then image hashes) into one; never returns 0,
// so a non-empty list can't be confused with "no extra key".
uint64_t hash_extra_keys(std::span<const uint64_t> keys);

// What a cached block must match: its hash and the inputs the hash was made from, kept so that
// a lookup can confirm a hit exactly. token_ids is a view; BlockPool copies it when caching.
struct BlockKey {
  uint64_t hash = 0;
  uint64_t parent_hash = kRootBlockHash;
  uint64_t extra_key = kNoExtraKey;
  std::span<const int32_t> token_ids;  // (block_size,) the block's tokens
};

BlockKey make_block_key(uint64_t parent_hash, std::span<const int32_t> token_ids, uint64_t extra_key);

}  // namespace folio
