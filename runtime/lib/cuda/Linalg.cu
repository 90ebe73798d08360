//===- Linalg.cu - mm, addmm, bmm, baddbmm, matmul on cuBLAS --------------===//
//
// One cublasGemmStridedBatchedEx per call (batch 1 for mm/addmm), on the
// compute stream. cuBLAS is column-major: the row-major product
// C[n, m] = A[n, k] B[k, m] is computed as C^T = B^T A^T, which is the same
// memory; an operand stored transposed (trans_a, trans_b) is a cuBLAS
// transpose flag, so a transpose that feeds a matmul costs no copy.
//
// f32 computes in f32 (CUBLAS_COMPUTE_32F, default math mode: no TF32), as
// PyTorch does with torch.backends.cuda.matmul.allow_tf32 = False, its
// default; f64 in f64. bf16 is read and written as bf16 but
// multiplies and accumulates in f32 with f32 alpha and beta
// (CUBLAS_COMPUTE_32F, ATen's opmath_type and its bf16 cuBLAS calls), so C
// is rounded to bf16 once. Shapes are checked with the CPU kernels' rules
// and messages (Checks.h checkMatmul).
//
// With SPMD_RT_GEMM_STATS=1 in the environment, each GEMM of step 1 on
// (spmd_rt_set_step; step 0 is the warm-up, where cuBLAS picks kernels and
// CUDA loads them) is bracketed by CUDA events, and spmd_rt_finalize prints,
// per rank, the GEMMs' count, floating-point operations (2 n k m per
// product), GPU time and throughput: the "achieved TFLOP/s" of
// bench/cuda_step_time.py. The events cost host time: time steps without.
//
// Reference: cuBLAS documentation, cublasGemmStridedBatchedEx and
// cublasComputeType_t.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include <cublas_v2.h>

#include <cstdio>

using namespace spmd::rt;
using namespace spmd::rt::cuda;

namespace {

void checkCublas(cublasStatus_t rc, const char *what) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    spmd_rt_fatal("%s: cuBLAS error %s: %s", what, cublasGetStatusName(rc),
                  cublasGetStatusString(rc));
}

/// The process's cuBLAS handle, bound to the compute stream. Never
/// destroyed: cublasDestroy at exit may run after the CUDA runtime unloaded.
cublasHandle_t handle() {
  static cublasHandle_t h = [] {
    cublasHandle_t created = nullptr;
    checkCublas(cublasCreate(&created), "cublasCreate");
    checkCublas(cublasSetStream(created, computeStream()), "cublasSetStream");
    return created;
  }();
  return h;
}

/// cuBLAS's type of T's storage, and the type T multiplies in.
template <typename T> struct GemmTypes;
template <> struct GemmTypes<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};
template <> struct GemmTypes<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
};
template <> struct GemmTypes<BFloat16> {
  static constexpr cudaDataType_t data = CUDA_R_16BF;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
};

/// SPMD_RT_GEMM_STATS: the GPU time of every GEMM, read at finalize.
IntervalTimer &gemmTimer() {
  static IntervalTimer timer("SPMD_RT_GEMM_STATS");
  return timer;
}

} // namespace

