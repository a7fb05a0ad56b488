// A random panel-matmul problem for the panel tests: weight rows of a quantized type (quantized
// from random floats, or raw random blocks) and activation rows converted by the scalar path,
// with a row stride wider than a row.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "backend/cpu/quant/quant_kernels.h"
#include "quant/formats.h"
#include "quant_test_util.h"

namespace folio::cpu::test {

struct Problem {
  DType type;
  int64_t rows = 0, cols = 0, n = 0;
  std::vector<uint8_t> weights;  // rows x row_bytes
  std::vector<uint8_t> acts;     // n x act_row_bytes (+ slack)
  size_t act_row_bytes = 0;
};

inline Problem make_problem(std::mt19937& rng, DType type, int64_t rows, int64_t cols, int64_t n, bool raw) {
  Problem p;
  p.type = type;
  p.rows = rows;
  p.cols = cols;
  p.n = n;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> row = raw ? random_raw_row(rng, type, cols) : random_quantized_row(rng, type, cols);
    p.weights.insert(p.weights.end(), row.begin(), row.end());
  }
  const QuantKernels* scalar = quant_kernels(type, Isa::kScalar);
  p.act_row_bytes = row_bytes(scalar->activation_type, cols) + 40;  // a stride wider than a row
  p.acts.assign(p.act_row_bytes * static_cast<size_t>(n), 0);
  for (int64_t m = 0; m < n; ++m) {
    const std::vector<float> x = random_floats(rng, cols, 0.02);
    scalar->convert_activation_row(x.data(), p.acts.data() + m * p.act_row_bytes, cols);
  }
  return p;
}

}  // namespace folio::cpu::test
