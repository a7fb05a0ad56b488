// GPU benchmarks on a (synth) model:
//   - the model's GEMM shapes at n = 1, 256, 8192 rows under both algorithm policies
//     (cublaslt_gemm.h), and whether a row's bits depend on n;
//   - the executor's --batch-invariant tuning (CublasLtGemm::tune_pinned) on the same shapes;
//   - single-stream decode against the bandwidth bound, at a short and a 4k context, with the
//     batch-invariant (pinned, tuned; and untuned at n = 512) GEMMs and with cuBLASLt's
//     per-shape heuristic (with and without the GEMV: the fast default);
//   - offline throughput (256 requests x 512 prompt / 128 output tokens) through the engine,
//     with a breakdown of where the time went.
//   bound tok/s = measured copy bandwidth / (weight bytes + KV bytes read per token)
#include <cuda_runtime.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <random>

#include "backend/cuda/cublaslt_gemm.h"
#include "backend/cuda/fp8_rows.h"
#include "backend/cuda/fp8_small_gemm.h"
#include "backend/cuda/gemv.h"
#include "backend/cuda/int4_gemm.h"
#include "backend/cuda/int8_gemm.h"
#include "e2e_common.h"
#include "engine/engine.h"

namespace folio::e2e {
namespace {

// Device-to-device copy bandwidth, counting bytes read and written (as memory sees them).
double copy_bandwidth_gbs() {
  const size_t bytes = size_t{2} << 30;
  void* a = nullptr;
  void* b = nullptr;
  if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) return 0.0;
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(start);
  const int reps = 10;
  for (int i = 0; i < reps; ++i) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
  cudaEventRecord(stop);
  cudaEventSynchronize(stop);
  float ms = 0;
  cudaEventElapsedTime(&ms, start, stop);
  cudaFree(a);
  cudaFree(b);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return 2.0 * bytes * reps / (ms / 1e3) / 1e9;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int32_t length, int32_t vocab) {
  std::uniform_int_distribution<int32_t> pick(1000, std::min(vocab, 100000) - 1);
  std::vector<int32_t> prompt(static_cast<size_t>(length));
  for (int32_t& t : prompt) t = pick(rng);
  return prompt;
}

// Fills a device bf16 buffer with a random pattern: 16M random values, repeated.
void fill_random_bf16(uint16_t* device, size_t count, std::mt19937& rng) {
  const size_t pattern = std::min<size_t>(count, size_t{16} << 20);
  std::vector<uint16_t> host(pattern);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (uint16_t& v : host) {
    const float f = normal(rng);
    uint32_t bits = 0;
    std::memcpy(&bits, &f, sizeof bits);
    v = static_cast<uint16_t>(bits >> 16);
  }
  cudaMemcpy(device, host.data(), pattern * 2, cudaMemcpyHostToDevice);
  for (size_t at = pattern; at < count; at += pattern) {
    cudaMemcpy(device + at, device, std::min(pattern, count - at) * 2, cudaMemcpyDeviceToDevice);
  }
}

// The model's GEMMs (weights m x k) at n = 1, 256 and 8192 rows: microseconds per call with
// cuBLASLt's per-shape heuristic and with algorithms pinned at each of pinned_rows, whether
// rows computed at small n equal, bit for bit, the same rows computed at n = 8192, and what
// the GEMMs of one whole step would cost (all layers plus the vocabulary projection).
void bench_gemms(const ModelConfig& c, const std::vector<int32_t>& pinned_rows, int32_t default_pinned_rows) {
  struct Shape {
    const char* name;
    int64_t m, k;
    int64_t per_step;  // calls per forward
  };
  const int64_t qkv = c.q_dim() + 2 * static_cast<int64_t>(c.kv_dim());
  const int64_t layers = c.num_layers;
  const Shape shapes[] = {{"qkv", qkv, c.hidden_dim, layers},
                          {"o", c.hidden_dim, c.q_dim(), layers},
                          {"gate_up", 2 * static_cast<int64_t>(c.ffn_dim), c.hidden_dim, layers},
                          {"down", c.hidden_dim, c.ffn_dim, layers},
                          {"lm_head", c.vocab_size, c.hidden_dim, 1}};
  constexpr int64_t kRows[3] = {1, 256, 8192};
  const int64_t max_n = kRows[2];
  int64_t max_k = 0, max_mk = 0, max_m = 0;
  for (const Shape& s : shapes) {
    max_k = std::max(max_k, s.k);
    max_m = std::max(max_m, s.m);
    max_mk = std::max(max_mk, s.m * s.k);
  }
  uint16_t* x = nullptr;
  uint16_t* w = nullptr;
  float* y = nullptr;
  float* y_small = nullptr;
  auto release = [&] {
    for (void* p : {static_cast<void*>(x), static_cast<void*>(w), static_cast<void*>(y), static_cast<void*>(y_small)}) {
      cudaFree(p);
    }
  };
  if (cudaMalloc(&x, static_cast<size_t>(max_n * max_k) * 2) != cudaSuccess ||
      cudaMalloc(&w, static_cast<size_t>(max_mk) * 2) != cudaSuccess ||
      cudaMalloc(&y, static_cast<size_t>(max_n * max_m) * 4) != cudaSuccess ||
      cudaMalloc(&y_small, static_cast<size_t>(256 * max_m) * 4) != cudaSuccess) {
    std::printf("bench: gemm: not enough device memory, skipped\n");
    release();
    return;
  }
  std::mt19937 rng(11);
  fill_random_bf16(x, static_cast<size_t>(max_n * max_k), rng);
  fill_random_bf16(w, static_cast<size_t>(max_mk), rng);
  const cuda::GemmPolicy heuristic{.batch_invariant = false, .small_batch_gemv = false};
  Expected<std::unique_ptr<cuda::CublasLtGemm>> made = cuda::CublasLtGemm::create(size_t{32} << 20, heuristic);
  Expected<std::unique_ptr<cuda::CublasLtGemm>> made_reference =
      cuda::CublasLtGemm::create(size_t{32} << 20, heuristic);
  if (!made || !made_reference) {
    std::printf("bench: gemm: %s\n", (made ? made_reference : made).error().c_str());
    release();
    return;
  }
  std::unique_ptr<cuda::CublasLtGemm> gemm = std::move(made).value();
  std::unique_ptr<cuda::CublasLtGemm> reference = std::move(made_reference).value();
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  // The weights every measurement multiplies by: w in BF16, later its FP8 copy (w8, quantized
  // per shape as (m, k) rows by the measurement, as --quantization fp8 makes them).
  cuda::DeviceMatrix weight{cuda::WeightFormat::kBf16, w, nullptr};
  uint8_t* w8 = nullptr;
  float* w8_scales = nullptr;
  auto time_us = [&](const Shape& s, int64_t n) {
    float* out = n <= 256 ? y_small : y;
    gemm->matmul(x, weight, out, n, s.m, s.k, 0.0f, stream);
    const int reps = n >= 4096 ? 5 : 20;
    cudaEventRecord(start, stream);
    for (int i = 0; i < reps; ++i) gemm->matmul(x, weight, out, n, s.m, s.k, 0.0f, stream);
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    return 1e3 * ms / reps;
  };
  // Rows of y at n = 8192 against the same rows computed at n in {1, 3, 64, 256}.
  auto invariant_rows = [&](const Shape& s) {
    gemm->matmul(x, weight, y, max_n, s.m, s.k, 0.0f, stream);
    cudaStreamSynchronize(stream);
    std::vector<float> big(static_cast<size_t>(256 * s.m)), small(static_cast<size_t>(256 * s.m));
    cudaMemcpy(big.data(), y, big.size() * 4, cudaMemcpyDeviceToHost);
    bool same = true;
    for (int64_t n : {1, 3, 64, 256}) {
      gemm->matmul(x, weight, y_small, n, s.m, s.k, 0.0f, stream);
      cudaStreamSynchronize(stream);
      cudaMemcpy(small.data(), y_small, static_cast<size_t>(n * s.m) * 4, cudaMemcpyDeviceToHost);
      same = same && std::memcmp(small.data(), big.data(), static_cast<size_t>(n * s.m) * 4) == 0;
    }
    return same;
  };
  // Rows 1..8 against cuBLASLt's BF16 product: the largest relative L2 error over n in {1, 3, 8}
  // (for FP8 weights, the quantization's error).
  auto error_vs_reference = [&](const Shape& s) {
    std::vector<float> want(static_cast<size_t>(8 * s.m)), got(want.size());
    double worst = 0.0;
    for (int64_t n : {1, 3, 8}) {
      reference->matmul(x, w, y_small, n, s.m, s.k, 0.0f, stream);
      cudaStreamSynchronize(stream);
      cudaMemcpy(want.data(), y_small, static_cast<size_t>(n * s.m) * 4, cudaMemcpyDeviceToHost);
      gemm->matmul(x, weight, y_small, n, s.m, s.k, 0.0f, stream);
      cudaStreamSynchronize(stream);
      cudaMemcpy(got.data(), y_small, static_cast<size_t>(n * s.m) * 4, cudaMemcpyDeviceToHost);
      double diff = 0.0, norm = 0.0;
      for (size_t i = 0; i < static_cast<size_t>(n * s.m); ++i) {
        diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
        norm += static_cast<double>(want[i]) * want[i];
      }
      worst = std::max(worst, std::sqrt(diff / std::max(norm, 1e-30)));
    }
    return worst;
  };
  // One policy: per-shape times, then a step's GEMM time at each n. Only the first few
  // policies print RESULT lines (gpu-check's summary keeps 60 lines); the sweep prints bench:.
  auto measure = [&](const char* label, bool headline) {
    double step_ms[3] = {};
    bool invariant = true;
    double worst_error = 0.0;
    for (const Shape& s : shapes) {
      if (weight.format == cuda::WeightFormat::kFp8E4M3) {
        cuda::quantize_rows_e4m3(w, s.m, s.k, s.k, w8, w8_scales, stream);
      }
      double us[3];
      for (int i = 0; i < 3; ++i) {
        us[i] = time_us(s, kRows[i]);
        step_ms[i] += us[i] * static_cast<double>(s.per_step) / 1e3;
      }
      invariant = invariant_rows(s) && invariant;
      worst_error = std::max(worst_error, error_vs_reference(s));
      const double bytes_per_weight = weight.format == cuda::WeightFormat::kFp8E4M3 ? 1.0
                                      : weight.format == cuda::WeightFormat::kInt4  ? 0.625
                                      : weight.format == cuda::WeightFormat::kInt8  ? 1.25
                                                                                    : 2.0;
      const double weight_gb = static_cast<double>(s.m * s.k) * bytes_per_weight / 1e9;
      const double flop = 2.0 * static_cast<double>(max_n * s.m * s.k);
      std::printf(
          "bench: gemm %-10s %-8s m=%-6lld k=%-6lld n=1 %7.1f us (%4.0f GB/s)  n=256 %7.1f us  "
          "n=8192 %8.1f us (%3.0f TFLOP/s)\n",
          label, s.name, static_cast<long long>(s.m), static_cast<long long>(s.k), us[0], weight_gb / (us[0] / 1e6),
          us[1], us[2], flop / (us[2] / 1e6) / 1e12);
    }
    std::printf(
        "%s gemm_step %s ms_n1=%.2f ms_n256=%.2f ms_n8192=%.1f row_invariant=%s fallbacks=%d "
        "relerr_vs_cublaslt_n1-8=%.1e\n",
        headline ? "RESULT" : "bench:", label, step_ms[0], step_ms[1], step_ms[2], invariant ? "yes" : "no",
        gemm->pinned_fallbacks(), worst_error);
    std::fflush(stdout);
  };
  gemm->set_policy(heuristic);
  measure("heuristic", true);
  {  // What the executor does under --batch-invariant: candidates timed at n = 1, 256, 8192.
    gemm->set_policy(cuda::GemmPolicy{.batch_invariant = true});
    for (const Shape& s : shapes) {
      Expected<cuda::PinnedTuning> t = gemm->tune_pinned(x, weight, y, max_n, s.m, s.k, 0.0f, stream);
      if (!t) {
        std::printf("bench: tuning %s: %s\n", s.name, t.error().c_str());
        continue;
      }
      std::printf(
          "bench: tuned %-8s %2d candidates, pinned %s: n=1 %.1f us (best %.1f), n=256 %.1f us (best %.1f), "
          "n=8192 %.1f us (best %.1f); %.0f ms\n",
          s.name, t->candidates, t->algorithm.c_str(), t->chosen_us[0], t->best_us[0], t->chosen_us[1], t->best_us[1],
          t->chosen_us[2], t->best_us[2], 1e3 * t->seconds);
    }
    measure("tuned", true);
  }
  gemm->set_policy(cuda::GemmPolicy{.batch_invariant = false, .small_batch_gemv = true});
  measure("gemv", true);
  for (int32_t rows : pinned_rows) {
    for (int32_t candidate = 0; candidate < 4; ++candidate) {
      gemm->set_policy(cuda::GemmPolicy{.batch_invariant = true, .pinned_rows = rows, .pinned_candidate = candidate});
      const std::string label = "pinned" + std::to_string(rows) + "c" + std::to_string(candidate);
      measure(label.c_str(), rows == default_pinned_rows && candidate == 0);
      std::printf("bench: algorithms pinned at n=%d, candidate %d:\n%s", rows, candidate,
                  gemm->describe_pinned().c_str());
    }
  }
  {  // The same weights in FP8 (a scale per row, as --quantization fp8 makes them): the
     // heuristic GEMMs (activations quantized per token inside matmul), the GEMV, the tuned pins.
    if (cudaMalloc(&w8, static_cast<size_t>(max_mk)) == cudaSuccess &&
        cudaMalloc(&w8_scales, static_cast<size_t>(max_m) * 4) == cudaSuccess &&
        gemm->reserve_fp8_activations(max_n, max_k)) {
      weight = cuda::DeviceMatrix{cuda::WeightFormat::kFp8E4M3, w8, w8_scales};
      gemm->set_policy(heuristic);
      measure("fp8", true);
      gemm->set_policy(cuda::GemmPolicy{.batch_invariant = false, .small_batch_gemv = true});
      measure("fp8-gemv", true);
      // Batch sizes between the GEMV and the large GEMMs: BF16 and FP8, each on the GEMV and on
      // cuBLASLt, side by side (what GemmPolicy's gemv_max_rows_* are set from; the bar
      // is FP8 never below BF16 at any batch size).
      const cuda::GemmPolicy always_gemv{
          .batch_invariant = false, .small_batch_gemv = true, .gemv_max_rows_bf16 = 8, .gemv_max_rows_fp8 = 8};
      const cuda::GemmPolicy never_gemv{
          .batch_invariant = false, .small_batch_gemv = false, .fp8_small_gemm_max_rows = 0};
      const cuda::GemmPolicy small_gemm{.batch_invariant = false, .small_batch_gemv = false};
      for (const Shape& s : shapes) {
        cuda::quantize_rows_e4m3(w, s.m, s.k, s.k, w8, w8_scales, stream);
        std::string line;
        for (int64_t n : {1, 2, 3, 4, 6, 8, 16, 32, 64, 128}) {
          double us[5];  // bf16 gemv, bf16 cublas, fp8 gemv, fp8 cublas, fp8 small-batch kernel
          for (int i = 0; i < 5; ++i) {
            if ((n > cuda::kGemvMaxRows && (i == 0 || i == 2)) || (i == 4 && n > cuda::kFp8SmallGemmMaxRows)) {
              us[i] = 0.0;
              continue;
            }
            weight = i < 2 ? cuda::DeviceMatrix{cuda::WeightFormat::kBf16, w, nullptr}
                           : cuda::DeviceMatrix{cuda::WeightFormat::kFp8E4M3, w8, w8_scales};
            gemm->set_policy(i == 4 ? small_gemm : i % 2 == 0 ? always_gemv : never_gemv);
            us[i] = time_us(s, n);
          }
          const double bf16_best = us[0] > 0.0 ? std::min(us[0], us[1]) : us[1];
          double fp8_best = us[3];
          for (int i : {2, 4}) {
            if (us[i] > 0.0) fp8_best = std::min(fp8_best, us[i]);
          }
          char cell[192];
          std::snprintf(
              cell, sizeof cell,
              "\n    n=%-3lld bf16 gemv %6.1f cublas %6.1f | fp8 gemv %6.1f cublas %6.1f small %6.1f | best %.2fx",
              static_cast<long long>(n), us[0], us[1], us[2], us[3], us[4], bf16_best / fp8_best);
          line += cell;
        }
        std::printf("bench: gemm small-n %s (us; 0: not run)%s\n", s.name, line.c_str());
      }
      std::fflush(stdout);
      gemm->set_policy(cuda::GemmPolicy{.batch_invariant = true});
      for (const Shape& s : shapes) {
        cuda::quantize_rows_e4m3(w, s.m, s.k, s.k, w8, w8_scales, stream);
        Expected<cuda::PinnedTuning> t = gemm->tune_pinned(x, weight, y, max_n, s.m, s.k, 0.0f, stream);
        if (!t) std::printf("bench: fp8 tuning %s: %s\n", s.name, t.error().c_str());
      }
      measure("fp8-tuned", true);
    } else {
      std::printf("bench: gemm fp8: not enough device memory, skipped\n");
    }
    cudaFree(w8);
    cudaFree(w8_scales);
  }
  // INT4 and INT8 (W4A16 / W8A16, what GGUF block files keep on the GPU): random codes with a
  // realistic scale and min per group (the kernels' speed does not depend on the values), side
  // by side with BF16.
  for (const cuda::WeightFormat format : {cuda::WeightFormat::kInt4, cuda::WeightFormat::kInt8}) {
    const bool int4 = format == cuda::WeightFormat::kInt4;
    const char* name = int4 ? "int4" : "int8";
    const int group_shift = int4 ? 5 : 4;  // int8: Q6_K's 16-column groups, the larger of its two
    const int64_t code_bytes = int4 ? max_mk / 2 : max_mk;
    uint8_t* codes = nullptr;
    uint32_t* groups = nullptr;
    if (cudaMalloc(&codes, static_cast<size_t>(code_bytes)) == cudaSuccess &&
        cudaMalloc(&groups, static_cast<size_t>(max_mk >> group_shift) * 4) == cudaSuccess &&
        gemm->reserve_dequantize_scratch(max_mk)) {
      std::mt19937 bytes_rng(11);
      std::vector<uint8_t> host_codes(static_cast<size_t>(code_bytes));
      for (uint8_t& b : host_codes) b = static_cast<uint8_t>(bytes_rng());
      cudaMemcpy(codes, host_codes.data(), host_codes.size(), cudaMemcpyHostToDevice);
      // int4: scale 2^-7, min -0.25; int8: scale 2^-11, min -2^-4 (bf16).
      const uint32_t group = int4 ? (0x3c00u | (0xbe80u << 16)) : (0x3a00u | (0xbd80u << 16));
      std::vector<uint32_t> host_groups(static_cast<size_t>(max_mk >> group_shift), group);
      cudaMemcpy(groups, host_groups.data(), host_groups.size() * 4, cudaMemcpyHostToDevice);
      const cuda::GemmPolicy fast_policy{};
      const cuda::DeviceMatrix bf16_weight{cuda::WeightFormat::kBf16, w, nullptr};
      const cuda::DeviceMatrix grouped_weight{format, codes, nullptr, groups, group_shift};
      const double bytes_per_weight = int4 ? 0.625 : 1.25;
      gemm->set_policy(fast_policy);
      weight = grouped_weight;
      measure(name, true);
      // The bar: quantized never below BF16 at any batch size. Each path alone (the
      // small-batch kernel, dequantize + cuBLASLt) beside BF16's default policy: what
      // GemmPolicy::int4_small_gemm_max_rows / int8_small_gemm_max_rows are set from.
      // Paths: 0 the small kernel (n <= 64), 1 dequantize + cuBLASLt, 2 the main-loop GEMM, 3 the
      // small kernel with int4_small_gemm_wide flipped (INT4 only; default on: 128-column chunks
      // at n <= 8 and n > 48, so this column is 64-column chunks at every n), 4 the small kernel
      // without its streamed variant (small_gemm_streamed off; n <= 8, where that one runs).
      cuda::GemmPolicy paths[5];
      paths[0].grouped_wgmma_max_rows = 0;
      paths[3].grouped_wgmma_max_rows = 0;
      paths[3].int4_small_gemm_wide = !paths[3].int4_small_gemm_wide;
      paths[4].grouped_wgmma_max_rows = 0;
      paths[4].small_gemm_streamed = false;
      paths[1].int4_small_gemm_max_rows = 0;
      paths[1].int8_small_gemm_max_rows = 0;
      paths[1].grouped_wgmma_max_rows = 0;
      paths[2].int4_small_gemm_max_rows = 0;
      paths[2].int8_small_gemm_max_rows = 0;
      paths[2].grouped_wgmma_max_rows = 1 << 20;
      paths[2].grouped_wgmma_split_k = true;
      for (const Shape& s : shapes) {
        std::string line;
        double worst = 1e9;
        for (int64_t n : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 2048, 8192}) {
          gemm->set_policy(fast_policy);
          weight = bf16_weight;
          const double bf16_us = time_us(s, n);
          double us[5];
          for (int i = 0; i < 5; ++i) {
            us[i] = 0.0;
            if ((i == 0 || i == 3) && n > (int4 ? cuda::kInt4SmallGemmMaxRows : cuda::kInt8SmallGemmMaxRows)) continue;
            if (i == 3 && !int4) continue;
            if (i == 4 && n > 8) continue;
            gemm->set_policy(paths[i]);
            weight = grouped_weight;
            us[i] = time_us(s, n);
          }
          gemm->set_policy(fast_policy);
          const double default_us = time_us(s, n);
          char cell[200];
          std::snprintf(cell, sizeof cell,
                        "\n    n=%-4lld bf16 %8.1f | %s small %8.1f (%s %8.1f, unstreamed %8.1f) dequant+gemm %8.1f "
                        "wgmma %8.1f | "
                        "default %8.1f (%5.0f GB/s) %.2fx",
                        static_cast<long long>(n), bf16_us, name, us[0],
                        paths[3].int4_small_gemm_wide ? "wide" : "narrow", us[3], us[4], us[1], us[2], default_us,
                        static_cast<double>(s.m * s.k) * bytes_per_weight / (default_us * 1e3), bf16_us / default_us);
          line += cell;
          worst = std::min(worst, bf16_us / default_us);
        }
        std::printf("bench: gemm %s vs bf16 %s (us; 0: not run; default policy worst %.2fx)%s\n", name, s.name, worst,
                    line.c_str());
      }
      std::fflush(stdout);
    } else {
      std::printf("bench: gemm %s: not enough device memory, skipped\n", name);
    }
    cudaFree(codes);
    cudaFree(groups);
    weight = cuda::DeviceMatrix{cuda::WeightFormat::kBf16, w, nullptr};
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  gemm.reset();
  reference.reset();
  release();
}

struct DecodeResult {
  double tok_per_s = 0.0;
  double bound_tok_per_s = 0.0;
  double mean_context = 0.0;
};

// One request: prompt_len random tokens, then output_len greedy tokens; the time per output
// token excludes the first (prefill) step. A warm-up run captures the batch-1 graphs.
DecodeResult single_stream(cuda::CudaExecutor& executor, const Tokenizer& tokenizer, const EngineConfig& config,
                           std::mt19937& rng, int32_t prompt_len, int32_t output_len, double bandwidth_gbs) {
  const ModelConfig& c = executor.config();
  const cuda::CudaExecutorStats stats = executor.stats();
  const double kv_bytes_per_token = 2.0 * c.num_layers * c.kv_dim() * 2;
  Engine engine(executor, tokenizer, config);
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.ignore_eos = true;
  params.max_tokens = output_len;
  const std::vector<int32_t> prompt = random_prompt(rng, prompt_len, c.vocab_size);
  engine.generate({prompt}, params);
  const std::vector<Generation> out = engine.generate({prompt}, params);
  DecodeResult r;
  r.mean_context = prompt_len + output_len / 2.0;
  const double bytes_per_token = static_cast<double>(stats.weight_bytes) + kv_bytes_per_token * r.mean_context;
  r.tok_per_s = 1.0 / out[0].time_per_output_token_s;
  r.bound_tok_per_s = bandwidth_gbs * 1e9 / bytes_per_token;
  return r;
}

void print_decode(const char* name, const DecodeResult& r, const char* gemm) {
  std::printf("RESULT %s tok_per_s=%.1f bound_tok_per_s=%.1f share=%.1f%% (mean context %.0f, %s GEMMs)\n", name,
              r.tok_per_s, r.bound_tok_per_s, 100.0 * r.tok_per_s / r.bound_tok_per_s, r.mean_context, gemm);
}

// 256 x 512 / 128 through the engine, with where the time went.
void offline(cuda::CudaExecutor& executor, const Tokenizer& tokenizer, const EngineConfig& config, std::mt19937 rng,
             int32_t requests, int32_t prompt_len, int32_t output_len, const char* name) {
  const ModelConfig& c = executor.config();
  Engine engine(executor, tokenizer, config);
  RequestParams params;
  params.sampling.temperature = 0.0f;
  params.ignore_eos = true;
  params.max_tokens = output_len;
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < requests; ++i) prompts.push_back(random_prompt(rng, prompt_len, c.vocab_size));
  engine.generate({prompts[0]}, params);  // warm-up
  executor.reset_stats();
  const EngineMetrics before = engine.metrics();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<Generation> out = engine.generate(prompts, params);
  const double seconds = seconds_since(start);
  const EngineMetrics after = engine.metrics();
  const cuda::CudaExecutorStats s = executor.stats();
  int64_t generated = 0;
  for (const Generation& g : out) generated += static_cast<int64_t>(g.tokens.size());
  std::printf("RESULT %s requests=%d prompt=%d output=%d seconds=%.2f output_tok_per_s=%.1f total_tok_per_s=%.1f\n",
              name, requests, prompt_len, output_len, seconds, generated / seconds,
              (generated + static_cast<double>(requests) * prompt_len) / seconds);
  const double execute = after.execute_seconds - before.execute_seconds;
  const double update = after.update_seconds - before.update_seconds;
  std::printf(
      "RESULT %s_breakdown execute_s=%.2f (gpu layers %.2f, gpu head+sample/copy %.2f, upload %.2f, "
      "sync wait %.2f, graph capture %.2f) update_s=%.2f schedule_and_rest_s=%.2f\n",
      name, execute, s.layers_gpu_s, s.head_gpu_s, s.upload_host_s, s.wait_host_s, s.capture_s, update,
      seconds - execute - update);
  std::printf(
      "RESULT %s_steps total=%lld prefill=%lld mixed=%lld decode_graph=%lld decode_eager=%lld "
      "gpu_sampled=%lld logits_to_host_mb=%.1f pinned_gemm_fallbacks=%d\n",
      name, static_cast<long long>(after.num_steps - before.num_steps), static_cast<long long>(s.prefill_steps),
      static_cast<long long>(s.mixed_steps), static_cast<long long>(s.graph_replays),
      static_cast<long long>(s.eager_decode_steps), static_cast<long long>(s.device_sampled_steps),
      s.logits_bytes_to_host / 1e6, s.gemm_pinned_fallbacks);
  std::fflush(stdout);
}

}  // namespace

