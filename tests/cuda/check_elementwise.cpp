// Checks of the row ops against the CPU backend (float32) or exact host math.
//
// Tolerances: a bf16 output carries a rounding of at most half an ulp (2^-9 relative) of the
// device's fp32 value, which itself differs from the CPU's in the last fp32 bits, so a result
// can land one bf16 ulp away: rtol = 2^-8. fp16 outputs (q, K, V): rtol = 2^-10 (one fp16
// ulp) plus a small atol for values that rotation cancels to near zero.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/kernels/kernels.h"
#include "check_util.h"
#include "core/fp16.h"
#include "model/rope.h"

namespace folio::cuda::check {
namespace {

constexpr double kBf16Rtol = 1.0 / 256;
constexpr double kHalfRtol = 1.0 / 1024;

std::vector<float> random_floats(std::mt19937_64& rng, size_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

template <class T>
std::vector<double> widen(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}
std::vector<double> widen_bf16(const std::vector<uint16_t>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = from_bf16(v[i]);
  return out;
}
std::vector<double> widen_half(const std::vector<uint16_t>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = from_half(v[i]);
  return out;
}

cpu::CpuBackend& cpu_backend() {
  static cpu::CpuBackend backend(0, cpu::detect_isa(), cpu::ActivationPrecision::kFloat32);
  return backend;
}

void check_embed(const Options&, std::mt19937_64& rng) {
  const int64_t vocab = 1000;
  for (int64_t hidden : {576, 4096}) {
    for (int64_t n : {1, 37, 256}) {
      std::vector<uint16_t> table(vocab * hidden);
      const std::vector<float> values = random_floats(rng, table.size(), 1.0f);
      for (size_t i = 0; i < table.size(); ++i) table[i] = to_bf16(values[i]);
      std::vector<int32_t> tokens(n);
      std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
      for (int32_t& t : tokens) t = pick(rng);
      if (n > 3) tokens[1] = -5, tokens[2] = static_cast<int32_t>(vocab);  // out of range -> zeros
      DeviceBuffer<uint16_t> d_table(table);
      DeviceBuffer<int32_t> d_tokens(tokens);
      DeviceBuffer<float> d_out(n * hidden);
      d_out.poison();
      const double ms =
          time_ms([&] { embed_rows(d_table.get(), vocab, hidden, d_tokens.get(), n, d_out.get(), nullptr); }, 0, 1);
      sync_or_die("embed_rows");
      std::vector<double> ref(n * hidden, 0.0);
      for (int64_t t = 0; t < n; ++t) {
        if (tokens[t] < 0 || tokens[t] >= vocab) continue;
        for (int64_t i = 0; i < hidden; ++i) ref[t * hidden + i] = from_bf16(table[tokens[t] * hidden + i]);
      }
      report(outcome_of("embed_rows", "n=" + std::to_string(n) + " hidden=" + std::to_string(hidden),
                        widen(d_out.download()), ref, 0.0, 0.0, ms));
    }
  }
}

void check_rms_norm(const Options& opt, std::mt19937_64& rng) {
  for (int64_t dim : {576, 4096, 8192, 16384}) {
    for (int64_t n : {1, 5, 128}) {
      for (bool with_add : {false, true}) {
        const std::vector<float> x = random_floats(rng, n * dim, 2.0f);
        const std::vector<float> add = random_floats(rng, n * dim, 1.0f);
        const std::vector<float> weight = random_floats(rng, dim, 1.0f);
        const float eps = 1e-5f;
        std::vector<float> summed = x;
        if (with_add) cpu_backend().add(summed.data(), add.data(), n * dim);
        std::vector<float> ref(n * dim);
        cpu_backend().rms_norm(summed.data(), weight.data(), ref.data(), n, dim, eps);
        const std::string shape = "n=" + std::to_string(n) + " dim=" + std::to_string(dim) + (with_add ? " +add" : "");
        for (bool bf16 : {true, false}) {
          DeviceBuffer<float> d_x(x), d_add(add), d_w(weight);
          DeviceBuffer<uint16_t> d_out16(n * dim);
          DeviceBuffer<float> d_out32(n * dim);
          d_out16.poison();
          d_out32.poison();
          const double ms = time_ms(
              [&] {
                if (bf16)
                  rms_norm(d_x.get(), with_add ? d_add.get() : nullptr, d_w.get(), d_out16.get(), n, dim, eps, nullptr);
                else
                  rms_norm_f32(d_x.get(), with_add ? d_add.get() : nullptr, d_w.get(), d_out32.get(), n, dim, eps,
                               nullptr);
              },
              0, 1);
          sync_or_die("rms_norm");
          if (bf16) {
            report(
                outcome_of("rms_norm(bf16)", shape, widen_bf16(d_out16.download()), widen(ref), 1e-6, kBf16Rtol, ms));
          } else {
            report(outcome_of("rms_norm_f32", shape, widen(d_out32.download()), widen(ref), 1e-6, 2e-6, ms));
          }
          // The residual write-back is one fp32 add: exact.
          report(outcome_of(bf16 ? "rms_norm(bf16).residual" : "rms_norm_f32.residual", shape, widen(d_x.download()),
                            widen(summed), 0.0, 0.0));
        }
        if (opt.quick) break;
      }
    }
  }
}

void check_swiglu(const Options& opt, std::mt19937_64& rng) {
  for (int64_t ffn : {1536, 14336}) {
    for (int64_t n : {1, 33, 256}) {
      if (opt.quick && n == 256) continue;
      const std::vector<float> gate_up = random_floats(rng, n * 2 * ffn, 3.0f);
      std::vector<float> gate(n * ffn), up(n * ffn), ref(n * ffn);
      for (int64_t r = 0; r < n; ++r) {
        std::memcpy(&gate[r * ffn], &gate_up[r * 2 * ffn], ffn * sizeof(float));
        std::memcpy(&up[r * ffn], &gate_up[r * 2 * ffn + ffn], ffn * sizeof(float));
      }
      cpu_backend().swiglu(gate.data(), up.data(), ref.data(), n * ffn);
      DeviceBuffer<float> d_in(gate_up);
      DeviceBuffer<uint16_t> d_out(n * ffn);
      d_out.poison();
      const double ms = time_ms([&] { swiglu(d_in.get(), n, ffn, d_out.get(), nullptr); }, 0, 1);
      sync_or_die("swiglu");
      report(outcome_of("swiglu", "n=" + std::to_string(n) + " ffn=" + std::to_string(ffn),
                        widen_bf16(d_out.download()), widen(ref), 1e-6, kBf16Rtol, ms));
    }
  }
}

struct RopeCase {
  int32_t num_heads, num_kv_heads, head_dim, rotary_dim;
  RopeStyle style;
  bool bias, factors;
  float position_scale;
};

void check_rope_write_kv(const Options& opt, std::mt19937_64& rng) {
  const RopeCase cases[] = {
      {9, 3, 64, 64, RopeStyle::kAdjacentPairs, false, false, 1.0f},    // SmolLM2
      {32, 8, 128, 128, RopeStyle::kAdjacentPairs, false, true, 1.0f},  // Llama 3 (freq factors)
      {14, 2, 64, 64, RopeStyle::kHalves, true, false, 1.0f},           // Qwen2-like, bias
      {8, 8, 128, 64, RopeStyle::kHalves, false, false, 0.5f},          // partial rotary, scaling
      {4, 2, 128, 96, RopeStyle::kAdjacentPairs, true, false, 1.0f},    // partial rotary
  };
  for (const RopeCase& c : cases) {
    for (int32_t n : {1, 19, 300}) {
      if (opt.quick && n == 300) continue;
      const int32_t q_dim = c.num_heads * c.head_dim;
      const int32_t kv_dim = c.num_kv_heads * c.head_dim;
      const int32_t width = q_dim + 2 * kv_dim;
      const std::vector<float> qkv = random_floats(rng, static_cast<size_t>(n) * width, 1.0f);
      const std::vector<float> bias = random_floats(rng, width, 0.5f);
      std::vector<float> factors(c.rotary_dim / 2);
      for (size_t i = 0; i < factors.size(); ++i) factors[i] = 1.0f + static_cast<float>(i % 7);
      std::vector<int32_t> positions(n), slots(n);
      const int32_t block_size = 16, num_blocks = 64;
      std::uniform_int_distribution<int32_t> pos(0, 40000);
      std::vector<int32_t> all_slots(block_size * num_blocks);
      for (size_t i = 0; i < all_slots.size(); ++i) all_slots[i] = static_cast<int32_t>(i);
      std::shuffle(all_slots.begin(), all_slots.end(), rng);
      for (int32_t t = 0; t < n; ++t) {
        positions[t] = pos(rng);
        slots[t] = all_slots[t];
      }
      if (n > 2) slots[n / 2] = -1;  // padding token: no K/V write

      // CPU: bias, rope, write_kv into a cache pre-filled with the same poison.
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
      RopeParams params{c.style, c.rotary_dim, 500000.0f, c.position_scale, c.factors ? factors.data() : nullptr};
      cpu_backend().rope(q.data(), positions, c.num_heads, c.head_dim, params);
      cpu_backend().rope(k.data(), positions, c.num_kv_heads, c.head_dim, params);
      const size_t cache_elems = static_cast<size_t>(num_blocks) * block_size * kv_dim;
      std::vector<uint16_t> ref_k(cache_elems, 0xffff), ref_v(cache_elems, 0xffff);
      KvLayerView ref_cache{reinterpret_cast<uint8_t*>(ref_k.data()),
                            reinterpret_cast<uint8_t*>(ref_v.data()),
                            num_blocks,
                            block_size,
                            c.num_kv_heads,
                            c.head_dim};
      std::vector<int32_t> written_slots;
      std::vector<float> wk, wv;
      for (int32_t t = 0; t < n; ++t) {
        if (slots[t] < 0) continue;
        written_slots.push_back(slots[t]);
        wk.insert(wk.end(), k.begin() + static_cast<size_t>(t) * kv_dim,
                  k.begin() + static_cast<size_t>(t + 1) * kv_dim);
        wv.insert(wv.end(), v.begin() + static_cast<size_t>(t) * kv_dim,
                  v.begin() + static_cast<size_t>(t + 1) * kv_dim);
      }
      cpu_backend().write_kv(ref_cache, wk.data(), wv.data(), written_slots);
      std::vector<double> ref_q(q.size());
      for (size_t i = 0; i < q.size(); ++i) ref_q[i] = from_half(to_half(q[i]));

      // The inverse-frequency table the executor uploads at load (model/rope.h).
      DeviceBuffer<float> d_qkv(qkv), d_bias(bias),
          d_inv_freq(rope_inverse_frequencies(c.rotary_dim, 500000.0f, c.factors ? factors.data() : nullptr));
      DeviceBuffer<int32_t> d_pos(positions), d_slots(slots);
      DeviceBuffer<uint16_t> d_q(q.size()), d_k(cache_elems), d_v(cache_elems);
      d_q.poison();
      d_k.poison();
      d_v.poison();
      KvLayerView cache{reinterpret_cast<uint8_t*>(d_k.get()),
                        reinterpret_cast<uint8_t*>(d_v.get()),
                        num_blocks,
                        block_size,
                        c.num_kv_heads,
                        c.head_dim};
      DeviceRope rope{c.style, c.rotary_dim, c.position_scale, d_inv_freq.get()};
      const double ms = time_ms(
          [&] {
            rope_write_kv(d_qkv.get(), c.bias ? d_bias.get() : nullptr, d_pos.get(), d_slots.get(), n, c.num_heads,
                          rope, d_q.get(), cache, nullptr);
          },
          0, 1);
      sync_or_die("rope_write_kv");
      const std::string shape = "n=" + std::to_string(n) + " h=" + std::to_string(c.num_heads) + "/" +
                                std::to_string(c.num_kv_heads) + " d=" + std::to_string(c.head_dim) +
                                " rot=" + std::to_string(c.rotary_dim) +
                                (c.style == RopeStyle::kHalves ? " halves" : " pairs") + (c.bias ? " bias" : "") +
                                (c.factors ? " factors" : "");
      // Rope of a unit-scale vector: absolute error up to ~1e-6 * |x| from sin/cos ulps,
      // then fp16 rounding.
      report(outcome_of("rope_write_kv.q", shape, widen_half(d_q.download()), ref_q, 2e-3, kHalfRtol, ms));
      report(
          outcome_of("rope_write_kv.cache_k", shape, widen_half(d_k.download()), widen_half(ref_k), 2e-3, kHalfRtol));
      report(outcome_of("rope_write_kv.cache_v", shape, widen_half(d_v.download()), widen_half(ref_v), 0.0, 0.0));
    }
  }
}

// Every fp16 bit pattern through the in-place conversion F16 weights get on upload: equal, bit
// for bit, to the host's fp32_to_bf16(fp16_to_fp32(x)) (NaNs: any NaN).
void check_f16_to_bf16(const Options&, std::mt19937_64&) {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = static_cast<uint16_t>(i);
  DeviceBuffer<uint16_t> d(all);
  const double ms = time_ms([&] { f16_to_bf16_inplace(d.get(), 65536, nullptr); }, 0, 1);
  sync_or_die("f16_to_bf16_inplace");
  const std::vector<uint16_t> got = d.download();
  int64_t wrong = 0;
  for (uint32_t i = 0; i < 65536; ++i) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(i));
    const uint16_t want = fp32_to_bf16(f);
    const bool nan = std::isnan(f) && std::isnan(from_bf16(got[i]));
    if (got[i] != want && !nan) ++wrong;
  }
  report_flag("f16_to_bf16_inplace", "all 65536 fp16 values", wrong == 0,
              std::to_string(wrong) + " differ from the host conversion; " + std::to_string(ms) + " ms");
}

// Gemma's row ops (gemma_row_ops.cu) against the CPU backend's.
void check_geglu_tanh(const Options& opt, std::mt19937_64& rng) {
  for (int64_t ffn : {2048, 6912}) {
    for (int64_t n : {1, 33, 256}) {
      if (opt.quick && n == 256) continue;
      const std::vector<float> gate_up = random_floats(rng, n * 2 * ffn, 3.0f);
      std::vector<float> gate(n * ffn), up(n * ffn), ref(n * ffn);
      for (int64_t r = 0; r < n; ++r) {
        std::memcpy(&gate[r * ffn], &gate_up[r * 2 * ffn], ffn * sizeof(float));
        std::memcpy(&up[r * ffn], &gate_up[r * 2 * ffn + ffn], ffn * sizeof(float));
      }
      cpu_backend().geglu_tanh(gate.data(), up.data(), ref.data(), n * ffn);
      DeviceBuffer<float> d_in(gate_up);
      DeviceBuffer<uint16_t> d_out(n * ffn);
      d_out.poison();
      const double ms = time_ms([&] { geglu_tanh(d_in.get(), n, ffn, d_out.get(), nullptr); }, 0, 1);
      sync_or_die("geglu_tanh");
      report(outcome_of("geglu_tanh", "n=" + std::to_string(n) + " ffn=" + std::to_string(ffn),
                        widen_bf16(d_out.download()), widen(ref), 1e-6, kBf16Rtol, ms));
    }
  }
}

// QK norm: every q and k head of the fp32 Q|K|V rows normed in place, v untouched (exact).
void check_rms_norm_heads(const Options&, std::mt19937_64& rng) {
  struct Case {
    int32_t heads, kv_heads, head_dim;
  };
  for (const Case c : {Case{4, 1, 256}, Case{4, 1, 32}, Case{8, 4, 128}}) {
    for (int64_t n : {1, 77}) {
      const int64_t q_dim = int64_t{c.heads} * c.head_dim, kv_dim = int64_t{c.kv_heads} * c.head_dim;
      const int64_t width = q_dim + 2 * kv_dim;
      const std::vector<float> qkv = random_floats(rng, n * width, 2.0f);
      const std::vector<float> q_weight = random_floats(rng, c.head_dim, 1.0f);
      const std::vector<float> k_weight = random_floats(rng, c.head_dim, 1.0f);
      const float eps = 1e-6f;
      std::vector<float> ref = qkv;
      for (int64_t t = 0; t < n; ++t) {
        float* row = ref.data() + t * width;
        cpu_backend().rms_norm(row, q_weight.data(), row, c.heads, c.head_dim, eps);
        cpu_backend().rms_norm(row + q_dim, k_weight.data(), row + q_dim, c.kv_heads, c.head_dim, eps);
      }
      DeviceBuffer<float> d_qkv(qkv), d_qw(q_weight), d_kw(k_weight);
      const double ms = time_ms(
          [&] {
            d_qkv.upload(qkv);
            rms_norm_heads(d_qkv.get(), d_qw.get(), d_kw.get(), n, c.heads, c.kv_heads, c.head_dim, eps, nullptr);
          },
          0, 1);
      sync_or_die("rms_norm_heads");
      report(outcome_of("rms_norm_heads",
                        "n=" + std::to_string(n) + " h=" + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                            " d=" + std::to_string(c.head_dim),
                        widen(d_qkv.download()), widen(ref), 1e-6, 2e-6, ms));
    }
  }
}

// Post norm: residual += rms_norm(proj) * weight, all fp32.
void check_rms_norm_into_residual(const Options&, std::mt19937_64& rng) {
  for (int64_t dim : {640, 1152, 4096}) {
    for (int64_t n : {1, 5, 128}) {
      const std::vector<float> x = random_floats(rng, n * dim, 2.0f);
      const std::vector<float> proj = random_floats(rng, n * dim, 3.0f);
      const std::vector<float> weight = random_floats(rng, dim, 1.0f);
      const float eps = 1e-6f;
      std::vector<float> normed(n * dim), ref = x;
      cpu_backend().rms_norm(proj.data(), weight.data(), normed.data(), n, dim, eps);
      cpu_backend().add(ref.data(), normed.data(), n * dim);
      DeviceBuffer<float> d_x(x), d_proj(proj), d_w(weight);
      rms_norm_into_residual(d_x.get(), d_proj.get(), d_w.get(), n, dim, eps, nullptr);
      sync_or_die("rms_norm_into_residual");
      report(outcome_of("rms_norm_into_residual", "n=" + std::to_string(n) + " dim=" + std::to_string(dim),
                        widen(d_x.download()), widen(ref), 1e-5, 2e-6));
      report(outcome_of("rms_norm_into_residual.proj", "n=" + std::to_string(n) + " dim=" + std::to_string(dim),
                        widen(d_proj.download()), widen(proj), 0.0, 0.0));
    }
  }
}

// Gemma's embedding scale, sqrt(hidden), applied in fp32 as the CPU does.
void check_embed_scaled(const Options&, std::mt19937_64& rng) {
  const int64_t vocab = 300, hidden = 640, n = 19;
  const float scale = std::sqrt(static_cast<float>(hidden));
  std::vector<uint16_t> table(vocab * hidden);
  const std::vector<float> values = random_floats(rng, table.size(), 0.05f);
  for (size_t i = 0; i < table.size(); ++i) table[i] = to_bf16(values[i]);
  std::vector<int32_t> tokens(n);
  std::uniform_int_distribution<int32_t> pick(0, static_cast<int32_t>(vocab - 1));
  for (int32_t& t : tokens) t = pick(rng);
  DeviceBuffer<uint16_t> d_table(table);
  DeviceBuffer<int32_t> d_tokens(tokens);
  DeviceBuffer<float> d_out(n * hidden);
  d_out.poison();
  embed_rows(d_table.get(), vocab, hidden, d_tokens.get(), n, d_out.get(), nullptr, scale);
  sync_or_die("embed_rows(scaled)");
  std::vector<double> ref(n * hidden);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < hidden; ++i) ref[t * hidden + i] = from_bf16(table[tokens[t] * hidden + i]) * scale;
  }
  report(outcome_of("embed_rows(scaled)", "n=19 hidden=640 scale=sqrt(640)", widen(d_out.download()), ref, 0.0, 1e-7));
}

