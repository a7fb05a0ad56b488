#include "backend/cuda/cuda_weights.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <span>
#include <string_view>
#include <thread>
#include <utility>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/fp8_rows.h"
#include "backend/cuda/kernels/kernels.h"
#include "backend/cuda/weight_layout_plan.h"
#include "core/fp16.h"
#include "model/rope.h"
#include "quant/formats.h"
#include "quant/int4_groups.h"
#include "quant/int8_groups.h"

namespace folio::cuda {
namespace {

size_t align256(size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

// Converts computed rows [begin, end) of w to BF16 into dst (row-major, cols per row), columns
// in input order (an act-order matrix's stored columns go back where input_order says).
void rows_to_bf16(const WeightTensor& w, int64_t begin, int64_t end, uint16_t* dst) {
  const quant::DequantizeRowFn dequantize = quant::dequantizer(w.type);
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = begin; r < end; ++r) {
    dequantize(w.row(w.stored_row(r)), row.data(), w.cols);
    uint16_t* out = dst + (r - begin) * w.cols;
    if (w.input_order != nullptr) {
      for (int64_t c = 0; c < w.cols; ++c) out[w.input_order[c]] = fp32_to_bf16(row[c]);
    } else {
      for (int64_t c = 0; c < w.cols; ++c) out[c] = fp32_to_bf16(row[c]);
    }
  }
}

// Where one matrix (or one part of Q|K|V, gate|up) goes: its data and, by format, its scales
// (FP8) or groups (INT4, INT8: 2^group_shift columns each).
struct MatrixPart {
  uint8_t* data = nullptr;
  float* scales = nullptr;
  uint32_t* groups = nullptr;
  int32_t group_shift = 5;
};

class Uploader {
 public:
  Uploader(uint64_t total, const std::function<void(uint64_t, uint64_t)>& progress)
      : total_(total), progress_(progress) {}

  // Copies matrix w (as BF16, rows in computing order) to dst. BF16 and F16 go straight from
  // the mapping (F16 then converted in place on the device), reordered rows as strided copies;
  // other types are converted on all cores in chunks through a pinned staging buffer.
  Status matrix(const WeightTensor& w, uint16_t* dst) {
    const size_t bytes = static_cast<size_t>(w.rows * w.cols) * 2;
    if ((w.type == DType::BF16 || w.type == DType::F16) && w.input_order == nullptr) {
      Status s = w.interleave_heads > 0 ? copy_interleaved(w, dst) : copy_chunked(w, dst, bytes);
      if (s && w.type == DType::F16) {
        f16_to_bf16_inplace(dst, w.rows * w.cols, nullptr);
        s = cuda_status(cudaGetLastError(), "fp16 -> bf16 on the device");
      }
      return s;
    }
    if (staging_.bytes() == 0) {
      if (Status s = staging_.allocate(kChunk, "pinned staging"); !s) return s;
    }
    const int64_t rows_per_chunk = std::max<int64_t>(1, static_cast<int64_t>(kChunk / (w.cols * 2)));
    const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
    for (int64_t r0 = 0; r0 < w.rows; r0 += rows_per_chunk) {
      const int64_t r1 = std::min(w.rows, r0 + rows_per_chunk);
      uint16_t* stage = staging_.get<uint16_t>();
      std::vector<std::thread> pool;
      const int64_t per = (r1 - r0 + threads - 1) / threads;
      for (int64_t b = r0; b < r1; b += per) {
        const int64_t e = std::min(r1, b + per);
        pool.emplace_back([&w, b, e, stage, r0] { rows_to_bf16(w, b, e, stage + (b - r0) * w.cols); });
      }
      for (std::thread& t : pool) t.join();
      const size_t size = static_cast<size_t>((r1 - r0) * w.cols) * 2;
      if (Status s = cuda_status(cudaMemcpy(dst + r0 * w.cols, stage, size, cudaMemcpyHostToDevice), "weight upload");
          !s) {
        return s;
      }
      advance(size);
    }
    return Status::ok();
  }

