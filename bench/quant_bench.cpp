// Micro-benchmark of the quantized dot kernels (run by hand, not part of the tests). Build it
// against folio_lib (or the quant objects, the *_avx2 / *_avx512 ones with their -m flags):
//   g++ -std=c++20 -O2 -Isrc bench/quant_bench.cpp build/libfolio_lib.a -o quant_bench
//   ./quant_bench [seconds per case]
// For each weight type, path and activation row count it runs dot_rows over every row of a
// weight matrix (576 columns) and reports weight bytes streamed per second, and multiply-adds
// per second, on one thread, timed in thread CPU time. "small" uses 1536 rows (a 576x1536 projection: 0.5-1 MB, cache
// resident after the first pass); "big" uses 75.5M weights (131072 rows of 576), well past a 32 MB
// last-level cache.
#include <time.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "backend/cpu/quant/quant_kernels.h"
#include "quant/formats.h"

using namespace folio;
using namespace folio::cpu;

namespace {

// CPU time of this thread: on a shared machine, wall time would count time spent descheduled.
double thread_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct Result {
  double gb_per_s;
  double gmac_per_s;
};

Result bench(const QuantKernels& k, const std::vector<uint8_t>& weights, int64_t cols, int64_t rows,
             const std::vector<uint8_t>& act, size_t act_stride, int num_rows, double seconds) {
  const size_t wrow = row_bytes(k.weight_type, cols);
  std::vector<float> out(static_cast<size_t>(num_rows));
  float sink = 0.0f;
  int64_t passes = 0;
  const double start = thread_seconds();
  double elapsed = 0.0;
  do {
    for (int64_t r = 0; r < rows; ++r) {
      k.dot_rows(cols, weights.data() + r * wrow, act.data(), act_stride, num_rows, out.data());
      sink += out[0];
    }
    ++passes;
    elapsed = thread_seconds() - start;
  } while (elapsed < seconds);
  if (sink == 12345.678f) std::printf(" ");
  const double bytes = static_cast<double>(wrow) * rows * passes;
  const double macs = static_cast<double>(cols) * rows * passes * num_rows;
  return {bytes / elapsed / 1e9, macs / elapsed / 1e9};
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0.5;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::printf("%-5s %-7s %-6s %5s %10s %10s\n", "type", "isa", "matrix", "rows", "GB/s", "GMAC/s");
  for (DType type : {DType::Q4_1, DType::Q8_0, DType::Q4_0, DType::Q5_1, DType::Q4_K, DType::Q6_K, DType::F16}) {
    // 576 columns (SmolLM2-135M's width); the K-quants need multiples of 256: 2304.
    const int64_t cols = dtype_info(type).block_elems == 256 ? 2304 : 576;
    for (int64_t rows : {int64_t{1536}, int64_t{131072} * 576 / cols}) {
      const size_t wrow = row_bytes(type, cols);
      std::vector<uint8_t> weights(wrow * rows);
      std::vector<float> x(cols);
      for (int64_t r = 0; r < rows; ++r) {
        for (float& v : x) v = normal(rng);
        quant::quantize_row_reference(type, x.data(), weights.data() + r * wrow, cols);
      }
      for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
        if (!isa_supported(isa)) continue;
        const QuantKernels& k = *quant_kernels(type, isa);
        if (k.isa != isa) continue;
        for (int num_rows : {1, 8}) {
          const size_t stride = row_bytes(k.activation_type, cols);
          std::vector<uint8_t> act(stride * num_rows);
          for (int r = 0; r < num_rows; ++r) {
            for (float& v : x) v = normal(rng);
            k.convert_activation_row(x.data(), act.data() + r * stride, cols);
          }
          const double budget = isa == Isa::kScalar ? seconds / 4 : seconds;
          const Result res = bench(k, weights, cols, rows, act, stride, num_rows, budget);
          std::printf("%-5s %-7s %-6s %5d %10.2f %10.2f\n", std::string(dtype_name(type)).c_str(),
                      std::string(isa_name(isa)).c_str(), rows == 1536 ? "small" : "big", num_rows, res.gb_per_s,
                      res.gmac_per_s);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
