#include "kv/kv_groups.h"

#include <algorithm>
#include <map>

namespace folio {

KvGroups kv_groups_for(std::span<const int32_t> layer_windows, bool release_window_blocks) {
  KvGroups groups;
  const auto num_layers = static_cast<int32_t>(layer_windows.size());
  groups.layer_group.assign(layer_windows.size(), 0);
  groups.layer_slot.resize(layer_windows.size());
  const bool windowed = std::ranges::any_of(layer_windows, [](int32_t w) { return w > 0; });
  if (!release_window_blocks || !windowed) {
    groups.windows = {0};
    for (int32_t l = 0; l < num_layers; ++l) groups.layer_slot[static_cast<size_t>(l)] = l;
    groups.num_slots = num_layers;
    return groups;
  }
  // Layers by window, full-context layers (window 0) first so that group 0 is a full group.
  std::map<int32_t, std::vector<int32_t>> buckets;
  for (int32_t l = 0; l < num_layers; ++l) buckets[std::max(0, layer_windows[static_cast<size_t>(l)])].push_back(l);
  // G = the smallest bucket: no bucket then needs a partly empty group but the largest ones'
  // last, and the page (G layers) stays as small as the smallest kind allows.
  size_t size = layer_windows.size();
  for (const auto& [window, layers] : buckets) size = std::min(size, layers.size());
  groups.num_slots = static_cast<int32_t>(size);
  for (const auto& [window, layers] : buckets) {
    for (size_t j = 0; j < layers.size(); ++j) {
      if (j % size == 0) groups.windows.push_back(window);
      groups.layer_group[static_cast<size_t>(layers[j])] = groups.num_groups() - 1;
      groups.layer_slot[static_cast<size_t>(layers[j])] = static_cast<int32_t>(j % size);
    }
  }
  return groups;
}

}  // namespace folio