  // A 16-bit matrix as stored, in chunks so that progress moves on 16 GB models.
  Status copy_chunked(const WeightTensor& w, uint16_t* dst, size_t bytes) {
    const auto* src = static_cast<const uint8_t*>(w.data);
    for (size_t at = 0; at < bytes; at += kChunk) {
      const size_t size = std::min(kChunk, bytes - at);
      if (Status s =
              cuda_status(cudaMemcpy(reinterpret_cast<uint8_t*>(dst) + at, src + at, size, cudaMemcpyHostToDevice),
                          "weight upload");
          !s) {
        return s;
      }
      advance(size);
    }
    return Status::ok();
  }

  // A 16-bit Q or K matrix stored head half by head half (WeightTensor::interleave_heads): the
  // matrix goes to the device as stored (one large copy, at full link speed), then each stored
  // half of a head becomes every other computed row by a strided device-to-device copy.
  Status copy_interleaved(const WeightTensor& w, uint16_t* dst) {
    const size_t bytes = static_cast<size_t>(w.rows * w.cols) * 2;
    if (reorder_.bytes() < bytes) {
      if (Status s = reorder_.allocate(bytes, "Q / K reorder buffer"); !s) return s;
    }
    if (Status s = copy_chunked(w, reorder_.get<uint16_t>(), bytes); !s) return s;
    const int64_t head_dim = w.rows / w.interleave_heads, half = head_dim / 2;
    const size_t row_bytes = static_cast<size_t>(w.cols) * 2;
    const auto* src = reorder_.get<uint8_t>();
    auto* out = reinterpret_cast<uint8_t*>(dst);
    for (int64_t h = 0; h < w.interleave_heads; ++h) {
      for (int64_t j = 0; j < 2; ++j) {
        const uint8_t* from = src + static_cast<size_t>(h * head_dim + j * half) * row_bytes;
        uint8_t* to = out + static_cast<size_t>(h * head_dim + j) * row_bytes;
        if (Status s = cuda_status(cudaMemcpy2D(to, 2 * row_bytes, from, row_bytes, row_bytes,
                                                static_cast<size_t>(half), cudaMemcpyDeviceToDevice),
                                   "weight reorder");
            !s) {
          return s;
        }
      }
    }
    return Status::ok();
  }

  // Matrix w in format: BF16 as matrix() copies it, FP8 quantized on the device from a BF16
  // copy in scratch_ (rows are independent, so the parts of Q|K|V are quantized one by one), or
  // INT4 / INT8 repacked on the host (grouped(): columns as stored, act-order included).
  Status matrix_as(const WeightTensor& w, WeightFormat format, const MatrixPart& to) {
    if (format == WeightFormat::kBf16) return matrix(w, reinterpret_cast<uint16_t*>(to.data));
    if (format == WeightFormat::kInt4 || format == WeightFormat::kInt8) return grouped(w, format, to);
    const size_t bytes = static_cast<size_t>(w.rows * w.cols) * 2;
    if (scratch_.bytes() < bytes) {
      if (Status s = scratch_.allocate(bytes, "FP8 quantization buffer"); !s) return s;
    }
    if (Status s = matrix(w, scratch_.get<uint16_t>()); !s) return s;
    quantize_rows_e4m3(scratch_.get<uint16_t>(), w.rows, w.cols, w.cols, to.data, to.scales, nullptr);
    return cuda_status(cudaGetLastError(), "FP8 weight quantization");
  }

