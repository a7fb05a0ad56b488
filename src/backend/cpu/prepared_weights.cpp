#include "backend/cpu/prepared_weights.h"

#include <sys/mman.h>

namespace folio::cpu {

PreparedWeights::PreparedWeights(const ModelWeights& weights, CpuBackend& backend)
    : weights_(weights), output_(weights.output()) {
  // A tied output is the embedding table too: its pages go back all the same, and the few rows
  // a step looks up fault back in from the page cache.
  pack(backend, output_);
  if (backend.isa() < Isa::kAvx2) return;  // the panels' paths (quant/panel_gemm.h)
  layers_ = weights.layers();
  for (LayerWeights& layer : layers_) {
    for (WeightTensor* w : {&layer.q, &layer.k, &layer.v, &layer.o, &layer.gate, &layer.up, &layer.down}) {
      pack(backend, *w);
    }
  }
}

void PreparedWeights::pack(CpuBackend& backend, WeightTensor& w) {
  if (w.empty() || w.interleave_heads != 0) return;
  // The stored rows go back as soon as their panels are packed (the whole pages inside them),
  // so a matrix is not resident twice: Gemma 3's 178 MB tied embedding would be, at the peak.
  const auto page_out = [&](int64_t row_begin, int64_t row_end) {
    constexpr uintptr_t kPage = 4096;
    const auto base = reinterpret_cast<uintptr_t>(w.data);
    const uintptr_t begin = base + static_cast<uintptr_t>(row_begin) * w.row_stride_bytes();
    const uintptr_t end = base + static_cast<uintptr_t>(row_end) * w.row_stride_bytes();
    const uintptr_t first = (begin + kPage - 1) / kPage * kPage, last = end / kPage * kPage;
#ifdef MADV_PAGEOUT
    if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_PAGEOUT);  // a hint: errors are fine
#endif
  };
  AlignedBytes packed = backend.pack_for_matmul(w, page_out);
  if (packed.empty()) return;
  // A tied embedding's rows are still looked up from the stored pages: without this, each
  // lookup's fault reads ahead ~128 KiB around its 4 KiB, and a 512-token prompt of Gemma 3
  // brought 64 MiB of its table back.
  const auto base = reinterpret_cast<uintptr_t>(w.data);
  constexpr uintptr_t kPage = 4096;
  const uintptr_t first = base / kPage * kPage;
  const uintptr_t end = base + static_cast<uintptr_t>(w.rows) * w.row_stride_bytes();
  madvise(reinterpret_cast<void*>(first), end - first, MADV_RANDOM);  // a hint: errors are fine
  w.packed = packed.data();
  packed_bytes_ += static_cast<int64_t>(packed.size());
  buffers_.push_back(std::move(packed));
}

}  // namespace folio::cpu
