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

namespace {

// madvise over the whole pages inside [begin, end): a hint, so errors are fine.
void advise_pages(uintptr_t begin, uintptr_t end, int advice) {
  constexpr uintptr_t kPage = 4096;
  const uintptr_t first = (begin + kPage - 1) / kPage * kPage, last = end / kPage * kPage;
  if (last > first) madvise(reinterpret_cast<void*>(first), last - first, advice);
}

}  // namespace

void PreparedWeights::pack(CpuBackend& backend, WeightTensor& w) {
  if (w.empty() || w.interleave_heads != 0) return;
  const auto base = reinterpret_cast<uintptr_t>(w.data);
  const auto row_address = [&](int64_t row) { return base + static_cast<uintptr_t>(row) * w.row_stride_bytes(); };
  // The stored rows go back as soon as their panels are packed, so a matrix is not resident
  // twice: Gemma 3's 178 MB tied embedding would be, at the peak.
  const auto page_out = [&](int64_t row_begin, int64_t row_end) {
#ifdef MADV_PAGEOUT
    advise_pages(row_address(row_begin), row_address(row_end), MADV_PAGEOUT);
#endif
  };
  AlignedBytes packed = backend.pack_for_matmul(w, page_out);
  if (packed.empty()) return;
  // A tied embedding's rows are still looked up from the stored pages: without this, each
  // lookup's fault reads ahead ~128 KiB around its 4 KiB, and a 512-token prompt of Gemma 3
  // brought 64 MiB of its table back.
  advise_pages(base, row_address(w.rows), MADV_RANDOM);
  w.packed = packed.data();
  packed_bytes_ += static_cast<int64_t>(packed.size());
  buffers_.push_back(std::move(packed));
}

}  // namespace folio::cpu
