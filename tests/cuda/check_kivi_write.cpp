// The write path of the residual formats (KIVI, fp8) on the device against the CPU's:
//   - rope_write_kv into a KIVI or fp8 cache writes fp16 rows into the staging blocks: V rows and K
//     rows at position 0 are the CPU's write_kv halves exactly, rotated K rows within one fp16
//     step (sin/cos may differ by an ulp); padding slots (-1) are never written;
//   - kv_seal_blocks writes the bytes kv_seal_block writes, block for block, on random and
//     adversarial staged data (outlier, constant and zero channels, +-65504, and for KIVI
//     infinities), and leaves every block it was not asked to seal (past *num_seals) untouched.
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

struct SealCase {
  int32_t num_kv_heads, head_dim, block_size;
};

// Staged values: normal, with per-channel outliers, constant and zero channels, and a few
// extreme values (+-65504, and +-inf where asked: KIVI's quantizer clamps them; an fp8 row's
// scale would be inf and its values NaN, which neither side defines).
std::vector<uint16_t> adversarial_staging(size_t rows, int32_t head_dim, std::mt19937_64& rng, bool infinities) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> any(0, 999);
  std::vector<uint16_t> out(rows * head_dim);
  for (size_t r = 0; r < rows; ++r) {
    for (int32_t c = 0; c < head_dim; ++c) {
      float x = normal(rng);
      if (c % 17 == 3) x *= 50.0f;  // outlier channel
      if (c % 29 == 5) x = 0.75f;   // constant channel
      if (c % 31 == 7) x = 0.0f;    // zero channel
      const int32_t dice = any(rng);
      if (dice == 0) x = 65504.0f;
      if (dice == 1) x = -65504.0f;
      if (dice == 2 && infinities) x = INFINITY;
      if (dice == 3 && infinities) x = -INFINITY;
      out[r * head_dim + c] = to_half(x);
    }
  }
  return out;
}

void check_seal(const Options&, std::mt19937_64& rng) {
  const SealCase cases[] = {{1, 64, 32}, {3, 64, 128}, {8, 128, 128}, {2, 128, 64}};
  for (KvFormat format : {KvFormat::kKivi4, KvFormat::kKivi2, KvFormat::kFp8E4M3}) {
    for (const SealCase& c : cases) {
      const int32_t num_blocks = 12, num_staging = 6, num_seals = 5;
      const size_t block_bytes = kv_block_bytes(format, c.block_size, c.num_kv_heads, c.head_dim);
      const size_t staging_rows = static_cast<size_t>(num_staging) * c.block_size * c.num_kv_heads;
      const bool infinities = kv_format_is_kivi(format);
      std::vector<uint16_t> sk = adversarial_staging(staging_rows, c.head_dim, rng, infinities);
      std::vector<uint16_t> sv = adversarial_staging(staging_rows, c.head_dim, rng, infinities);
      // Seals (block, staging): five valid, then two past *num_seals that must do nothing.
      std::vector<int32_t> blocks(num_blocks - 1);
      for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i) + 1;
      std::shuffle(blocks.begin(), blocks.end(), rng);
      std::vector<int32_t> seals;
      for (int32_t i = 0; i < num_seals + 2; ++i) {
        seals.push_back(blocks[static_cast<size_t>(i)]);
        seals.push_back(i % num_staging);
      }
      std::vector<uint8_t> ref_k(num_blocks * block_bytes, 0xab), ref_v(ref_k.size(), 0xab);
      KvLayerView ref{ref_k.data(), ref_v.data(), num_blocks, c.block_size, c.num_kv_heads, c.head_dim, format};
      ref.staging_k = sk.data();
      ref.staging_v = sv.data();
      ref.num_staging = num_staging;
      for (int32_t i = 0; i < num_seals; ++i) kv_seal_block(ref, seals[2 * i], seals[2 * i + 1]);

      DeviceBuffer<uint8_t> d_k(ref_k.size()), d_v(ref_v.size());
      FOLIO_CUDA_OK(cudaMemset(d_k.get(), 0xab, ref_k.size()));
      FOLIO_CUDA_OK(cudaMemset(d_v.get(), 0xab, ref_v.size()));
      DeviceBuffer<uint16_t> d_sk(sk), d_sv(sv);
      DeviceBuffer<int32_t> d_seals(seals), d_count(std::vector<int32_t>{num_seals});
      KvLayerView dev{d_k.get(), d_v.get(), num_blocks, c.block_size, c.num_kv_heads, c.head_dim, format};
      dev.staging_k = d_sk.get();
      dev.staging_v = d_sv.get();
      dev.num_staging = num_staging;
      const double ms =
          time_ms([&] { kv_seal_blocks(dev, d_seals.get(), d_count.get(), num_seals + 2, nullptr); }, 0, 1);
      sync_or_die("kv_seal_blocks");
      const std::vector<uint8_t> got_k = d_k.download(), got_v = d_v.download();
      size_t k_differ = 0, v_differ = 0;
      for (size_t i = 0; i < ref_k.size(); ++i) {
        k_differ += got_k[i] != ref_k[i];
        v_differ += got_v[i] != ref_v[i];
      }
      const std::string shape = std::string(kv_format_name(format)) + " kv_heads=" + std::to_string(c.num_kv_heads) +
                                " d=" + std::to_string(c.head_dim) + " bs=" + std::to_string(c.block_size);
      report_flag("kivi.seal_bytes", shape, k_differ == 0 && v_differ == 0,
                  std::to_string(k_differ) + " K and " + std::to_string(v_differ) + " V bytes of " +
                      std::to_string(ref_k.size()) + " differ from kv_seal_block (5 seals + 2 past the count)",
                  ms);
    }
  }
}

