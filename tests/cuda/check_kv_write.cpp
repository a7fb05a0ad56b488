// The quantizing K/V write (rope_write_kv into an int8 cache; fp8's rows wait in fp16 staging and
// are quantized by kv_seal_blocks, checked in check_kivi_write.cpp) against the CPU's
// write_kv (kv/kv_quant.h) on the same inputs: V rows (no rotation) and K rows at position 0
// (cos 0 = 1, sin 0 = 0: the rotation is exact on both) must be the same bytes, values and
// scale; K rows at other positions go through sin/cos that may differ by an ulp, so they must
// dequantize to within one quantization step. Padding slots (-1) are never written.
#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/kernels/kernels.h"
#include "check_util.h"
#include "kv/kv_quant.h"
#include "model/rope.h"

namespace folio::cuda::check {
namespace {

struct WriteCase {
  int32_t num_heads, num_kv_heads, head_dim;
  bool bias;
};

void check_quantized_write(const Options&, std::mt19937_64& rng) {
  static cpu::CpuBackend cpu(0, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  const WriteCase cases[] = {{9, 3, 64, false}, {32, 8, 128, false}, {14, 2, 64, true}};
  for (KvFormat format : {KvFormat::kInt8}) {
    for (const WriteCase& c : cases) {
      const int32_t n = 64, block_size = 16, num_blocks = 8;
      const int32_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
      const int32_t width = q_dim + 2 * kv_dim;
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> qkv(static_cast<size_t>(n) * width), bias(static_cast<size_t>(width));
      for (float& x : qkv) x = normal(rng);
      for (float& x : bias) x = 0.5f * normal(rng);
      for (int32_t t = 0; t < n; ++t) qkv[static_cast<size_t>(t) * width + q_dim + 5] *= 20.0f;  // an outlier channel
      std::vector<int32_t> positions(n), slots(n);
      std::vector<int32_t> order(block_size * num_blocks);
      for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
      std::shuffle(order.begin(), order.end(), rng);
      std::uniform_int_distribution<int32_t> pos(1, 30000);
      for (int32_t t = 0; t < n; ++t) {
        positions[t] = t % 2 == 0 ? 0 : pos(rng);
        slots[t] = t == 7 ? -1 : order[t];
      }
      // CPU: bias, rope (float32 backend), write_kv.
      std::vector<float> q(static_cast<size_t>(n) * q_dim), k(static_cast<size_t>(n) * kv_dim), v(k.size());
      for (int32_t t = 0; t < n; ++t) {
        for (int32_t i = 0; i < width; ++i) {
          const float x = qkv[static_cast<size_t>(t) * width + i] + (c.bias ? bias[i] : 0.0f);
          if (i < q_dim)
            q[static_cast<size_t>(t) * q_dim + i] = x;
          else if (i < q_dim + kv_dim)
            k[static_cast<size_t>(t) * kv_dim + i - q_dim] = x;
          else
            v[static_cast<size_t>(t) * kv_dim + i - q_dim - kv_dim] = x;
        }
      }
      const RopeParams params{RopeStyle::kAdjacentPairs, c.head_dim, 500000.0f, 1.0f, nullptr};
      cpu.rope(k.data(), positions, c.num_kv_heads, c.head_dim, params);
      const size_t bytes =
          static_cast<size_t>(num_blocks) * kv_block_bytes(format, block_size, c.num_kv_heads, c.head_dim);
      std::vector<uint8_t> ref_k(bytes, 0xab), ref_v(bytes, 0xab);
      const KvLayerView ref{ref_k.data(), ref_v.data(), num_blocks, block_size, c.num_kv_heads, c.head_dim, format};
      std::vector<int32_t> written;
      std::vector<float> wk, wv;
      for (int32_t t = 0; t < n; ++t) {
        if (slots[t] < 0) continue;
        written.push_back(slots[t]);
        wk.insert(wk.end(), k.begin() + static_cast<size_t>(t) * kv_dim,
                  k.begin() + static_cast<size_t>(t + 1) * kv_dim);
        wv.insert(wv.end(), v.begin() + static_cast<size_t>(t) * kv_dim,
                  v.begin() + static_cast<size_t>(t + 1) * kv_dim);
      }
      cpu.write_kv(ref, wk.data(), wv.data(), written);

      DeviceBuffer<float> d_qkv(qkv), d_bias(bias);
      DeviceBuffer<int32_t> d_pos(positions), d_slots(slots);
      DeviceBuffer<uint16_t> d_q(q.size()), d_k(bytes / 2), d_v(bytes / 2);
      FOLIO_CUDA_OK(cudaMemset(d_k.get(), 0xab, bytes));
      FOLIO_CUDA_OK(cudaMemset(d_v.get(), 0xab, bytes));
      const KvLayerView dev{reinterpret_cast<uint8_t*>(d_k.get()),
                            reinterpret_cast<uint8_t*>(d_v.get()),
                            num_blocks,
                            block_size,
                            c.num_kv_heads,
                            c.head_dim,
                            format};
      DeviceBuffer<float> d_inv_freq(rope_inverse_frequencies(c.head_dim, 500000.0f, nullptr));
      const DeviceRope rope{RopeStyle::kAdjacentPairs, c.head_dim, 1.0f, d_inv_freq.get()};
      rope_write_kv(d_qkv.get(), c.bias ? d_bias.get() : nullptr, d_pos.get(), d_slots.get(), n, c.num_heads, rope,
                    d_q.get(), dev, nullptr);
      sync_or_die("rope_write_kv (quantized)");
      std::vector<uint8_t> got_k(bytes), got_v(bytes);
      FOLIO_CUDA_OK(cudaMemcpy(got_k.data(), d_k.get(), bytes, cudaMemcpyDeviceToHost));
      FOLIO_CUDA_OK(cudaMemcpy(got_v.data(), d_v.get(), bytes, cudaMemcpyDeviceToHost));
      const KvLayerView got{got_k.data(), got_v.data(), num_blocks, block_size, c.num_kv_heads, c.head_dim, format};

      int64_t v_rows_differ = 0, k0_rows_differ = 0, k_rows_far = 0, rows = 0;
      double k_max_err = 0.0;
      std::vector<float> a(static_cast<size_t>(c.head_dim)), b(a.size());
      auto row_bytes_equal = [&](const uint8_t* x, const uint8_t* y, int64_t slot, int32_t h) {
        const size_t value = ref.value_offset(slot, h), scale = ref.scale_offset(slot, h);
        return std::equal(x + value, x + value + c.head_dim, y + value) &&
               std::equal(x + scale, x + scale + 4, y + scale);
      };
      for (int32_t t = 0; t < n; ++t) {
        if (slots[t] < 0) continue;
        for (int32_t h = 0; h < c.num_kv_heads; ++h, ++rows) {
          v_rows_differ += !row_bytes_equal(ref_v.data(), got_v.data(), slots[t], h);
          if (positions[t] == 0) {
            k0_rows_differ += !row_bytes_equal(ref_k.data(), got_k.data(), slots[t], h);
            continue;
          }
          kv_load_row(ref, 0, slots[t], h, a.data());
          kv_load_row(got, 0, slots[t], h, b.data());
          float amax = 0.0f;
          for (float x : a) amax = std::max(amax, std::fabs(x));
          bool far = false;
          for (size_t d = 0; d < a.size(); ++d) {
            const double err = std::fabs(static_cast<double>(a[d]) - b[d]);
            // One step: int8's amax / 127; E4M3's one code, |x| / 8 (3 mantissa bits) or the
            // subnormal step amax / 448 * 2^-9.
            const double allowed = format == KvFormat::kInt8
                                       ? amax / 127.0
                                       : std::max(std::fabs(static_cast<double>(a[d])) / 8.0, amax / 448.0 / 512.0);
            far = far || err > allowed * 1.01 + 1e-6;
            k_max_err = std::max(k_max_err, err);
          }
          k_rows_far += far;
        }
      }
      // Slot 7's token was padding: its slot (order[7]) must still hold the poison.
      const size_t pad = ref.value_offset(order[7], 0);
      const bool padding_untouched = got_k[pad] == 0xab && got_v[pad] == 0xab;
      const std::string shape = std::string(kv_format_name(format)) + " h=" + std::to_string(c.num_heads) + "/" +
                                std::to_string(c.num_kv_heads) + " d=" + std::to_string(c.head_dim) +
                                (c.bias ? " bias" : "");
      report_flag(
          "rope_write_kv.quantized_v_bytes", shape, v_rows_differ == 0,
          std::to_string(v_rows_differ) + " of " + std::to_string(rows) + " V rows differ from the CPU's bytes");
      report_flag("rope_write_kv.quantized_k_bytes_pos0", shape, k0_rows_differ == 0,
                  std::to_string(k0_rows_differ) + " K rows at position 0 differ from the CPU's bytes");
      report_flag("rope_write_kv.quantized_k_rotated", shape, k_rows_far == 0 && padding_untouched,
                  std::to_string(k_rows_far) + " rotated K rows off by more than one step (max abs " +
                      std::to_string(k_max_err) + ")" + (padding_untouched ? "" : "; a padding slot was written"));
    }
  }
}

Register r("rope_write_kv_quantized", check_quantized_write);

}  // namespace
}  // namespace folio::cuda::check
