// Checks of the weight products: the BF16 -> E4M3 row quantizer against the CPU's conversion
// (byte for byte), the weight-streaming GEMV (BF16 and FP8 weights) and the FP8 cuBLASLt GEMM
// against float64 products of the same quantized values, accumulation into y (beta 1), and the
// batch invariance of the pinned policy with FP8 weights; the INT4 and INT8 (W4A16, W8A16)
// kernels against float64 products of the repacked weights (quant/int4_groups.h,
// int8_groups.h), their dequantization bit for bit against the host's.
//
// Tolerances: errors are divided by sum_i |w_i x_i| of their output (the scale of an fp32
// rounding error of the sum), so one bound covers every k. An fp32 sum of k terms in any order
// is within k * 2^-24 of it; random signs make it ~sqrt(k) * 2^-24 (~2^-17 at k = 16k): the
// GEMV's bound is 2^-15. The FP8 tensor cores accumulate in an internal format that cuBLASLt
// promotes to fp32 periodically (fast accumulation off): 2^-11.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>

#include <cublasLt.h>
#include <string>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/fp8_rows.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/grouped_wgmma_gemm.h"
#include "backend/cuda/int4_gemm.h"
#include "backend/cuda/int8_gemm.h"
#include "check_util.h"
#include "core/fp8.h"
#include "quant/formats.h"
#include "quant/int4_groups.h"
#include "quant/int8_groups.h"

