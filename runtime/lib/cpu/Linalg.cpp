//===- Linalg.cpp - mm, addmm, bmm, baddbmm on OpenBLAS -------------------===//
//
// Row-major GEMMs through cblas (sgemm for f32, dgemm for f64); the batched
// ops loop over the batch (OpenBLAS 0.3.21 has no strided batch GEMM).
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <cblas.h>

using namespace spmd::rt;

namespace {

/// C[n, m] = alpha * A[n, k] B[k, m] + beta * C, all contiguous; A is
/// stored as [k, n] when `transA` (B as [m, k] when `transB`), so a
/// transpose feeding a matmul costs no copy. With beta == 0, C is only
/// written (BLAS semantics), so garbage or NaN in C never propagates.
template <typename T>
void gemm(int64_t n, int64_t m, int64_t k, T alpha, const T *a, bool transA,
          const T *b, bool transB, T beta, T *c) {
  if (n == 0 || m == 0)
    return;
  if (k == 0) {
    // Nothing to multiply; BLAS rejects lda = 0, so scale C by hand.
    for (int64_t i = 0; i < n * m; ++i)
      c[i] = beta == T(0) ? T(0) : beta * c[i];
    return;
  }
  auto blasInt = [](int64_t v) { return static_cast<blasint>(v); };
  CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
  CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
  blasint lda = blasInt(transA ? n : k), ldb = blasInt(transB ? k : m);
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, blasInt(n), blasInt(m), blasInt(k),
                alpha, a, lda, b, ldb, beta, c, blasInt(m));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, blasInt(n), blasInt(m), blasInt(k),
                alpha, a, lda, b, ldb, beta, c, blasInt(m));
}

/// out = beta * self (broadcast to out) + alpha * (a @ b) per batch, the
/// common body of mm, addmm, bmm and baddbmm (`self` NULL: mm/bmm).
void matmul(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
            const SpmdBuffer *a, const SpmdBuffer *b, double beta, double alpha,
            int32_t rank, bool transA, bool transB) {
  auto [batch, n, k, m] = checkMatmul(kernel, out, a, b, rank, transA, transB);
  // ATen ignores self when beta == 0, NaNs included.
  if (!self || beta == 0.0)
    beta = 0.0;
  dispatch<kFloat>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> aStorage, bStorage;
    const T *x = dataAs<T>(a, aStorage, kernel);
    const T *y = dataAs<T>(b, bStorage, kernel);
    T *o = dataOf<T>(out);
    if (beta != 0.0) {
      std::vector<T> selfStorage;
      const T *s = dataAs<T>(self, selfStorage, kernel);
      mapBroadcast<T, 1>(kernel, out, {self}, {s}, [](T v) { return v; });
    }
    for (int64_t i = 0; i < batch; ++i)
      gemm<T>(n, m, k, T(alpha), x + i * n * k, transA, y + i * k * m, transB,
              T(beta), o + i * n * m);
  });
}

} // namespace

namespace spmd::rt::cpu {

SPMD_RT_MATMUL_KERNELS(matmul)

} // namespace spmd::rt::cpu