// A tensor-parallel rank's embedding: its table holds the vocabulary slice from `first`; other
// tokens give zero rows (the all-reduce over ranks fills them). Exact.
void check_embed_slice(const Options&, std::mt19937_64& rng) {
  const int64_t vocab = 300, first = 700, hidden = 576, n = 64;
  std::vector<uint16_t> table(vocab * hidden);
  const std::vector<float> values = random_floats(rng, table.size(), 1.0f);
  for (size_t i = 0; i < table.size(); ++i) table[i] = to_bf16(values[i]);
  std::vector<int32_t> tokens(n);
  std::uniform_int_distribution<int32_t> pick(0, 1199);
  for (int32_t& t : tokens) t = pick(rng);
  tokens[0] = 700, tokens[1] = 999, tokens[2] = 699, tokens[3] = 1000;  // the slice's edges
  DeviceBuffer<uint16_t> d_table(table);
  DeviceBuffer<int32_t> d_tokens(tokens);
  DeviceBuffer<float> d_out(n * hidden);
  d_out.poison();
  embed_rows(d_table.get(), vocab, hidden, d_tokens.get(), n, d_out.get(), nullptr, 1.0f, first);
  sync_or_die("embed_rows slice");
  std::vector<double> ref(n * hidden, 0.0);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t row = tokens[t] - first;
    if (row < 0 || row >= vocab) continue;
    for (int64_t i = 0; i < hidden; ++i) ref[t * hidden + i] = from_bf16(table[row * hidden + i]);
  }
  report(outcome_of("embed_rows(slice)", "vocab [700, 1000) of 1200", widen(d_out.download()), ref, 0.0, 0.0));
}