namespace folio::cuda::check {
namespace {

std::vector<uint16_t> random_bf16(std::mt19937_64& rng, size_t n, float scale) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = to_bf16(dist(rng));
  return v;
}

// The CPU's definition of a quantized row (fp8_rows.h): bytes and scale.
void quantize_row_reference(const uint16_t* x, int64_t cols, uint8_t* out, float* scale) {
  float amax = 0.0f;
  for (int64_t i = 0; i < cols; ++i) amax = std::fmax(amax, std::fabs(from_bf16(x[i])));
  const float inv = amax > 0.0f ? kE4M3Max / amax : 0.0f;
  *scale = amax > 0.0f ? amax / kE4M3Max : 0.0f;
  for (int64_t i = 0; i < cols; ++i) out[i] = fp8_e4m3_from_float(from_bf16(x[i]) * inv);
}

// Quantized rows as the values they stand for (value(q) * scale), in float64.
std::vector<double> dequantized(const std::vector<uint16_t>& x, int64_t rows, int64_t cols) {
  std::vector<double> out(static_cast<size_t>(rows * cols));
  std::vector<uint8_t> q(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    float scale = 0.0f;
    quantize_row_reference(&x[static_cast<size_t>(r * cols)], cols, q.data(), &scale);
    for (int64_t c = 0; c < cols; ++c) {
      out[static_cast<size_t>(r * cols + c)] = static_cast<double>(fp8_e4m3_to_float(q[c])) * scale;
    }
  }
  return out;
}

std::vector<double> widened_bf16(const std::vector<uint16_t>& x) {
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = from_bf16(x[i]);
  return out;
}

// The outputs a check compares: every row when n <= 9, else rows 0, 1, n/2 and n-1; every
// column when the row's reference costs at most 2^22 products, else evenly spaced ones (the
// float64 reference of a 1024 x 4096 x 14336 product would take minutes).
std::vector<size_t> sampled_outputs(int64_t n, int64_t m, int64_t k) {
  std::vector<int64_t> rows;
  if (n <= 9) {
    for (int64_t r = 0; r < n; ++r) rows.push_back(r);
  } else {
    rows = {0, 1, n / 2, n - 1};
  }
  const int64_t stride = std::max<int64_t>(1, m * k >> 22);
  std::vector<size_t> out;
  for (int64_t r : rows) {
    for (int64_t j = 0; j < m; j += stride) out.push_back(static_cast<size_t>(r * m + j));
    if ((m - 1) % stride != 0) out.push_back(static_cast<size_t>(r * m + m - 1));
  }
  return out;
}

// Output o (= r * m + j) of y = beta * y0 + x w^T in float64, with sum |x_i w_i| (the error scale).
struct Reference {
  std::vector<double> value, scale;
};
Reference reference_product(const std::vector<double>& x, const std::vector<double>& w, const std::vector<float>& y0,
                            float beta, int64_t m, int64_t k, const std::vector<size_t>& outputs) {
  Reference ref;
  for (size_t o : outputs) {
    const int64_t r = static_cast<int64_t>(o) / m, j = static_cast<int64_t>(o) % m;
    double sum = 0.0, magnitude = 0.0;
    const double* xr = &x[static_cast<size_t>(r * k)];
    const double* wj = &w[static_cast<size_t>(j * k)];
    for (int64_t i = 0; i < k; ++i) {
      sum += xr[i] * wj[i];
      magnitude += std::fabs(xr[i] * wj[i]);
    }
    const double prior = beta != 0.0f ? static_cast<double>(beta) * y0[o] : 0.0;
    ref.value.push_back(sum + prior);
    ref.scale.push_back(magnitude + std::fabs(prior));
  }
  return ref;
}

Outcome scaled_outcome(const std::string& name, const std::string& shape, const std::vector<float>& got,
                       const std::vector<size_t>& outputs, const Reference& ref, double bound, double ms) {
  std::vector<double> g(outputs.size()), r(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const double s = std::max(ref.scale[i], 1e-30);
    g[i] = got[outputs[i]] / s;
    r[i] = ref.value[i] / s;
  }
  return outcome_of(name, shape, g, r, bound, 0.0, ms);
}

void check_fp8_rows(const Options& opt, std::mt19937_64& rng) {
  for (int64_t cols : {16, 576, 4096, 14336}) {
    for (int64_t rows : {1, 7, 300}) {
      if (opt.quick && rows == 300) continue;
      const int64_t ld = cols + (rows == 7 ? 8 : 0);  // a strided input too
      std::vector<uint16_t> x = random_bf16(rng, static_cast<size_t>(rows * ld), 1.0f);
      if (rows > 1) {
        std::fill(x.begin() + ld, x.begin() + ld + cols, uint16_t{0});                      // row 1 all zeros: scale 0
        x[static_cast<size_t>(2 * ld + 3 < rows * ld ? 2 * ld + 3 : 0)] = to_bf16(900.0f);  // an outlier
      }
      std::vector<uint8_t> want(static_cast<size_t>(rows * cols));
      std::vector<float> want_scales(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        quantize_row_reference(&x[static_cast<size_t>(r * ld)], cols, &want[static_cast<size_t>(r * cols)],
                               &want_scales[static_cast<size_t>(r)]);
      }
      DeviceBuffer<uint16_t> d_x(x);
      DeviceBuffer<uint8_t> d_out(static_cast<size_t>(rows * cols));
      DeviceBuffer<float> d_scales(static_cast<size_t>(rows));
      d_out.poison();
      d_scales.poison();
      const double ms =
          time_ms([&] { quantize_rows_e4m3(d_x.get(), rows, cols, ld, d_out.get(), d_scales.get(), nullptr); }, 0, 1);
      sync_or_die("quantize_rows_e4m3");
      const std::vector<uint8_t> got = d_out.download();
      const std::vector<float> got_scales = d_scales.download();
      size_t differing = 0;
      for (size_t i = 0; i < got.size(); ++i) differing += got[i] != want[i];
      const bool scales_equal = std::memcmp(got_scales.data(), want_scales.data(), want_scales.size() * 4) == 0;
      report_flag("quantize_rows_e4m3",
                  "rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + " ld=" + std::to_string(ld),
                  differing == 0 && scales_equal,
                  std::to_string(differing) + " bytes differ, scales " + (scales_equal ? "equal" : "DIFFER"), ms);
    }
  }
}

struct WeightCase {
  int64_t m, k;
};

// bf16_gemv and fp8_gemv at n = 1..8, beta 0 (y poisoned) and 1.
void check_gemv(const Options& opt, std::mt19937_64& rng) {
  const WeightCase cases[] = {{576, 576}, {1536, 576}, {576, 1536}, {4096, 4096}, {1024, 14336}, {3, 16}};
  for (const WeightCase& wc : cases) {
    for (bool fp8 : {false, true}) {
      const std::vector<uint16_t> w = random_bf16(rng, static_cast<size_t>(wc.m * wc.k), 0.05f);
      const std::vector<double> w_ref = fp8 ? dequantized(w, wc.m, wc.k) : widened_bf16(w);
      DeviceBuffer<uint16_t> d_w(w);
      DeviceBuffer<uint8_t> d_w8(static_cast<size_t>(wc.m * wc.k));
      DeviceBuffer<float> d_scales(static_cast<size_t>(wc.m));
      if (fp8) quantize_rows_e4m3(d_w.get(), wc.m, wc.k, wc.k, d_w8.get(), d_scales.get(), nullptr);
      for (int64_t n = 1; n <= kGemvMaxRows; ++n) {
        if (opt.quick && n != 1 && n != 8) continue;
        for (float beta : {0.0f, 1.0f}) {
          const std::vector<uint16_t> x = random_bf16(rng, static_cast<size_t>(n * wc.k), 1.0f);
          std::vector<float> y0(static_cast<size_t>(n * wc.m));
          std::normal_distribution<float> dist(0.0f, 1.0f);
          for (float& v : y0) v = dist(rng);
          DeviceBuffer<uint16_t> d_x(x);
          DeviceBuffer<float> d_y(y0);
          if (beta == 0.0f) d_y.poison();
          const double ms = time_ms(
              [&] {
                if (fp8) {
                  fp8_gemv(d_x.get(), d_w8.get(), d_scales.get(), d_y.get(), n, wc.m, wc.k, beta, nullptr);
                } else {
                  bf16_gemv(d_x.get(), d_w.get(), d_y.get(), n, wc.m, wc.k, beta, nullptr);
                }
              },
              0, 1);
          sync_or_die("gemv");
          const std::vector<size_t> outputs = sampled_outputs(n, wc.m, wc.k);
          const Reference ref = reference_product(widened_bf16(x), w_ref, y0, beta, wc.m, wc.k, outputs);
          const std::string shape = "n=" + std::to_string(n) + " m=" + std::to_string(wc.m) +
                                    " k=" + std::to_string(wc.k) + " beta=" + std::to_string(static_cast<int>(beta));
          report(scaled_outcome(fp8 ? "fp8_gemv" : "bf16_gemv", shape, d_y.download(), outputs, ref, 0x1p-15, ms));
          if (!programmatic_launch_supported()) continue;
          // Launched programmatically behind a kernel that writes x and y late: the same values.
          const std::vector<float> late =
              run_behind_late_writer(d_x.get(), x.size(), y0, [&](const uint16_t* x_late, float* y, cudaStream_t s) {
                if (fp8) {
                  fp8_gemv(x_late, d_w8.get(), d_scales.get(), y, n, wc.m, wc.k, beta, s, true);
                } else {
                  bf16_gemv(x_late, d_w.get(), y, n, wc.m, wc.k, beta, s, true);
                }
              });
          report(scaled_outcome(fp8 ? "fp8_gemv.programmatic" : "bf16_gemv.programmatic", shape, late, outputs, ref,
                                0x1p-15, 0.0));
        }
      }
    }
  }
}

// CublasLtGemm::matmul with FP8 weights: under the default policy the GEMV at the smallest n,
// folio's small-batch tensor-core kernel (fp8_small_gemm.h) up to 64 rows and cuBLASLt's FP8
// GEMM above (activations quantized per token for both); cuBLASLt at every n under
// --batch-invariant.
void check_fp8_gemm(const Options& opt, std::mt19937_64& rng) {
  const WeightCase cases[] = {{576, 576}, {1536, 576}, {576, 1536}, {4096, 4096}, {6144, 4096}, {4096, 14336}};
  const int64_t rows_list[] = {1, 5, 8, 9, 33, 64, 65, 300, 1024};
  for (bool invariant : {false, true}) {
    GemmPolicy policy;
    policy.batch_invariant = invariant;
    Expected<std::unique_ptr<CublasLtGemm>> made = CublasLtGemm::create(size_t{32} << 20, policy);
    if (!made) {
      report_flag("fp8_gemm", "create", false, made.error());
      return;
    }
    CublasLtGemm& gemm = **made;
    for (const WeightCase& wc : cases) {
      if (opt.quick && wc.k == 14336) continue;
      const std::vector<uint16_t> w = random_bf16(rng, static_cast<size_t>(wc.m * wc.k), 0.05f);
      const std::vector<double> w_ref = dequantized(w, wc.m, wc.k);
      DeviceBuffer<uint16_t> d_w(w);
      DeviceBuffer<uint8_t> d_w8(static_cast<size_t>(wc.m * wc.k));
      DeviceBuffer<float> d_scales(static_cast<size_t>(wc.m));
      quantize_rows_e4m3(d_w.get(), wc.m, wc.k, wc.k, d_w8.get(), d_scales.get(), nullptr);
      const DeviceMatrix matrix{WeightFormat::kFp8E4M3, d_w8.get(), d_scales.get()};
      if (Status s = gemm.reserve_fp8_activations(1024, wc.k); !s) {
        report_flag("fp8_gemm", "reserve", false, s.message());
        return;
      }
      // The invariance reference: every row computed at the largest n.
      const int64_t big_n = 1024;
      const std::vector<uint16_t> x_all = random_bf16(rng, static_cast<size_t>(big_n * wc.k), 1.0f);
      DeviceBuffer<uint16_t> d_x_all(x_all);
      const std::vector<double> x_wide = widened_bf16(x_all), x_quantized = dequantized(x_all, big_n, wc.k);
      std::vector<float> y_big;
      for (int64_t n : rows_list) {
        if (opt.quick && n != 1 && n != 9 && n != 300) continue;
        const bool gemv = !invariant && n <= policy.gemv_max_rows_fp8;
        const bool small = !invariant && !gemv && n <= policy.fp8_small_gemm_max_rows;
        const std::string shape = std::string(invariant ? "pinned " : "default ") +
                                  (gemv    ? "(gemv) "
                                   : small ? "(small) "
                                           : "(gemm) ") +
                                  "n=" + std::to_string(n) + " m=" + std::to_string(wc.m) +
                                  " k=" + std::to_string(wc.k);
        if (!gemv && !small) {
          if (Status s = gemm.prepare(n, wc.m, wc.k, WeightFormat::kFp8E4M3); !s) {
            report_flag("fp8_gemm", shape, false, s.message());
            continue;
          }
        }
        for (float beta : {0.0f, 1.0f}) {
          std::vector<float> y0(static_cast<size_t>(n * wc.m));
          std::normal_distribution<float> dist(0.0f, 1.0f);
          for (float& v : y0) v = dist(rng);
          DeviceBuffer<float> d_y(y0);
          if (beta == 0.0f) d_y.poison();
          const double ms =
              time_ms([&] { gemm.matmul(d_x_all.get(), matrix, d_y.get(), n, wc.m, wc.k, beta, nullptr); }, 0, 1);
          sync_or_die("fp8 matmul");
          // The GEMV keeps x in bf16; the GEMM multiplies x quantized per token.
          const std::vector<double>& x_ref = gemv ? x_wide : x_quantized;
          const std::vector<size_t> outputs = sampled_outputs(n, wc.m, wc.k);
          const Reference ref = reference_product(x_ref, w_ref, y0, beta, wc.m, wc.k, outputs);
          const std::vector<float> got = d_y.download();
          report(scaled_outcome("fp8_gemm", shape + " beta=" + std::to_string(static_cast<int>(beta)), got, outputs,
                                ref, gemv ? 0x1p-15 : 0x1p-11, ms));
          if (invariant && beta == 0.0f) {
            if (y_big.empty()) {
              DeviceBuffer<float> d_big(static_cast<size_t>(big_n * wc.m));
              gemm.matmul(d_x_all.get(), matrix, d_big.get(), big_n, wc.m, wc.k, 0.0f, nullptr);
              sync_or_die("fp8 matmul");
              y_big = d_big.download();
            }
            const bool same = std::memcmp(got.data(), y_big.data(), got.size() * sizeof(float)) == 0;
            report_flag("fp8_gemm.invariant", shape, same,
                        same ? "rows equal those of n=1024 bit for bit" : "rows differ from n=1024's");
          }
        }
      }
    }
  }
}

// A grouped weight (m, k) from random normal rows quantized to a GGUF block type and repacked
// (kInt4: 4-bit types; kInt8: any, 2^group_shift columns a group), and the values its kernels
// compute with (float64).
struct GroupedWeight {
  std::vector<uint8_t> codes;
  std::vector<uint32_t> groups;
  std::vector<double> values;
};
GroupedWeight random_grouped(std::mt19937_64& rng, DType type, WeightFormat format, int group_shift, int64_t m,
                             int64_t k) {
  const bool int4 = format == WeightFormat::kInt4;
  const int64_t row_code_bytes = int4 ? k / 2 : k, row_groups = k >> group_shift;
  GroupedWeight w;
  w.codes.resize(static_cast<size_t>(m * row_code_bytes));
  w.groups.resize(static_cast<size_t>(m * row_groups));
  w.values.resize(static_cast<size_t>(m * k));
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::vector<float> row(static_cast<size_t>(k)), out(static_cast<size_t>(k));
  std::vector<uint8_t> block(row_bytes(type, k));
  for (int64_t r = 0; r < m; ++r) {
    for (float& v : row) v = dist(rng);
    quant::quantize_row_reference(type, row.data(), block.data(), k);
    uint8_t* codes = &w.codes[static_cast<size_t>(r * row_code_bytes)];
    uint32_t* groups = &w.groups[static_cast<size_t>(r * row_groups)];
    if (int4 && group_shift > 5) {
      // A checkpoint's wider groups (WeightTensor::group_cols): one (scale, min) a group.
      const int64_t group_cols = int64_t{1} << group_shift;
      std::vector<uint8_t> q(static_cast<size_t>(k));
      std::vector<float> scales(static_cast<size_t>(k / 32)), mins(scales.size());
      std::uniform_int_distribution<int> nibble(0, 15);
      for (uint8_t& v : q) v = static_cast<uint8_t>(nibble(rng));
      for (int64_t b = 0; b < k / 32; ++b) {
        if (b % (group_cols / 32) == 0) {
          scales[static_cast<size_t>(b)] = 0.01f * std::abs(dist(rng)) + 1e-3f;
          mins[static_cast<size_t>(b)] = -8.0f * scales[static_cast<size_t>(b)] + dist(rng) * 0.01f;
        } else {
          scales[static_cast<size_t>(b)] = scales[static_cast<size_t>(b - 1)];
          mins[static_cast<size_t>(b)] = mins[static_cast<size_t>(b - 1)];
        }
      }
      if (!quant::pack_int4_row(q.data(), scales.data(), mins.data(), k, codes, groups, group_cols)) std::abort();
      quant::dequantize_int4_row(codes, groups, k, out.data(), group_cols);
    } else if (int4) {
      quant::repack_int4_row(type, block.data(), k, codes, groups);
      quant::dequantize_int4_row(codes, groups, k, out.data());
    } else {
      quant::repack_int8_row(type, block.data(), k, int64_t{1} << group_shift, codes, groups);
      quant::dequantize_int8_row(codes, groups, k, int64_t{1} << group_shift, out.data());
    }
    for (int64_t c = 0; c < k; ++c) w.values[static_cast<size_t>(r * k + c)] = out[c];
  }
  return w;
}

// CublasLtGemm::matmul with INT4 and INT8 weights, each path at every n it can take: the
// default (the small GEMMs up to 64 rows, the main-loop GEMM above on Hopper), the main-loop
// GEMM alone (its masking and k splits at small n), dequantization then the BF16 GEMM alone,
// and --batch-invariant (dequantization and one pinned algorithm, which must stay invariant).
void check_grouped_gemm(const Options& opt, std::mt19937_64& rng) {
  struct Case {
    int64_t m, k;
    DType type;
    WeightFormat format = WeightFormat::kInt4;
    int group_shift = 5;
    bool act_order = false;  // columns stored in a random input order (DeviceMatrix::input_order)
  };
  constexpr WeightFormat kInt8 = WeightFormat::kInt8;
  constexpr WeightFormat kInt4 = WeightFormat::kInt4;
  const Case cases[] = {{576, 576, DType::Q4_1},
                        {960, 576, DType::Q4_0},
                        {576, 1536, DType::Q4_K},
                        {6144, 4096, DType::Q4_K},
                        {4096, 14336, DType::Q4_K},
                        {64, 64, DType::Q4_0},
                        {256, 768, DType::Q4_1},
                        {48, 576, DType::Q4_1},  // 48: one 16-row group past 16 tokens
                        {576, 576, DType::Q8_0, kInt8},
                        {960, 576, DType::Q5_0, kInt8},
                        {576, 1536, DType::Q6_K, kInt8, 4},
                        {6144, 4096, DType::Q6_K, kInt8, 4},
                        {4096, 14336, DType::Q8_0, kInt8},
                        {64, 64, DType::Q8_0, kInt8},
                        {256, 768, DType::Q5_K, kInt8},
                        {48, 576, DType::Q5_1, kInt8},
                        {640, 1536, DType::Q4_K, kInt8, 4},  // a 4-bit part in a Q6_K matrix
                        {576, 1536, DType::Q4_1, kInt4, 5, true},
                        // AWQ / GPTQ groups wider than 32 columns, one (scale, min) word each
                        {6144, 4096, DType::Q4_1, kInt4, 7},
                        {4096, 14336, DType::Q4_1, kInt4, 7},
                        {960, 576, DType::Q4_1, kInt4, 6},
                        {256, 2048, DType::Q4_1, kInt4, 11},  // group_size -1
                        {576, 1536, DType::Q4_1, kInt4, 7, true},
                        {4096, 4096, DType::Q4_1, kInt4, 7, true},  // act-order, streamed at n <= 8
                        {960, 576, DType::Q8_0, kInt8, 5, true}};
  const int64_t rows_list[] = {1, 2, 5, 8, 9, 16, 17, 33, 64, 65, 300, 1024, 1100};
  // kOtherWidth: the default with the INT4 small GEMM's chunk width flipped (int4_small_gemm_wide)
  // and act-order's inputs read the other way (small_gemm_reads_input_order). kUnstreamed: the
  // default without the streamed kernel (small_gemm_streamed), at the n it would take (<= 8).
  enum Mode { kDefault, kWgmmaOnly, kDequantizeOnly, kInvariant, kOtherWidth, kUnstreamed };
  for (Mode mode : {kDefault, kWgmmaOnly, kDequantizeOnly, kInvariant, kOtherWidth, kUnstreamed}) {
    const bool invariant = mode == kInvariant;
    GemmPolicy policy;
    policy.batch_invariant = invariant;
    policy.small_gemm_streamed = mode != kUnstreamed;
    if (mode == kOtherWidth) {
      policy.int4_small_gemm_wide = !policy.int4_small_gemm_wide;
      policy.small_gemm_reads_input_order = !policy.small_gemm_reads_input_order;
    }
    if (mode == kWgmmaOnly || mode == kDequantizeOnly) {
      policy.int4_small_gemm_max_rows = 0;
      policy.int8_small_gemm_max_rows = 0;
    }
    if (mode == kWgmmaOnly) {
      policy.grouped_wgmma_max_rows = 1 << 20;
      policy.grouped_wgmma_split_k = true;
    }
    if (mode == kDequantizeOnly) policy.grouped_wgmma_max_rows = 0;
    policy.programmatic_launch = !invariant && programmatic_launch_supported();
    Expected<std::unique_ptr<CublasLtGemm>> made = CublasLtGemm::create(size_t{32} << 20, policy);
    if (!made) {
      report_flag("grouped_gemm", "create", false, made.error());
      return;
    }
    CublasLtGemm& gemm = **made;
    for (const Case& wc : cases) {
      if (opt.quick && wc.k == 14336) continue;
      const bool int4 = wc.format == WeightFormat::kInt4;
      if (mode == kOtherWidth && !int4 && !wc.act_order) continue;
      const char* name = int4 ? "int4_gemm" : "int8_gemm";
      GroupedWeight w = random_grouped(rng, wc.type, wc.format, wc.group_shift, wc.m, wc.k);
      DeviceBuffer<uint8_t> d_codes(w.codes);
      DeviceBuffer<uint32_t> d_groups(w.groups);
      // Act-order: stored column c multiplies input order[c]; the reference gets the values in
      // input order, so a gather that reads the wrong way round fails.
      std::vector<int32_t> order(static_cast<size_t>(wc.k));
      std::iota(order.begin(), order.end(), 0);
      if (wc.act_order) std::shuffle(order.begin(), order.end(), rng);
      DeviceBuffer<int32_t> d_order(order);
      const std::vector<double> stored_values = w.values;
      if (wc.act_order) {
        for (int64_t r = 0; r < wc.m; ++r) {
          for (int64_t c = 0; c < wc.k; ++c) {
            w.values[static_cast<size_t>(r * wc.k + order[static_cast<size_t>(c)])] =
                stored_values[static_cast<size_t>(r * wc.k + c)];
          }
        }
      }
      const DeviceMatrix matrix{wc.format,      d_codes.get(),  nullptr,
                                d_groups.get(), wc.group_shift, wc.act_order ? d_order.get() : nullptr};
      const std::string type = std::string(dtype_name(wc.type)) +
                               (int4 && wc.group_shift == 5 ? "" : " g" + std::to_string(1 << wc.group_shift)) +
                               (wc.act_order ? " act-order" : "");
      if (Status s = gemm.reserve_dequantize_scratch(wc.m * wc.k); !s) {
        report_flag(name, "reserve", false, s.message());
        return;
      }
      if (Status s = gemm.reserve_input_gather(1100, wc.k); !s) {
        report_flag(name, "reserve", false, s.message());
        return;
      }
      if (mode == kDefault && !wc.act_order) {
        // The dequantized weights are the host's, bit for bit.
        DeviceBuffer<uint16_t> d_out(static_cast<size_t>(wc.m * wc.k));
        if (int4) {
          dequantize_int4(d_codes.get(), d_groups.get(), wc.group_shift, wc.m, wc.k, d_out.get(), nullptr);
        } else {
          dequantize_int8(d_codes.get(), d_groups.get(), wc.group_shift, wc.m, wc.k, d_out.get(), nullptr);
        }
        sync_or_die("dequantize");
        const std::vector<uint16_t> got = d_out.download();
        size_t mismatches = 0;
        for (size_t i = 0; i < got.size(); ++i) mismatches += from_bf16(got[i]) != w.values[i];
        report_flag(int4 ? "dequantize_int4" : "dequantize_int8",
                    type + " m=" + std::to_string(wc.m) + " k=" + std::to_string(wc.k), mismatches == 0,
                    std::to_string(mismatches) + " of " + std::to_string(got.size()) + " differ");
      }
      const int64_t big_n = 1100;
      const std::vector<uint16_t> x_all = random_bf16(rng, static_cast<size_t>(big_n * wc.k), 1.0f);
      DeviceBuffer<uint16_t> d_x_all(x_all);
      const std::vector<double> x_wide = widened_bf16(x_all);
      std::vector<float> y_big;
      for (int64_t n : rows_list) {
        if (opt.quick && n != 1 && n != 9 && n != 300) continue;
        if (mode == kUnstreamed && n > 8) continue;
        const bool small =
            !invariant && n <= (int4 ? policy.int4_small_gemm_max_rows : policy.int8_small_gemm_max_rows);
        const bool streamed =
            small && policy.small_gemm_streamed &&
            (int4 ? policy.int4_wide_for(n) && wc.k % 128 == 0 &&
                        int4_small_gemm_streams(n, wc.m, wc.k, wc.group_shift, d_codes.get(), d_groups.get())
                  : int8_small_gemm_streams(n, wc.m, wc.k, wc.group_shift, d_codes.get(), d_groups.get()));
        const bool wgmma = !invariant && !small && n <= policy.grouped_wgmma_max_rows &&
                           grouped_wgmma_gemm_supports(d_x_all.get(), n, wc.m, wc.k) &&
                           (policy.grouped_wgmma_split_k || grouped_wgmma_gemm_fills_device(n, wc.m));
        static const char* const kModeNames[] = {"default ", "wgmma-only ",  "dequantize-only ",
                                                 "pinned ",  "other-width ", "unstreamed "};
        const std::string shape = std::string(kModeNames[mode]) +
                                  (streamed ? "(streamed) "
                                   : small  ? "(small) "
                                   : wgmma  ? "(wgmma) "
                                            : "(gemm) ") +
                                  type + " n=" + std::to_string(n) + " m=" + std::to_string(wc.m) +
                                  " k=" + std::to_string(wc.k);
        if (!small && !wgmma) {
          if (Status s = gemm.prepare(n, wc.m, wc.k, WeightFormat::kInt4); !s) {
            report_flag(name, shape, false, s.message());
            continue;
          }
        }
        for (float beta : {0.0f, 1.0f}) {
          std::vector<float> y0(static_cast<size_t>(n * wc.m));
          std::normal_distribution<float> dist(0.0f, 1.0f);
          for (float& v : y0) v = dist(rng);
          DeviceBuffer<float> d_y(y0);
          if (beta == 0.0f) d_y.poison();
          const double ms =
              time_ms([&] { gemm.matmul(d_x_all.get(), matrix, d_y.get(), n, wc.m, wc.k, beta, nullptr); }, 0, 1);
          sync_or_die(name);
          const std::vector<size_t> outputs = sampled_outputs(n, wc.m, wc.k);
          const Reference ref = reference_product(x_wide, w.values, y0, beta, wc.m, wc.k, outputs);
          const std::vector<float> got = d_y.download();
          report(scaled_outcome(name, shape + " beta=" + std::to_string(static_cast<int>(beta)), got, outputs, ref,
                                0x1p-14, ms));
          if (mode == kDefault && small && policy.programmatic_launch) {
            // Launched programmatically behind a kernel that writes x and y late: the same values.
            const std::vector<float> late =
                run_behind_late_writer(d_x_all.get(), static_cast<size_t>(n * wc.k), y0,
                                       [&](const uint16_t* x_late, float* y, cudaStream_t s) {
                                         gemm.matmul(x_late, matrix, y, n, wc.m, wc.k, beta, s);
                                       });
            report(scaled_outcome(int4 ? "int4_gemm.programmatic" : "int8_gemm.programmatic",
                                  shape + " beta=" + std::to_string(static_cast<int>(beta)), late, outputs, ref,
                                  0x1p-14, 0.0));
          }
          if (invariant && beta == 0.0f) {
            if (y_big.empty()) {
              DeviceBuffer<float> d_big(static_cast<size_t>(big_n * wc.m));
              gemm.matmul(d_x_all.get(), matrix, d_big.get(), big_n, wc.m, wc.k, 0.0f, nullptr);
              sync_or_die(name);
              y_big = d_big.download();
            }
            const bool same = std::memcmp(got.data(), y_big.data(), got.size() * sizeof(float)) == 0;
            report_flag(int4 ? "int4_gemm.invariant" : "int8_gemm.invariant", shape, same,
                        same ? "rows equal those of n=1100 bit for bit" : "rows differ from n=1100's");
          }
        }
      }
    }
  }
}

// Which FP8 configurations cuBLASLt's heuristic accepts on this device and library (output
// type, scale modes, fast accumulation, scale pointers set before the query), as informational
// lines: what the FP8 path may rely on.
void probe_fp8_configurations(const Options&, std::mt19937_64&) {
  cublasLtHandle_t handle = nullptr;
  if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    report_flag("fp8_probe", "create", false, "cublasLtCreate failed");
    return;
  }
  DeviceBuffer<float> dummy(4096);
  const int64_t n = 64, m = 4096, k = 4096;
  for (cudaDataType_t out : {CUDA_R_32F, CUDA_R_16BF, CUDA_R_16F}) {
    for (int32_t mode : {static_cast<int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F),
                         static_cast<int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)}) {
      for (int fast : {-1, 0, 1}) {
        for (bool pointers : {false, true}) {
          cublasLtMatmulDesc_t desc = nullptr;
          cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
          cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
          const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode));
          cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode));
          if (fast >= 0) {
            const int8_t f = static_cast<int8_t>(fast);
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &f, sizeof(f));
          }
          if (pointers) {
            const void* p = dummy.get();
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &p, sizeof(p));
            cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &p, sizeof(p));
          }
          cublasLtMatrixLayoutCreate(&a, CUDA_R_8F_E4M3, k, m, k);
          cublasLtMatrixLayoutCreate(&b, CUDA_R_8F_E4M3, k, n, k);
          cublasLtMatrixLayoutCreate(&c, out, m, n, m);
          cublasLtMatmulPreference_t pref = nullptr;
          cublasLtMatmulPreferenceCreate(&pref);
          const size_t workspace = size_t{32} << 20;
          cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                               sizeof(workspace));
          cublasLtMatmulHeuristicResult_t results[4] = {};
          int found = 0;
          const cublasStatus_t status =
              cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, pref, 4, results, &found);
          const char* out_name = out == CUDA_R_32F ? "D=f32" : out == CUDA_R_16BF ? "D=bf16" : "D=f16";
          std::printf("info fp8_probe %s scale=%s fast_accum=%s pointers=%s: status %d, %d algorithms\n", out_name,
                      mode == CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F ? "outer_vec" : "scalar",
                      fast < 0 ? "unset"
                      : fast   ? "1"
                               : "0",
                      pointers ? "set" : "unset", static_cast<int>(status), found);
          cublasLtMatmulPreferenceDestroy(pref);
          cublasLtMatrixLayoutDestroy(c);
          cublasLtMatrixLayoutDestroy(b);
          cublasLtMatrixLayoutDestroy(a);
          cublasLtMatmulDescDestroy(desc);
        }
      }
    }
  }
  cublasLtDestroy(handle);
}

Register r_probe("fp8_probe", probe_fp8_configurations);
Register r0("quantize_rows_e4m3", check_fp8_rows);
Register r1("gemv", check_gemv);
Register r2("fp8_gemm", check_fp8_gemm);
Register r3("grouped_gemm", check_grouped_gemm);

}  // namespace
}  // namespace folio::cuda::check
