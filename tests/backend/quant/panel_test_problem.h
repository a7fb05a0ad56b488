// A random panel-matmul problem for the panel tests: weight rows of a quantized type (quantized
// from random floats, or raw random blocks) and activation rows converted by the scalar path,
// with a row stride wider than a row.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/quant/panel_gemm.h"
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

// The K-quants' columns come in super-blocks of 256: their `cols` is rounded up to one.
inline Problem make_problem(std::mt19937& rng, DType type, int64_t rows, int64_t cols, int64_t n, bool raw) {
  if (panel_needs_packing(type)) cols = (cols + 255) / 256 * 256;
  Problem p;
  p.type = type;
  p.rows = rows;
  p.cols = cols;
  p.n = n;
  for (int64_t r = 0; r < rows; ++r) {
    const std::vector<uint8_t> row = raw ? random_raw_row(rng, type, cols) : random_quantized_row(rng, type, cols);
    p.weights.insert(p.weights.end(), row.begin(), row.end());
  }
  // The panels' activation format (the K-quants read Q8_0, not their dot kernels' Q8_K).
  const QuantKernels* scalar = quant_kernels(panel_activation_partner(type), Isa::kScalar);
  p.act_row_bytes = row_bytes(scalar->activation_type, cols) + 40;  // a stride wider than a row
  p.acts.assign(p.act_row_bytes * static_cast<size_t>(n), 0);
  for (int64_t m = 0; m < n; ++m) {
    const std::vector<float> x = random_floats(rng, cols, 0.02);
    scalar->convert_activation_row(x.data(), p.acts.data() + m * p.act_row_bytes, cols);
  }
  return p;
}

// y (n, rows) from a panel path against float64 over the scalar path's dequantized weights and
// activations: within 1e-5 of the terms' magnitude plus twice `dot`'s own distance from float64
// (Q4_1's minimum rides on the activation's fp16 sum, s = d sum(q), on every path). The
// K-quants' dot kernels read other activations (Q8_K), so theirs is 1e-5 alone: the panels fold
// exact integer dots with float32 scales, rounding once or twice a block.
inline void expect_near_float64(const Problem& p, const std::vector<float>& y, const QuantKernels* dot,
                                const std::string& label) {
  const QuantKernels* scalar = quant_kernels(panel_activation_partner(p.type), Isa::kScalar);
  const QuantKernels* weights = quant_kernels(p.type, Isa::kScalar);
  const bool same_activations = panel_activation_partner(p.type) == p.type;
  std::vector<float> w(static_cast<size_t>(p.cols)), a(static_cast<size_t>(p.cols));
  const size_t weight_row_bytes = row_bytes(p.type, p.cols);
  for (int64_t m = 0; m < p.n; ++m) {
    const uint8_t* act = p.acts.data() + m * p.act_row_bytes;
    ASSERT_TRUE(quant::dequantize_row(scalar->activation_type, act, a.data(), p.cols));
    for (int64_t r = 0; r < p.rows; ++r) {
      weights->dequantize_row(p.weights.data() + r * weight_row_bytes, w.data(), p.cols);
      double exact = 0.0, magnitude = 0.0;
      for (int64_t k = 0; k < p.cols; ++k) {
        exact += static_cast<double>(w[k]) * a[k];
        magnitude += std::fabs(static_cast<double>(w[k]) * a[k]);
      }
      float reference = static_cast<float>(exact);
      if (same_activations) {
        dot->dot_rows(p.cols, p.weights.data() + r * weight_row_bytes, act, p.act_row_bytes, 1, &reference);
      }
      const double got = y[m * p.rows + r];
      const double bound = 1e-5 * magnitude + 2.0 * std::fabs(static_cast<double>(reference) - exact) + 1e-30;
      ASSERT_LE(std::fabs(got - exact), bound)
          << label << " " << dtype_info(p.type).name << " " << p.rows << "x" << p.cols << " n=" << p.n << " row " << m
          << " col " << r << ": " << got << ", float64 " << exact << ", dot_rows " << reference;
    }
  }
}

}  // namespace folio::cpu::test
