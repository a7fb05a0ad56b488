// Which layers share a block table. A model whose layers all see the whole context has one group
// and one table per sequence, every layer's K/V at the same block id. A model with sliding-window
// layers (Gemma 3: five local layers to each global one) splits its layers into groups of equal
// size G: the full-context layers form some groups, the layers of each window size others, and
// each group has its own block table, so the blocks a window group's queries can no longer reach
// go back to the pool while the full groups keep the whole context (vLLM's hybrid allocator
// does the same; docs/design/sliding-window-kv.md).
//
// All groups draw from one pool: a block id belongs to one group at a time, and the storage
// holds G layer slots per block, not one per layer. Layer l keeps its K/V in slot
// layer_slot[l] of the blocks of group layer_group[l]. So the split between full and window
// memory is not fixed: it follows what the running sequences hold.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace folio {

struct KvGroups {
  std::vector<int32_t> windows;      // (num_groups,) 0: the whole context, else the window in tokens
  std::vector<int32_t> layer_group;  // (num_layers,)
  std::vector<int32_t> layer_slot;   // (num_layers,) 0 .. num_slots - 1
  int32_t num_slots = 0;             // layer slots per block (G); == num_layers with one group

  int32_t num_groups() const { return static_cast<int32_t>(windows.size()); }
  int32_t num_layers() const { return static_cast<int32_t>(layer_group.size()); }
};

// The groups of layers with these windows (0: whole context). release_window_blocks false (or
// no window layer at all) gives one group holding every layer, windows still applied by the
// kernels but nothing released: what a model without sliding windows always gets.
KvGroups kv_groups_for(std::span<const int32_t> layer_windows, bool release_window_blocks = true);

// The first block a query at `position` can read with this window (0 for the whole context):
// blocks before it hold only keys before position - window + 1.
inline int32_t first_block_in_window(int32_t position, int32_t window, int32_t block_size) {
  if (window <= 0 || position - window + 1 <= 0) return 0;
  return (position - window + 1) / block_size;
}

}  // namespace folio
