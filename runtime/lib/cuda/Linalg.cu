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
// default; f64 in f64. bf16 (CUDA only) is read and written as bf16 but
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
#include <cstdlib>
#include <string>
#include <vector>

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

/// SPMD_RT_GEMM_STATS: events around every GEMM, read at finalize.
struct GemmStats {
  bool enabled = false;
  int64_t calls = 0;
  double flops = 0;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> events;

  static GemmStats &get() {
    static GemmStats stats = [] {
      GemmStats s;
      const char *env = std::getenv("SPMD_RT_GEMM_STATS");
      s.enabled = env && *env && std::string(env) != "0";
      return s;
    }();
    return stats;
  }
};

/// out = beta * self (broadcast) + alpha * (a @ b) per batch.
void matmul(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
            const SpmdBuffer *a, const SpmdBuffer *b, double beta, double alpha,
            int32_t rank, bool transA = false, bool transB = false) {
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
    const cudaDataType_t type = GemmTypes<T>::data;
    const cublasComputeType_t compute = GemmTypes<T>::compute;
    // cuBLAS takes alpha and beta in the compute type: float for bf16.
    using M = OpMathT<T>;
    const M alphaT = static_cast<M>(alpha), betaT = static_cast<M>(beta);
    // Column-major C^T[m, n] = op(B)^T[m, k] op(A)^T[k, n].
    GemmStats &stats = GemmStats::get();
    const bool timed = stats.enabled && randomStep() >= 1;
    cudaEvent_t start = timed ? recordTimingEvent(kernel) : nullptr;
    int lda = static_cast<int>(transA ? n : k);
    int ldb = static_cast<int>(transB ? k : m);
    checkCublas(cublasGemmStridedBatchedEx(
                    handle(), transB ? CUBLAS_OP_T : CUBLAS_OP_N,
                    transA ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(m),
                    static_cast<int>(n), static_cast<int>(k), &alphaT, y, type,
                    ldb, k * m, x, type, lda, n * k, &betaT, out->data, type,
                    static_cast<int>(m), n * m, static_cast<int>(batch),
                    compute, CUBLAS_GEMM_DEFAULT),
                kernel);
    if (timed) {
      stats.events.emplace_back(start, recordTimingEvent(kernel));
      stats.calls += 1;
      stats.flops += 2.0 * double(batch) * double(n) * double(k) * double(m);
    }
  });
}

} // namespace

void spmd::rt::cuda::reportGemmStats() {
  GemmStats &stats = GemmStats::get();
  if (!stats.enabled || stats.calls == 0)
    return;
  double seconds = 0;
  for (auto [start, stop] : stats.events) {
    float ms = 0;
    check(cudaEventSynchronize(stop), "SPMD_RT_GEMM_STATS");
    check(cudaEventElapsedTime(&ms, start, stop), "SPMD_RT_GEMM_STATS");
    seconds += ms / 1e3;
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
  }
  std::printf("spmd-run: rank %d: cuBLAS GEMMs from step 1: %lld calls, "
              "%.4f TFLOP in "
              "%.3f ms: %.2f TFLOP/s\n",
              spmd_rt_rank(), static_cast<long long>(stats.calls),
              stats.flops / 1e12, seconds * 1e3,
              seconds > 0 ? stats.flops / seconds / 1e12 : 0.0);
  std::fflush(stdout);
  stats.events.clear();
  stats.calls = 0;
  stats.flops = 0;
}

namespace spmd::rt::cuda {

void spmd_rt_mm(SpmdBuffer *out, const SpmdBuffer *self,
                const SpmdBuffer *mat2) {
  matmul("spmd_rt_mm", out, nullptr, self, mat2, 0.0, 1.0, 2);
}

void spmd_rt_addmm(SpmdBuffer *out, const SpmdBuffer *self,
                   const SpmdBuffer *mat1, const SpmdBuffer *mat2, double beta,
                   double alpha) {
  matmul("spmd_rt_addmm", out, self, mat1, mat2, beta, alpha, 2);
}

void spmd_rt_bmm(SpmdBuffer *out, const SpmdBuffer *self,
                 const SpmdBuffer *mat2) {
  matmul("spmd_rt_bmm", out, nullptr, self, mat2, 0.0, 1.0, 3);
}

void spmd_rt_baddbmm(SpmdBuffer *out, const SpmdBuffer *self,
                     const SpmdBuffer *batch1, const SpmdBuffer *batch2,
                     double beta, double alpha) {
  matmul("spmd_rt_baddbmm", out, self, batch1, batch2, beta, alpha, 3);
}

void spmd_rt_matmul(SpmdBuffer *out, const SpmdBuffer *self,
                    const SpmdBuffer *a, const SpmdBuffer *b, double beta,
                    double alpha, int64_t trans_a, int64_t trans_b) {
  const char *kernel = "spmd_rt_matmul";
  matmul(kernel, out, self, a, b, beta, alpha, checkMatmulRank(kernel, out),
         trans_a != 0, trans_b != 0);
}

} // namespace spmd::rt::cuda