namespace spmd::rt::cuda {

template <typename T, typename C>
void gemmBatched(const char *kernel, int64_t batch, int64_t n, int64_t k,
                 int64_t m, double alpha, const T *a, bool transA,
                 int64_t strideA, const T *b, bool transB, int64_t strideB,
                 double beta, C *c, int64_t strideC) {
  static_assert(std::is_same_v<OpMathT<T>, OpMathT<C>>,
                "C holds T or T's compute type");
  // cuBLAS takes alpha and beta in the compute type: float for bf16.
  using M = OpMathT<T>;
  const M alphaT = static_cast<M>(alpha), betaT = static_cast<M>(beta);
  // Column-major C^T[m, n] = op(B)^T[m, k] op(A)^T[k, n].
  const int lda = static_cast<int>(transA ? n : k);
  const int ldb = static_cast<int>(transB ? k : m);
  const bool timed = gemmTimer().active();
  if (timed)
    gemmTimer().begin();
  checkCublas(cublasGemmStridedBatchedEx(
                  handle(), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                  transA ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(m),
                  static_cast<int>(n), static_cast<int>(k), &alphaT, b,
                  GemmTypes<T>::data, ldb, strideB, a, GemmTypes<T>::data, lda,
                  strideA, &betaT, c, GemmTypes<C>::data, static_cast<int>(m),
                  strideC, static_cast<int>(batch), GemmTypes<T>::compute,
                  CUBLAS_GEMM_DEFAULT),
              kernel);
  if (timed)
    gemmTimer().end(kernel,
                    2.0 * double(batch) * double(n) * double(k) * double(m));
}

template void gemmBatched<float, float>(const char *, int64_t, int64_t, int64_t,
                                        int64_t, double, const float *, bool,
                                        int64_t, const float *, bool, int64_t,
                                        double, float *, int64_t);
template void gemmBatched<double, double>(const char *, int64_t, int64_t,
                                          int64_t, int64_t, double,
                                          const double *, bool, int64_t,
                                          const double *, bool, int64_t, double,
                                          double *, int64_t);
template void gemmBatched<BFloat16, BFloat16>(const char *, int64_t, int64_t,
                                              int64_t, int64_t, double,
                                              const BFloat16 *, bool, int64_t,
                                              const BFloat16 *, bool, int64_t,
                                              double, BFloat16 *, int64_t);
template void gemmBatched<BFloat16, float>(const char *, int64_t, int64_t,
                                           int64_t, int64_t, double,
                                           const BFloat16 *, bool, int64_t,
                                           const BFloat16 *, bool, int64_t,
                                           double, float *, int64_t);

} // namespace spmd::rt::cuda

namespace {

/// out = beta * self (broadcast) + alpha * (a @ b) per batch.
void matmul(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
            const SpmdBuffer *a, const SpmdBuffer *b, double beta, double alpha,
            int32_t rank, bool transA, bool transB) {
  // Named copies: lambdas cannot capture structured bindings in C++17.
  const std::array<int64_t, 4> dims =
      checkMatmul(kernel, out, a, b, rank, transA, transB);
  const int64_t batch = dims[0], n = dims[1], k = dims[2], m = dims[3];
  // ATen ignores self when beta == 0, NaNs included.
  if (!self || beta == 0.0)
    beta = 0.0;
  dispatchDevice<kFloat | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    if (beta != 0.0) {
      int64_t strides[SPMD_MAX_RANK];
      broadcastStrides(kernel, self, out->rank, out->shape, strides);
      cuda::spmd_rt_expand(out, self);
    }
    if (n == 0 || m == 0 || batch == 0)
      return;
    if (k == 0) {
      // Nothing to multiply (cuBLAS rejects lda = 0): out = beta * self.
      if (beta == 0.0)
        check(cudaMemsetAsync(out->data, 0, out->numel * sizeof(T),
                              computeStream()),
              kernel);
      else
        cuda::spmd_rt_mul_scalar(out, out, beta);
      return;
    }
    std::unique_ptr<Scratch> aStorage, bStorage;
    const T *x = dataAs<T>(a, aStorage, kernel);
    const T *y = dataAs<T>(b, bStorage, kernel);
    gemmBatched<T, T>(kernel, batch, n, k, m, alpha, x, transA, n * k, y,
                      transB, k * m, beta, dataOf<T>(out), n * m);
  });
}

} // namespace

void spmd::rt::cuda::reportGemmStats() {
  IntervalTimer::Total all;
  for (const auto &entry : gemmTimer().collect()) {
    all.calls += entry.second.calls;
    all.ms += entry.second.ms;
    all.work += entry.second.work;
  }
  if (all.calls == 0)
    return;
  std::printf("spmd-run: rank %d: cuBLAS GEMMs from step 1: %lld calls, "
              "%.4f TFLOP in %.3f ms: %.2f TFLOP/s\n",
              spmd_rt_rank(), static_cast<long long>(all.calls),
              all.work / 1e12, all.ms,
              all.ms > 0 ? all.work / (all.ms / 1e3) / 1e12 : 0.0);
  std::fflush(stdout);
}

namespace spmd::rt::cuda {

SPMD_RT_MATMUL_KERNELS(matmul)

} // namespace spmd::rt::cuda
