// A model's weights as one CPU backend computes with them: the model's own views, except that
// each matrix the backend repacks (CpuBackend::pack_for_matmul: panels for AMX, AVX-512 VNNI and AVX2) carries its packed
// copy, owned here. Below AVX2 nothing is packed and the layers are the model's.
//
// Once a matrix is packed its stored pages are only read again for the embedding rows (a tied
// output is the embedding table), so they are handed back to the OS (madvise MADV_PAGEOUT:
// clean file pages are dropped and fault back in if read; other memory keeps its contents):
// the packed copy then replaces the stored one in the resident set instead of doubling it.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/aligned_bytes.h"
#include "model/model_weights.h"

namespace folio::cpu {

class PreparedWeights {
 public:
  // The weights must outlive this object.
  PreparedWeights(const ModelWeights& weights, CpuBackend& backend);

  const LayerWeights& layer(int32_t l) const {
    return layers_.empty() ? weights_.layers()[static_cast<size_t>(l)] : layers_[static_cast<size_t>(l)];
  }
  const WeightTensor& output() const { return output_; }
  int64_t packed_bytes() const { return packed_bytes_; }

 private:
  void pack(CpuBackend& backend, WeightTensor& w);

  const ModelWeights& weights_;
  std::vector<LayerWeights> layers_;  // empty: the model's own
  WeightTensor output_;
  std::vector<AlignedBytes> buffers_;
  int64_t packed_bytes_ = 0;
};

}  // namespace folio::cpu