void check_staging_write_of(KvFormat format, std::mt19937_64& rng) {
  static cpu::CpuBackend cpu(0, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  const int32_t num_heads = 8, num_kv_heads = 2, head_dim = 128, n = 48, block_size = 32, num_staging = 4;
  const int32_t q_dim = num_heads * head_dim, kv_dim = num_kv_heads * head_dim, width = q_dim + 2 * kv_dim;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> qkv(static_cast<size_t>(n) * width), bias(static_cast<size_t>(width));
  for (float& x : qkv) x = normal(rng);
  for (float& x : bias) x = 0.5f * normal(rng);
  std::vector<int32_t> order(static_cast<size_t>(num_staging) * block_size);
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> positions(n), slots(n);
  std::uniform_int_distribution<int32_t> pos(1, 30000);
  for (int32_t t = 0; t < n; ++t) {
    positions[t] = t % 2 == 0 ? 0 : pos(rng);
    slots[t] = t == 5 ? -1 : order[t];
  }
  std::vector<float> k(static_cast<size_t>(n) * kv_dim), v(k.size());
  for (int32_t t = 0; t < n; ++t) {
    for (int32_t i = 0; i < kv_dim; ++i) {
      k[t * kv_dim + i] = qkv[t * width + q_dim + i] + bias[q_dim + i];
      v[t * kv_dim + i] = qkv[t * width + q_dim + kv_dim + i] + bias[q_dim + kv_dim + i];
    }
  }
  const RopeParams params{RopeStyle::kAdjacentPairs, head_dim, 500000.0f, 1.0f, nullptr};
  cpu.rope(k.data(), positions, num_kv_heads, head_dim, params);
  const size_t staging_elems = static_cast<size_t>(num_staging) * block_size * kv_dim;
  std::vector<uint16_t> ref_sk(staging_elems, 0xabab), ref_sv(staging_elems, 0xabab);
  std::vector<uint8_t> unused(kv_block_bytes(format, block_size, num_kv_heads, head_dim));
  KvLayerView ref{unused.data(), unused.data(), 1, block_size, num_kv_heads, head_dim, format};
  ref.staging_k = ref_sk.data();
  ref.staging_v = ref_sv.data();
  ref.num_staging = num_staging;
  std::vector<int32_t> written;
  std::vector<float> wk, wv;
  for (int32_t t = 0; t < n; ++t) {
    if (slots[t] < 0) continue;
    written.push_back(slots[t]);
    wk.insert(wk.end(), k.begin() + t * kv_dim, k.begin() + (t + 1) * kv_dim);
    wv.insert(wv.end(), v.begin() + t * kv_dim, v.begin() + (t + 1) * kv_dim);
  }
  cpu.write_kv(ref, wk.data(), wv.data(), written);

  DeviceBuffer<float> d_qkv(qkv), d_bias(bias);
  DeviceBuffer<int32_t> d_pos(positions), d_slots(slots);
  DeviceBuffer<uint16_t> d_q(static_cast<size_t>(n) * q_dim), d_sk(staging_elems), d_sv(staging_elems);
  DeviceBuffer<uint8_t> d_unused(unused.size());
  FOLIO_CUDA_OK(cudaMemset(d_sk.get(), 0xab, staging_elems * 2));
  FOLIO_CUDA_OK(cudaMemset(d_sv.get(), 0xab, staging_elems * 2));
  KvLayerView dev{d_unused.get(), d_unused.get(), 1, block_size, num_kv_heads, head_dim, format};
  dev.staging_k = d_sk.get();
  dev.staging_v = d_sv.get();
  dev.num_staging = num_staging;
  DeviceBuffer<float> d_inv_freq(rope_inverse_frequencies(head_dim, 500000.0f, nullptr));
  const DeviceRope rope{RopeStyle::kAdjacentPairs, head_dim, 1.0f, d_inv_freq.get()};
  rope_write_kv(d_qkv.get(), d_bias.get(), d_pos.get(), d_slots.get(), n, num_heads, rope, d_q.get(), dev, nullptr);
  sync_or_die("rope_write_kv (staging)");
  const std::vector<uint16_t> got_sk = d_sk.download(), got_sv = d_sv.download();
  size_t v_differ = 0, k0_differ = 0, k_far = 0, untouched_written = 0;
  for (size_t i = 0; i < staging_elems; ++i) {
    const int32_t slot = static_cast<int32_t>(i / kv_dim);
    const int32_t t = static_cast<int32_t>(std::find(slots.begin(), slots.end(), slot) - slots.begin());
    if (t == n) {  // no token wrote this slot (padding's slot included)
      untouched_written += got_sk[i] != 0xabab || got_sv[i] != 0xabab;
      continue;
    }
    v_differ += got_sv[i] != ref_sv[i];
    if (positions[t] == 0) {
      k0_differ += got_sk[i] != ref_sk[i];
    } else {
      const float a = from_half(ref_sk[i]), b = from_half(got_sk[i]);
      k_far += std::fabs(a - b) > std::fabs(a) / 1024.0f + 1e-6f;
    }
  }
  report_flag("kivi.staging_write", std::string(kv_format_name(format)) + " h=8/2 d=128 bs=32",
              v_differ == 0 && k0_differ == 0 && k_far == 0 && untouched_written == 0,
              std::to_string(v_differ) + " V and " + std::to_string(k0_differ) +
                  " position-0 K halves differ from the CPU's, " + std::to_string(k_far) +
                  " rotated K halves off by more than one fp16 step, " + std::to_string(untouched_written) +
                  " unwritten slots changed");
}

void check_staging_write(const Options&, std::mt19937_64& rng) {
  for (KvFormat format : {KvFormat::kKivi2, KvFormat::kFp8E4M3}) check_staging_write_of(format, rng);
}

Register r1("kivi.seal", check_seal);
Register r2("kivi.staging_write", check_staging_write);

}  // namespace
}  // namespace folio::cuda::check