  // A GGUF block matrix into the INT4 or INT8 layout (quant/int4_groups.h, int8_groups.h),
  // rows in computing order, repacked on all cores in chunks through the pinned staging buffer:
  // codes first, then groups.
  Status grouped(const WeightTensor& w, WeightFormat format, const MatrixPart& to) {
    if (staging_.bytes() == 0) {
      if (Status s = staging_.allocate(kChunk, "pinned staging"); !s) return s;
    }
    const bool int4 = format == WeightFormat::kInt4;
    const int64_t group_cols = int64_t{1} << to.group_shift;
    uint8_t* codes = to.data;
    uint32_t* groups = to.groups;
    const size_t code_bytes = static_cast<size_t>(int4 ? w.cols / 2 : w.cols);
    const size_t group_words = static_cast<size_t>(w.cols / group_cols);
    // The groups start 256-aligned after the codes: leave room for that padding.
    const int64_t rows_per_chunk =
        std::max<int64_t>(1, static_cast<int64_t>((kChunk - 256) / (code_bytes + 4 * group_words)));
    const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 32);
    for (int64_t r0 = 0; r0 < w.rows; r0 += rows_per_chunk) {
      const int64_t r1 = std::min(w.rows, r0 + rows_per_chunk);
      auto* stage_codes = staging_.get<uint8_t>();
      auto* stage_groups =
          reinterpret_cast<uint32_t*>(stage_codes + align256(static_cast<size_t>(r1 - r0) * code_bytes));
      std::vector<std::thread> pool;
      std::atomic<int64_t> mismatched_row{-1};
      const int64_t per = (r1 - r0 + threads - 1) / threads;
      for (int64_t b = r0; b < r1; b += per) {
        const int64_t e = std::min(r1, b + per);
        pool.emplace_back([&, b, e] {
          for (int64_t r = b; r < e; ++r) {
            uint8_t* row_codes = stage_codes + (r - r0) * code_bytes;
            uint32_t* row_groups = stage_groups + (r - r0) * group_words;
            if (int4) {
              if (!quant::repack_int4_row(w.type, w.row(w.stored_row(r)), w.cols, row_codes, row_groups, group_cols)) {
                mismatched_row = r;
              }
            } else {
              quant::repack_int8_row(w.type, w.row(w.stored_row(r)), w.cols, group_cols, row_codes, row_groups);
            }
          }
        });
      }
      for (std::thread& t : pool) t.join();
      if (mismatched_row >= 0) {
        // WeightTensor::group_cols promised one (scale, min) a group; the loader's check makes
        // this unreachable, but a wrong layout would give wrong products silently.
        return Status::error("cuda: a 4-bit matrix's row " + std::to_string(mismatched_row.load()) +
                             " has two (scale, min) pairs in one " + std::to_string(group_cols) + "-column group");
      }
      const size_t rows = static_cast<size_t>(r1 - r0);
      Status s = cuda_status(
          cudaMemcpy(codes + r0 * code_bytes, stage_codes, rows * code_bytes, cudaMemcpyHostToDevice), "weight upload");
      if (s) {
        s = cuda_status(
            cudaMemcpy(groups + r0 * group_words, stage_groups, rows * group_words * 4, cudaMemcpyHostToDevice),
            "weight upload");
      }
      if (!s) return s;
      advance(rows * (code_bytes + 4 * group_words));
    }
    return Status::ok();
  }

  Status ints(const int32_t* values, size_t count, int32_t* dst) {
    const size_t size = count * sizeof(int32_t);
    Status s = cuda_status(cudaMemcpy(dst, values, size, cudaMemcpyHostToDevice), "upload");
    advance(size);
    return s;
  }

  Status floats(const std::vector<float>& values, float* dst) {
    if (values.empty()) return Status::ok();
    const size_t size = values.size() * sizeof(float);
    Status s = cuda_status(cudaMemcpy(dst, values.data(), size, cudaMemcpyHostToDevice), "upload");
    advance(size);
    return s;
  }

