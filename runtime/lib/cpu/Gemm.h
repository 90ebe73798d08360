//===- Gemm.h - row-major GEMM on OpenBLAS ----------------------*- C++ -*-===//
//
// The one GEMM of the CPU kernels (matmul, attention): cblas sgemm for f32,
// dgemm for f64.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_CPU_GEMM_H
#define SPMD_RUNTIME_CPU_GEMM_H

#include <cblas.h>

#include <cstdint>
#include <type_traits>

namespace spmd::rt {

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

} // namespace spmd::rt

#endif // SPMD_RUNTIME_CPU_GEMM_H
