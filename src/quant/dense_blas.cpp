#include "quant/dense_blas.h"

#include <Eigen/Dense>
#include <cstdlib>

#if FOLIO_HAVE_OPENBLAS
#include <cblas.h>

// LAPACK's Fortran entry points in OpenBLAS (no LAPACKE header needed): column-major, so a
// row-major matrix is its transpose there: row-major lower is column-major upper. The trailing
// arguments are the hidden lengths of the character arguments (gfortran's convention).
extern "C" void spotrf_(const char* uplo, const int* n, float* a, const int* lda, int* info, size_t uplo_len);
extern "C" void strtri_(const char* uplo, const char* diag, const int* n, float* a, const int* lda, int* info,
                        size_t uplo_len, size_t diag_len);
#endif

namespace folio::quant::dense {
namespace {

template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;

}  // namespace

namespace eigen {

bool cholesky_lower(float* a, int64_t n) {
  Eigen::Map<RowMajor<float>> m(a, n, n);
  Eigen::LLT<Eigen::Ref<RowMajor<float>>> llt(m);  // in place: the lower triangle becomes L
  return llt.info() == Eigen::Success;
}

void invert_upper(float* a, int64_t n) {
  Eigen::Map<RowMajor<float>> m(a, n, n);
  RowMajor<float> inverse = RowMajor<float>::Identity(n, n);
  m.triangularView<Eigen::Upper>().solveInPlace(inverse);
  m.triangularView<Eigen::Upper>() = inverse;
}

void gemm_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc) {
  const Eigen::Map<const RowMajor<float>, 0, Stride> am(a, m, k, Stride(lda));
  const Eigen::Map<const RowMajor<float>, 0, Stride> bm(b, k, n, Stride(ldb));
  Eigen::Map<RowMajor<float>, 0, Stride> cm(c, m, n, Stride(ldc));
  cm.noalias() += alpha * am * bm;
}

void gemm_nt_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float* c, int64_t ldc) {
  const Eigen::Map<const RowMajor<float>, 0, Stride> am(a, m, k, Stride(lda));
  const Eigen::Map<const RowMajor<float>, 0, Stride> bm(b, n, k, Stride(ldb));
  Eigen::Map<RowMajor<float>, 0, Stride> cm(c, m, n, Stride(ldc));
  cm.noalias() += alpha * am * bm.transpose();
}

void syrk_lower_add(double* c, int64_t n, const double* x, int64_t rows) {
  Eigen::Map<RowMajor<double>> cm(c, n, n);
  const Eigen::Map<const RowMajor<double>> xm(x, rows, n);
  cm.selfadjointView<Eigen::Lower>().rankUpdate(xm.transpose());
}

}  // namespace eigen

namespace openblas {

#if FOLIO_HAVE_OPENBLAS
bool available() {
  return true;
}

bool cholesky_lower(float* a, int64_t n) {
  const int ni = static_cast<int>(n);
  int info = 0;
  spotrf_("U", &ni, a, &ni, &info, 1);
  return info == 0;
}

void invert_upper(float* a, int64_t n) {
  const int ni = static_cast<int>(n);
  int info = 0;
  strtri_("L", "N", &ni, a, &ni, &info, 1, 1);
  if (info != 0) std::abort();  // a zero on the diagonal: a caller's bug (a Cholesky factor has none)
}

void gemm_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), 1.0f, c, static_cast<int>(ldc));
}

void gemm_nt_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
              alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), 1.0f, c, static_cast<int>(ldc));
}

void syrk_lower_add(double* c, int64_t n, const double* x, int64_t rows) {
  cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, static_cast<int>(n), static_cast<int>(rows), 1.0, x,
              static_cast<int>(n), 1.0, c, static_cast<int>(n));
}
#else
bool available() {
  return false;
}
bool cholesky_lower(float*, int64_t) {
  std::abort();
}
void invert_upper(float*, int64_t) {
  std::abort();
}
void gemm_add(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float*, int64_t) {
  std::abort();
}
void gemm_nt_add(int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float*, int64_t) {
  std::abort();
}
void syrk_lower_add(double*, int64_t, const double*, int64_t) {
  std::abort();
}
#endif

}  // namespace openblas

#if FOLIO_HAVE_OPENBLAS
namespace impl = openblas;
#else
namespace impl = eigen;
#endif

bool cholesky_lower(float* a, int64_t n) {
  return impl::cholesky_lower(a, n);
}
void invert_upper(float* a, int64_t n) {
  impl::invert_upper(a, n);
}
void gemm_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
              float* c, int64_t ldc) {
  impl::gemm_add(m, n, k, alpha, a, lda, b, ldb, c, ldc);
}
void gemm_nt_add(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                 float* c, int64_t ldc) {
  impl::gemm_nt_add(m, n, k, alpha, a, lda, b, ldb, c, ldc);
}
void syrk_lower_add(double* c, int64_t n, const double* x, int64_t rows) {
  impl::syrk_lower_add(c, n, x, rows);
}

void set_threads(int threads) {
#if FOLIO_HAVE_OPENBLAS
  if (threads > 0) openblas_set_num_threads(threads);
#else
  (void)threads;
#endif
}

int threads() {
#if FOLIO_HAVE_OPENBLAS
  return openblas_get_num_threads();
#else
  return 1;
#endif
}

const char* library_name() {
  return openblas::available() ? "openblas" : "eigen";
}

}  // namespace folio::quant::dense
