// The dense linear algebra of GPTQ (quant/gptq.h) and of the calibration's Gram matrices
// (backend/cpu/activation_stats.h): a Cholesky factorization, a triangular inverse, a matrix
// product and a symmetric rank-k update, all row-major.
//
// OpenBLAS (Debian's libopenblas-dev) where the build found it: it picks its kernels for the CPU
// at run time (AVX-512 here, AVX2 or SSE elsewhere) and runs on every core, where Eigen in this
// build is compiled for the baseline ISA (SSE2) and one thread. An 8B model's 14,336-input
// down projection: its GPTQ factorization took ~330 s in Eigen (double), ~6 s in OpenBLAS
// (float) on 2 cores (docs/BENCHMARKS.md, issue 13). Without OpenBLAS (the GPU machine's
// build) the same calls go to Eigen. Both sets are compiled and tested wherever OpenBLAS is.
#pragma once

#include <cstdint>

namespace folio::quant::dense {

// a: (n, n); its lower triangle becomes L with A = L L^T (A read from the lower triangle, the
// strict upper one left as it was). False when A is not (numerically) positive definite.
bool cholesky_lower(float* a, int64_t n);
// a: (n, n) upper triangular; its upper triangle becomes the inverse's (the strict lower
// triangle left as it was).
void invert_upper(float* a, int64_t n);
// c (m, n; row stride ldc) += alpha * a (m, k; lda) * b (k, n; ldb).
void gemm_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc);
// c (m, n; ldc) += alpha * a (m, k; lda) * b^T, b (n, k; ldb): the product with b's rows as
// columns, without transposing b first.
void gemm_nt_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float* c, int64_t ldc);
// c (n, n): its lower triangle += x^T x for x (rows, n) (the upper triangle left as it was).
void syrk_lower_add(double* c, int64_t n, const double* x, int64_t rows);

// The threads the library may use (OpenBLAS: all cores unless told; 0 leaves it as it is);
// Eigen's are always one. threads(): the current number.
void set_threads(int threads);
int threads();
// "openblas" or "eigen".
const char* library_name();

// Each implementation on its own (the functions above call OpenBLAS where it is built in).
namespace eigen {
bool cholesky_lower(float* a, int64_t n);
void invert_upper(float* a, int64_t n);
void gemm_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc);
void gemm_nt_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float* c, int64_t ldc);
void syrk_lower_add(double* c, int64_t n, const double* x, int64_t rows);
}  // namespace eigen
namespace openblas {
bool available();
bool cholesky_lower(float* a, int64_t n);
void invert_upper(float* a, int64_t n);
void gemm_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc);
void gemm_nt_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float* c, int64_t ldc);
void syrk_lower_add(double* c, int64_t n, const double* x, int64_t rows);
}  // namespace openblas

}  // namespace folio::quant::dense