// The kernels that make an act-order matrix's input write it in the matrix's order
// (out_position, GemmPolicy::inputs_written_in_order): each output must be the plain run's,
// feature i moved to column position[i], bit for bit.
void check_ordered_outputs(const Options&, std::mt19937_64& rng) {
  auto permutation = [&](int64_t n) {
    std::vector<int32_t> order(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    std::shuffle(order.begin(), order.end(), rng);
    return order;
  };
  auto expect_moved = [&](const char* name, const std::string& shape, const std::vector<uint16_t>& plain,
                          const std::vector<uint16_t>& moved, const std::vector<int32_t>& position, int64_t width) {
    std::vector<double> want(plain.size()), got(moved.size());
    for (size_t r = 0; r < plain.size() / static_cast<size_t>(width); ++r) {
      for (int64_t i = 0; i < width; ++i) {
        const size_t row = r * static_cast<size_t>(width);
        want[row + static_cast<size_t>(position[static_cast<size_t>(i)])] =
            from_bf16(plain[row + static_cast<size_t>(i)]);
        got[row + static_cast<size_t>(i)] = from_bf16(moved[row + static_cast<size_t>(i)]);
      }
    }
    report(outcome_of(name, shape, got, want, 0.0, 0.0));
  };
  for (int64_t dim : {576, 4096}) {
    const int64_t n = 5;
    const std::vector<int32_t> position = permutation(dim);
    const std::vector<float> x = random_floats(rng, n * dim, 2.0f), weight = random_floats(rng, dim, 1.0f);
    DeviceBuffer<float> d_x(x), d_x2(x), d_w(weight);
    DeviceBuffer<int32_t> d_position(position);
    DeviceBuffer<uint16_t> d_plain(n * dim), d_moved(n * dim);
    d_moved.poison();
    rms_norm(d_x.get(), nullptr, d_w.get(), d_plain.get(), n, dim, 1e-5f, nullptr);
    rms_norm(d_x2.get(), nullptr, d_w.get(), d_moved.get(), n, dim, 1e-5f, nullptr, d_position.get());
    sync_or_die("rms_norm ordered");
    expect_moved("rms_norm(out_position)", "n=5 dim=" + std::to_string(dim), d_plain.download(), d_moved.download(),
                 position, dim);
  }
  for (int64_t ffn : {1536, 14336}) {
    const int64_t n = 3;
    const std::vector<int32_t> position = permutation(ffn);
    const std::vector<float> gate_up = random_floats(rng, n * 2 * ffn, 3.0f);
    DeviceBuffer<float> d_in(gate_up);
    DeviceBuffer<int32_t> d_position(position);
    DeviceBuffer<uint16_t> d_plain(n * ffn), d_moved(n * ffn);
    for (bool gelu : {false, true}) {
      d_moved.poison();
      if (gelu) {
        geglu_tanh(d_in.get(), n, ffn, d_plain.get(), nullptr);
        geglu_tanh(d_in.get(), n, ffn, d_moved.get(), nullptr, d_position.get());
      } else {
        swiglu(d_in.get(), n, ffn, d_plain.get(), nullptr);
        swiglu(d_in.get(), n, ffn, d_moved.get(), nullptr, d_position.get());
      }
      sync_or_die("activation ordered");
      expect_moved(gelu ? "geglu_tanh(out_position)" : "swiglu(out_position)", "n=3 ffn=" + std::to_string(ffn),
                   d_plain.download(), d_moved.download(), position, ffn);
    }
  }
}

Register r0("f16_to_bf16", check_f16_to_bf16);
Register r1("embed_rows", check_embed);
Register r2("rms_norm", check_rms_norm);
Register r3("swiglu", check_swiglu);
Register r4("rope_write_kv", check_rope_write_kv);
Register r5("geglu_tanh", check_geglu_tanh);
Register r6("rms_norm_heads", check_rms_norm_heads);
Register r7("rms_norm_into_residual", check_rms_norm_into_residual);
Register r8("embed_rows_scaled", check_embed_scaled);
Register r9("embed_rows_slice", check_embed_slice);
Register r10("ordered_outputs", check_ordered_outputs);

}  // namespace
}  // namespace folio::cuda::check
