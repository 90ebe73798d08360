//===- Linalg.cpp - mm, addmm, bmm, baddbmm on OpenBLAS -------------------===//
//
// Row-major GEMMs through cblas (sgemm for f32, dgemm for f64); the batched
// ops loop over the batch (OpenBLAS 0.3.21 has no strided batch GEMM).
//
//===----------------------------------------------------------------------===//

#include "Gemm.h"
#include "Kernels.h"

using namespace spmd::rt;

namespace {

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