 private:
  void advance(uint64_t bytes) {
    done_ += bytes;
    if (progress_) progress_(std::min(done_, total_), total_);
  }
  static constexpr size_t kChunk = size_t{64} << 20;
  uint64_t total_;
  uint64_t done_ = 0;
  const std::function<void(uint64_t, uint64_t)>& progress_;
  PinnedBuffer staging_;
  DeviceBuffer reorder_;  // one Q or K matrix as stored, while it is reordered
  DeviceBuffer scratch_;  // FP8: one matrix in BF16, before it is quantized
};

}  // namespace

Status upload_weights(const ModelWeights& model, DeviceWeights& out, WeightFormat format,
                      const std::function<void(uint64_t, uint64_t)>& progress) {
  const ModelConfig& c = model.config();
  const size_t hidden = static_cast<size_t>(c.hidden_dim);
  const size_t q_rows = static_cast<size_t>(c.q_dim()), kv_rows = static_cast<size_t>(c.kv_dim());
  const size_t qkv_rows = q_rows + 2 * kv_rows;
  const size_t ffn = static_cast<size_t>(c.ffn_dim);
  const size_t vocab = static_cast<size_t>(c.vocab_size);
  const bool tied = model.tied_embeddings();
  if (format == WeightFormat::kFp8E4M3 && (hidden % 16 != 0 || ffn % 16 != 0 || q_rows % 16 != 0)) {
    return Status::error(
        "--quantization fp8: the FP8 GEMMs need the hidden, attention and FFN widths to be multiples "
        "of 16 (hidden " +
        std::to_string(hidden) + ", ffn " + std::to_string(ffn) + ")");
  }
  // What each matrix becomes (weight_layout_plan.h). Parts of one matrix read one input: one width.
  // Act-order parts of one matrix must share their column order to share the gathered input:
  // parts whose orders differ become BF16 in input order (rows_to_bf16), which needs none.
  // Parts whose checkpoint groups are wider than 32 columns keep one (scale, min) a group in INT4
  // (weight_layout_plan.h); FOLIO_INT4_GROUPS=32 keeps one a 32 columns, for side-by-side runs.
  const char* int4_groups = std::getenv("FOLIO_INT4_GROUPS");
  const bool merge_groups = int4_groups == nullptr || std::string_view(int4_groups) != "32";
  auto format_of = [&](std::initializer_list<const WeightTensor*> parts) {
    DType types[3];
    size_t n = 0;
    bool one_order = true;
    int64_t group_cols = merge_groups ? (*parts.begin())->group_cols : 0;
    for (const WeightTensor* w : parts) {
      types[n++] = w->type;
      one_order = one_order && w->input_order == (*parts.begin())->input_order;
      group_cols = std::gcd(group_cols, int64_t{w->group_cols});
      if (w->group_cols == 0) group_cols = 0;
    }
    const MatrixLayout layout =
        matrix_layout(format, std::span<const DType>(types, n), (*parts.begin())->cols, group_cols);
    const bool grouped = layout.format == WeightFormat::kInt4 || layout.format == WeightFormat::kInt8;
    return grouped && !one_order ? MatrixLayout{WeightFormat::kBf16, 5} : layout;
  };

  // Lay out the arena: offsets first, one allocation, then the copies. uploaded counts the
  // bytes that cross the bus, for progress.
  size_t size = 0;
  uint64_t uploaded = 0;
  auto take = [&](size_t bytes) {
    const size_t at = size;
    size += align256(bytes);
    return at;
  };
  auto take_bf16 = [&](size_t rows, size_t cols) {
    uploaded += rows * cols * 2;
    return take(rows * cols * 2);
  };
  auto take_floats = [&](size_t n) {
    uploaded += n * 4;
    return take(n * 4);
  };
  struct MatrixOffsets {
    WeightFormat format = WeightFormat::kBf16;
    int32_t group_shift = 5;
    size_t cols = 0;
    size_t data = 0, scales = SIZE_MAX, groups = SIZE_MAX, order = SIZE_MAX, position = SIZE_MAX;
  };
  // order: the parts' shared act-order column order (format_of saw to it), or null.
  auto take_matrix = [&](size_t rows, size_t cols, MatrixLayout choice, const int32_t* order) {
    const WeightFormat f = choice.format;
    MatrixOffsets at;
    at.format = f;
    at.group_shift = choice.group_shift;
    at.cols = cols;
    if (f == WeightFormat::kInt4 || f == WeightFormat::kInt8) {
      const size_t code_bytes = f == WeightFormat::kInt4 ? rows * cols / 2 : rows * cols;
      const size_t group_bytes = 4 * (rows * cols >> choice.group_shift);
      uploaded += code_bytes + group_bytes;
      at.data = take(code_bytes);
      at.groups = take(group_bytes);
      if (order != nullptr) {
        uploaded += 2 * cols * 4;
        at.order = take(cols * 4);
        at.position = take(cols * 4);
        out.ordered_matrices += 1;
        out.widest_ordered = std::max(out.widest_ordered, static_cast<int64_t>(cols));
      }
      (f == WeightFormat::kInt4 ? out.int4_matrices : out.int8_matrices) += 1;
      out.largest_grouped_elems = std::max(out.largest_grouped_elems, static_cast<int64_t>(rows * cols));
      return at;
    }
    uploaded += rows * cols * 2;
    at.data = take(rows * cols * (f == WeightFormat::kFp8E4M3 ? 1 : 2));
    if (f == WeightFormat::kFp8E4M3) at.scales = take(rows * 4);
    return at;
  };
  out.num_matrices = 0;
  out.int4_matrices = 0;
  out.int8_matrices = 0;
  out.largest_grouped_elems = 0;
  out.ordered_matrices = 0;
  out.widest_ordered = 0;
  const size_t embedding_at = take_bf16(vocab, hidden);
  const size_t output_at = tied ? embedding_at : take_bf16(vocab, hidden);
  const size_t output_norm_at = take_floats(hidden);
  // RoPE's inverse frequencies, one table per distinct RopeSpec of the layers (model/rope.h:
  // the CPU's own numbers).
  const std::vector<float>& factors = model.rope_freq_factors();
  if (model.architecture().layers.size() != model.layers().size()) {
    return Status::error("cuda: the architecture describes " + std::to_string(model.architecture().layers.size()) +
                         " layers, the weights have " + std::to_string(model.layers().size()));
  }
  std::vector<std::vector<float>> rope_tables;
  std::vector<size_t> rope_table_of_layer;
  for (const LayerSpec& spec : model.architecture().layers) {
    std::vector<float> table =
        rope_inverse_frequencies(spec.rope.rotary_dim, spec.rope.freq_base, factors.empty() ? nullptr : factors.data());
    auto found = std::find(rope_tables.begin(), rope_tables.end(), table);
    rope_table_of_layer.push_back(static_cast<size_t>(found - rope_tables.begin()));
    if (found == rope_tables.end()) rope_tables.push_back(std::move(table));
  }
  std::vector<size_t> rope_table_at;
  for (const std::vector<float>& table : rope_tables) rope_table_at.push_back(take_floats(table.size()));
  struct LayerOffsets {
    size_t attn_norm, qkv_bias, ffn_norm;
    size_t q_norm = SIZE_MAX, k_norm = SIZE_MAX, post_attn_norm = SIZE_MAX, post_ffn_norm = SIZE_MAX;
    MatrixOffsets qkv, o, gate_up, down;
  };
  std::vector<LayerOffsets> offsets;
  for (const LayerWeights& layer : model.layers()) {
    const bool bias = !layer.q_bias.empty() || !layer.k_bias.empty() || !layer.v_bias.empty();
    LayerOffsets o;
    o.attn_norm = take_floats(hidden);
    o.qkv = take_matrix(qkv_rows, hidden, format_of({&layer.q, &layer.k, &layer.v}), layer.q.input_order);
    o.qkv_bias = bias ? take_floats(qkv_rows) : SIZE_MAX;
    o.o = take_matrix(hidden, q_rows, format_of({&layer.o}), layer.o.input_order);
    o.ffn_norm = take_floats(hidden);
    o.gate_up = take_matrix(2 * ffn, hidden, format_of({&layer.gate, &layer.up}), layer.gate.input_order);
    o.down = take_matrix(hidden, ffn, format_of({&layer.down}), layer.down.input_order);
    if (!layer.q_norm.empty()) o.q_norm = take_floats(layer.q_norm.size());
    if (!layer.k_norm.empty()) o.k_norm = take_floats(layer.k_norm.size());
    if (!layer.post_attn_norm.empty()) o.post_attn_norm = take_floats(hidden);
    if (!layer.post_ffn_norm.empty()) o.post_ffn_norm = take_floats(hidden);
    offsets.push_back(o);
    out.num_matrices += 4;
  }
  if (Status s = out.arena.allocate(size, "allocating weights"); !s) return s;
  out.bytes = size;
  out.layer_format = format;
  auto* base = out.arena.get<uint8_t>();
  auto bf16_at = [&](size_t at) { return reinterpret_cast<uint16_t*>(base + at); };
  auto f32_at = [&](size_t at) { return reinterpret_cast<float*>(base + at); };
  auto u32_at = [&](size_t at) { return reinterpret_cast<uint32_t*>(base + at); };
  auto matrix_at = [&](const MatrixOffsets& at) {
    return DeviceMatrix{at.format,
                        base + at.data,
                        at.scales == SIZE_MAX ? nullptr : f32_at(at.scales),
                        at.groups == SIZE_MAX ? nullptr : u32_at(at.groups),
                        at.group_shift,
                        at.order == SIZE_MAX ? nullptr : reinterpret_cast<const int32_t*>(base + at.order),
                        at.position == SIZE_MAX ? nullptr : reinterpret_cast<const int32_t*>(base + at.position)};
  };
  // Rows [row, ...) of matrix m: the start of one part of Q|K|V or gate|up.
  auto part = [&](const MatrixOffsets& at, size_t row) {
    MatrixPart p;
    if (at.format == WeightFormat::kInt4 || at.format == WeightFormat::kInt8) {
      p.data = base + at.data + row * (at.format == WeightFormat::kInt4 ? at.cols / 2 : at.cols);
      p.groups = u32_at(at.groups) + (row * at.cols >> at.group_shift);
      p.group_shift = at.group_shift;
      return p;
    }
    p.data = base + at.data + row * at.cols * (at.format == WeightFormat::kFp8E4M3 ? 1 : 2);
    if (at.scales != SIZE_MAX) p.scales = f32_at(at.scales) + row;
    return p;
  };

  Uploader up(uploaded, progress);
  // An act-order matrix's column order and its inverse, uploaded once beside its codes.
  std::vector<int32_t> position;
  auto order = [&](const WeightTensor& first, const MatrixOffsets& at) {
    if (at.order == SIZE_MAX) return Status::ok();
    position.assign(at.cols, 0);
    for (size_t c = 0; c < at.cols; ++c) position[static_cast<size_t>(first.input_order[c])] = static_cast<int32_t>(c);
    if (Status s = up.ints(first.input_order, at.cols, reinterpret_cast<int32_t*>(base + at.order)); !s) return s;
    return up.ints(position.data(), at.cols, reinterpret_cast<int32_t*>(base + at.position));
  };
  out.embedding = bf16_at(embedding_at);
  out.output = DeviceMatrix{WeightFormat::kBf16, bf16_at(output_at), nullptr};
  out.output_norm = f32_at(output_norm_at);
  Status s = up.matrix(model.token_embedding(), bf16_at(embedding_at));
  if (s && !tied) s = up.matrix(model.output(), bf16_at(output_at));
  if (s) s = up.floats(model.output_norm(), f32_at(output_norm_at));
  for (size_t i = 0; s && i < rope_tables.size(); ++i) s = up.floats(rope_tables[i], f32_at(rope_table_at[i]));
  out.layers.clear();
  for (size_t i = 0; s && i < model.layers().size(); ++i) {
    const LayerWeights& w = model.layers()[i];
    const LayerOffsets& o = offsets[i];
    DeviceLayer d;
    d.attn_norm = f32_at(o.attn_norm);
    d.rope_inv_freq = f32_at(rope_table_at[rope_table_of_layer[i]]);
    d.qkv = matrix_at(o.qkv);
    d.o = matrix_at(o.o);
    d.ffn_norm = f32_at(o.ffn_norm);
    d.gate_up = matrix_at(o.gate_up);
    d.down = matrix_at(o.down);
    auto upload = [&](const WeightTensor& tensor, const MatrixOffsets& at, size_t row) {
      return up.matrix_as(tensor, at.format, part(at, row));
    };
    // One step at a time: the first failure stops the layer.
    const std::function<Status()> steps[] = {
        [&] { return up.floats(w.attn_norm, f32_at(o.attn_norm)); },
        [&] { return order(w.q, o.qkv); },
        [&] { return order(w.o, o.o); },
        [&] { return order(w.gate, o.gate_up); },
        [&] { return order(w.down, o.down); },
        [&] { return upload(w.q, o.qkv, 0); },
        [&] { return upload(w.k, o.qkv, q_rows); },
        [&] { return upload(w.v, o.qkv, q_rows + kv_rows); },
        [&] { return upload(w.o, o.o, 0); },
        [&] { return up.floats(w.ffn_norm, f32_at(o.ffn_norm)); },
        [&] { return upload(w.gate, o.gate_up, 0); },
        [&] { return upload(w.up, o.gate_up, ffn); },
        [&] { return upload(w.down, o.down, 0); },
    };
    for (const std::function<Status()>& step : steps) {
      if (s = step(); !s) break;
    }
    // Gemma's norms, where the layer has them.
    const std::pair<const std::vector<float>*, size_t> norms[] = {{&w.q_norm, o.q_norm},
                                                                  {&w.k_norm, o.k_norm},
                                                                  {&w.post_attn_norm, o.post_attn_norm},
                                                                  {&w.post_ffn_norm, o.post_ffn_norm}};
    for (const auto& [values, at] : norms) {
      if (s && at != SIZE_MAX) s = up.floats(*values, f32_at(at));
    }
    if (o.q_norm != SIZE_MAX) d.q_norm = f32_at(o.q_norm);
    if (o.k_norm != SIZE_MAX) d.k_norm = f32_at(o.k_norm);
    if (o.post_attn_norm != SIZE_MAX) d.post_attn_norm = f32_at(o.post_attn_norm);
    if (o.post_ffn_norm != SIZE_MAX) d.post_ffn_norm = f32_at(o.post_ffn_norm);
    if (s && o.qkv_bias != SIZE_MAX) {
      // Missing parts of a partial bias are zeros.
      std::vector<float> bias(qkv_rows, 0.0f);
      std::copy(w.q_bias.begin(), w.q_bias.end(), bias.begin());
      std::copy(w.k_bias.begin(), w.k_bias.end(), bias.begin() + c.q_dim());
      std::copy(w.v_bias.begin(), w.v_bias.end(), bias.begin() + c.q_dim() + c.kv_dim());
      s = up.floats(bias, f32_at(o.qkv_bias));
      d.qkv_bias = f32_at(o.qkv_bias);
    }
    out.layers.push_back(d);
  }
  // The quantization kernels ran on the legacy stream; their faults surface here.
  if (s && format == WeightFormat::kFp8E4M3) s = cuda_status(cudaDeviceSynchronize(), "FP8 weight quantization");
  return s;
}

}  // namespace folio::cuda