int run_bench(const std::vector<std::string>& args) {
  const std::string path = arg_value(args, "--model", "");
  const int32_t requests = std::stoi(arg_value(args, "--requests", "256"));
  const int32_t prompt_len = std::stoi(arg_value(args, "--prompt", "512"));
  const int32_t output_len = std::stoi(arg_value(args, "--output", "128"));
  const int32_t batched_tokens = std::stoi(arg_value(args, "--max-num-batched-tokens", "8192"));
  const int32_t pinned_rows = std::stoi(arg_value(args, "--gemm-pinned-rows", "512"));
  const int32_t pinned_candidate = std::stoi(arg_value(args, "--gemm-pinned-candidate", "0"));
  const bool gemm_sweep = arg_value(args, "--gemm-sweep", "1") == "1";
  const bool both_offline = arg_value(args, "--offline-both", "1") == "1";
  const bool tune = arg_value(args, "--gemm-tune", "1") == "1";
  auto start = std::chrono::steady_clock::now();
  Expected<LoadedModel> loaded = load_model(path);
  if (!loaded) {
    std::fprintf(stderr, "bench: %s\n", loaded.error().c_str());
    return 2;
  }
  std::printf("bench: mapped %s in %.1f s\n", path.c_str(), seconds_since(start));
  const double bandwidth = copy_bandwidth_gbs();
  std::printf("bench: device copy bandwidth %.0f GB/s (read + write)\n", bandwidth);
  start = std::chrono::steady_clock::now();
  if (gemm_sweep) bench_gemms(loaded->model->config(), {64, 256, 512, 2048}, pinned_rows);
  std::printf("bench: gemm shapes in %.1f s\n", seconds_since(start));
  std::fflush(stdout);
  if (arg_value(args, "--gemm-only", "0") == "1") return 0;

  start = std::chrono::steady_clock::now();
  cuda::CudaExecutorOptions options;
  options.gpu_memory_utilization = 0.9;
  options.max_num_seqs = 256;
  options.max_num_batched_tokens = batched_tokens;
  options.max_model_len = 4096;
  // The bench starts on the batch-invariant policy (tuned unless --gemm-tune 0), as its
  // headline decode_single_stream has always been measured there.
  options.gemm.batch_invariant = true;
  options.gemm.pinned_rows = pinned_rows;
  options.gemm.pinned_candidate = pinned_candidate;
  options.gemm.tune_pinned = tune;
  Expected<std::unique_ptr<cuda::CudaExecutor>> made = cuda::CudaExecutor::create(*loaded->model, options);
  if (!made) {
    std::fprintf(stderr, "bench: %s\n", made.error().c_str());
    return 2;
  }
  cuda::CudaExecutor& executor = **made;
  const Tokenizer& tokenizer = *loaded->tokenizer;
  std::printf("bench: executor ready in %.1f s (%d KV blocks)\n", seconds_since(start), executor.kv_pool().num_blocks);
  std::fflush(stdout);

  EngineConfig config;
  config.max_model_len = 4096;
  config.scheduler.max_num_seqs = 256;
  config.scheduler.max_num_batched_tokens = batched_tokens;
  std::mt19937 rng(7);
  // Single stream; "decode_single_stream" keeps its name and settings (128 + 256 tokens).
  const char* pinned_name = tune ? "pinned (tuned)" : "pinned (untuned)";
  print_decode("decode_single_stream", single_stream(executor, tokenizer, config, rng, 128, 256, bandwidth),
               pinned_name);
  print_decode("decode_single_stream_ctx4k", single_stream(executor, tokenizer, config, rng, 3968, 128, bandwidth),
               pinned_name);
  const cuda::GemmPolicy pinned{
      .batch_invariant = true, .pinned_rows = pinned_rows, .pinned_candidate = pinned_candidate, .tune_pinned = tune};
  if (tune) {  // the previous default, for comparison: the heuristic's first split-free pick at n = 512
    executor.set_gemm_policy(cuda::GemmPolicy{.batch_invariant = true,
                                              .pinned_rows = pinned_rows,
                                              .pinned_candidate = pinned_candidate,
                                              .tune_pinned = false});
    print_decode("decode_single_stream_untuned_pinned",
                 single_stream(executor, tokenizer, config, rng, 128, 256, bandwidth), "pinned (untuned)");
  }
  const cuda::GemmPolicy fast{.batch_invariant = false, .small_batch_gemv = true};  // heuristic + GEMV (gemm_policy.h)
  const cuda::GemmPolicy heuristic{.batch_invariant = false, .small_batch_gemv = false};
  executor.set_gemm_policy(fast);
  print_decode("decode_single_stream_fast_gemm", single_stream(executor, tokenizer, config, rng, 128, 256, bandwidth),
               "heuristic+GEMV");
  print_decode("decode_single_stream_ctx4k_fast_gemm",
               single_stream(executor, tokenizer, config, rng, 3968, 128, bandwidth), "heuristic+GEMV");
  executor.set_gemm_policy(heuristic);
  print_decode("decode_single_stream_heuristic_gemm",
               single_stream(executor, tokenizer, config, rng, 128, 256, bandwidth), "heuristic");
  std::fflush(stdout);

  executor.set_gemm_policy(pinned);
  start = std::chrono::steady_clock::now();
  offline(executor, tokenizer, config, rng, requests, prompt_len, output_len, "offline_throughput");
  std::printf("bench: offline run with warm-up in %.1f s\n", seconds_since(start));
  std::printf("bench: pinned GEMM algorithms of the executor (%s):\n%s",
              tune ? "tuned at n = 1, 256, 8192" : ("chosen at n=" + std::to_string(pinned_rows)).c_str(),
              executor.gemm_description().c_str());
  if (both_offline) {
    executor.set_gemm_policy(fast);
    offline(executor, tokenizer, config, rng, requests, prompt_len, output_len, "offline_throughput_fast_gemm");
  }
  std::fflush(stdout);
  // GGUF block files of the same shape (folio synth --dtype q4_k, q8_0, q4_k_m ...), kept as the
  // file is on the device (--quantization auto): --int4-model's RESULT lines are named _int4,
  // each of --quant-models' (comma-separated) after its file name.
  std::vector<std::pair<std::string, std::string>> quantized;  // (path, tag)
  if (const std::string path = arg_value(args, "--int4-model", ""); !path.empty()) quantized.emplace_back(path, "int4");
  for (std::string list = arg_value(args, "--quant-models", ""); !list.empty();) {
    const size_t comma = list.find(',');
    const std::string path = list.substr(0, comma);
    list = comma == std::string::npos ? "" : list.substr(comma + 1);
    std::string tag = path.substr(path.find_last_of('/') + 1);
    tag = tag.substr(0, tag.rfind(".gguf"));
    for (char& ch : tag) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    quantized.emplace_back(path, tag);
  }
  for (const auto& [path, tag] : quantized) {
    made->reset();
    Expected<LoadedModel> loaded_q = load_model(path);
    if (!loaded_q) {
      std::fprintf(stderr, "bench: %s: %s\n", tag.c_str(), loaded_q.error().c_str());
      return 2;
    }
    start = std::chrono::steady_clock::now();
    cuda::CudaExecutorOptions options_q = options;
    options_q.weight_format = cuda::WeightFormat::kInt4;  // as the file is
    options_q.gemm = fast;
    Expected<std::unique_ptr<cuda::CudaExecutor>> made_q = cuda::CudaExecutor::create(*loaded_q->model, options_q);
    if (!made_q) {
      std::fprintf(stderr, "bench: %s: %s\n", tag.c_str(), made_q.error().c_str());
      return 2;
    }
    cuda::CudaExecutor& q = **made_q;
    std::printf("bench: %s executor ready in %.1f s (weights %.2f GB, %d KV blocks)\n", tag.c_str(),
                seconds_since(start), q.stats().weight_bytes / 1e9, q.kv_pool().num_blocks);
    const std::string single = "decode_single_stream_" + tag, ctx4k = "decode_single_stream_ctx4k_" + tag;
    const std::string offline_name = "offline_throughput_" + tag;
    print_decode(single.c_str(), single_stream(q, tokenizer, config, rng, 128, 256, bandwidth), "small GEMM");
    print_decode(ctx4k.c_str(), single_stream(q, tokenizer, config, rng, 3968, 128, bandwidth), "small GEMM");
    offline(q, tokenizer, config, rng, requests, prompt_len, output_len, offline_name.c_str());
    std::fflush(stdout);
    made_q->reset();
  }
  if (arg_value(args, "--fp8", "1") != "1") return 0;

  // The same model with --quantization fp8, side by side with the BF16 runs above: a fresh
  // executor (the BF16 one gives its memory back first), default (fast) GEMM policy.
  made->reset();
  start = std::chrono::steady_clock::now();
  options.weight_format = cuda::WeightFormat::kFp8E4M3;
  options.gemm = fast;
  Expected<std::unique_ptr<cuda::CudaExecutor>> made_fp8 = cuda::CudaExecutor::create(*loaded->model, options);
  if (!made_fp8) {
    std::fprintf(stderr, "bench: fp8: %s\n", made_fp8.error().c_str());
    return 2;
  }
  cuda::CudaExecutor& fp8 = **made_fp8;
  std::printf("bench: fp8 executor ready in %.1f s (weights %.2f GB, %d KV blocks)\n", seconds_since(start),
              fp8.stats().weight_bytes / 1e9, fp8.kv_pool().num_blocks);
  print_decode("decode_single_stream_fp8", single_stream(fp8, tokenizer, config, rng, 128, 256, bandwidth), "fp8 GEMV");
  print_decode("decode_single_stream_ctx4k_fp8", single_stream(fp8, tokenizer, config, rng, 3968, 128, bandwidth),
               "fp8 GEMV");
  offline(fp8, tokenizer, config, rng, requests, prompt_len, output_len, "offline_throughput_fp8");
  fp8.set_gemm_policy(pinned);
  print_decode("decode_single_stream_fp8_pinned", single_stream(fp8, tokenizer, config, rng, 128, 256, bandwidth),
               "fp8 pinned (tuned)");
  return 0;
}

}  // namespace folio::e2e
