#include "model/hf_fp8.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/fp16.h"
#include "core/fp8.h"
#include "model/hf_checkpoint.h"

namespace folio {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A float tensor's values (F32, F16 or BF16), or an error naming it.
Expected<std::vector<float>> floats(const HfCheckpoint::Entry& e, const std::string& name) {
  const std::span<const uint8_t> bytes = e.file->data(*e.tensor);
  std::vector<float> out;
  switch (e.tensor->dtype) {
    case SafetensorsDtype::kF32:
      out.resize(bytes.size() / 4);
      std::memcpy(out.data(), bytes.data(), out.size() * 4);
      return out;
    case SafetensorsDtype::kF16:
    case SafetensorsDtype::kBF16: {
      out.resize(bytes.size() / 2);
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t bits;
        std::memcpy(&bits, bytes.data() + 2 * i, 2);
        out[i] = e.tensor->dtype == SafetensorsDtype::kF16 ? fp16_to_fp32(bits) : bf16_to_fp32(bits);
      }
      return out;
    }
    default:
      return Status::error("model: tensor '" + name + "' has dtype " +
                           std::string(safetensors_dtype_name(e.tensor->dtype)) + "; a scale must be F32, F16 or BF16");
  }
}

}  // namespace

bool hf_layer_is_fp8(const HfCheckpoint& checkpoint, const std::string& prefix) {
  const HfCheckpoint::Entry e = checkpoint.find(prefix + ".weight");
  return e.tensor != nullptr && e.tensor->dtype == SafetensorsDtype::kF8E4M3;
}

Expected<WeightTensor> load_hf_fp8_layer(const HfCheckpoint& checkpoint, const std::string& prefix, int64_t rows,
                                         int64_t cols, int32_t interleave_heads, int32_t block_size,
                                         std::vector<std::vector<uint8_t>>& owned) {
  const std::string weight_name = prefix + ".weight";
  const HfCheckpoint::Entry weight = checkpoint.find(weight_name);
  if (weight.tensor->shape != std::vector<int64_t>{rows, cols}) {
    return Status::error("model: tensor '" + weight_name + "' has shape " + shape_string(weight.tensor->shape) +
                         ", config.json implies " + shape_string({rows, cols}));
  }
  // Which scale: per tensor, per row, or per block.
  enum class Granularity { kTensor, kRow, kBlock } granularity = Granularity::kTensor;
  std::string scale_name = prefix + ".weight_scale";
  HfCheckpoint::Entry scale = checkpoint.find(scale_name);
  int64_t block_rows = 0, block_cols = 0;
  if (scale.tensor != nullptr) {
    int64_t count = 1;
    for (int64_t d : scale.tensor->shape) count *= d;
    if (count == 1) {
      granularity = Granularity::kTensor;
    } else if (count == rows &&
               (scale.tensor->shape.size() == 1 || (scale.tensor->shape.size() == 2 && scale.tensor->shape[1] == 1))) {
      granularity = Granularity::kRow;
    } else {
      return Status::error("model: tensor '" + scale_name + "' has shape " + shape_string(scale.tensor->shape) +
                           "; folio reads one scale per tensor or per output row ([" + std::to_string(rows) + "] or [" +
                           std::to_string(rows) + ", 1])");
    }
  } else {
    scale_name = prefix + ".weight_scale_inv";
    scale = checkpoint.find(scale_name);
    if (scale.tensor == nullptr) {
      return Status::error("model: tensor '" + weight_name + "' is FP8 but neither '" + prefix +
                           ".weight_scale' nor '" + scale_name + "' is in " + checkpoint.dir());
    }
    granularity = Granularity::kBlock;
    block_rows = (rows + block_size - 1) / block_size;
    block_cols = (cols + block_size - 1) / block_size;
    if (scale.tensor->shape != std::vector<int64_t>{block_rows, block_cols}) {
      return Status::error("model: tensor '" + scale_name + "' has shape " + shape_string(scale.tensor->shape) +
                           "; blocks of " + std::to_string(block_size) + " imply " +
                           shape_string({block_rows, block_cols}));
    }
  }
  Expected<std::vector<float>> scales = floats(scale, scale_name);
  if (!scales) return scales.status();

  WeightTensor order;
  order.rows = rows;
  order.interleave_heads = interleave_heads;
  owned.emplace_back(static_cast<size_t>(rows * cols) * 2);
  auto* out = reinterpret_cast<uint16_t*>(owned.back().data());
  const uint8_t* codes = weight.file->data(*weight.tensor).data();
  auto decode_rows = [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t n = order.stored_row(r);
      const uint8_t* in = codes + n * cols;
      for (int64_t k = 0; k < cols; ++k) {
        const float s = granularity == Granularity::kTensor ? (*scales)[0]
                        : granularity == Granularity::kRow
                            ? (*scales)[static_cast<size_t>(n)]
                            : (*scales)[static_cast<size_t>((n / block_size) * block_cols + k / block_size)];
        out[r * cols + k] = fp32_to_bf16(fp8_e4m3_to_float(in[k]) * s);
      }
    }
  };
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
  const int64_t per = (rows + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (int64_t begin = 0; begin < rows; begin += per)
    pool.emplace_back(decode_rows, begin, std::min(rows, begin + per));
  for (std::thread& t : pool) t.join();

  WeightTensor w;
  w.type = DType::BF16;
  w.rows = rows;
  w.cols = cols;
  w.data = owned.back().data();
  return w;
}

}  // namespace folio
