//===- Backends.h - the backend table of the runtime ------------*- C++ -*-===//
//
// A backend (spmd_rt_set_backend) is a `Backend` entry: where buffers live,
// its kernels and how collectives are ordered around them. The CPU backend
// (cpu/Backend.cpp, kernels `spmd::rt::cpu::spmd_rt_<name>` of
// runtime/lib/cpu/) is always built; the CUDA backend (cuda/Backend.cpp,
// kernels `spmd::rt::cuda::spmd_rt_<name>` of runtime/lib/cuda/) when the
// runtime is built with CUDA. Dispatch.cpp registers them and defines each
// C entry point of KernelList.def as a call through the running backend's
// table. Inside a backend, a kernel is called qualified (cpu::spmd_rt_<name>):
// unqualified, its buffer arguments also find the C entry point.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_BACKENDS_H
#define SPMD_RUNTIME_BACKENDS_H

#include "spmd/Runtime/Runtime.h"

#include <atomic>
#include <memory>
#include <string>

/// Defines mm, addmm, bmm, baddbmm and matmul in a backend's namespace, each
/// one call of that backend's `matmul(kernel, out, self, a, b, beta, alpha,
/// rank, transA, transB)` (self NULL: no addend), so both backends give the
/// same entry points the same ranks, defaults and kernel names.
#define SPMD_RT_MATMUL_KERNELS(matmul)                                         \
  void spmd_rt_mm(SpmdBuffer *out, const SpmdBuffer *self,                     \
                  const SpmdBuffer *mat2) {                                    \
    matmul("spmd_rt_mm", out, nullptr, self, mat2, 0.0, 1.0, 2, false, false); \
  }                                                                            \
  void spmd_rt_addmm(SpmdBuffer *out, const SpmdBuffer *self,                  \
                     const SpmdBuffer *mat1, const SpmdBuffer *mat2,           \
                     double beta, double alpha) {                              \
    matmul("spmd_rt_addmm", out, self, mat1, mat2, beta, alpha, 2, false,      \
           false);                                                             \
  }                                                                            \
  void spmd_rt_bmm(SpmdBuffer *out, const SpmdBuffer *self,                    \
                   const SpmdBuffer *mat2) {                                   \
    matmul("spmd_rt_bmm", out, nullptr, self, mat2, 0.0, 1.0, 3, false,        \
           false);                                                             \
  }                                                                            \
  void spmd_rt_baddbmm(SpmdBuffer *out, const SpmdBuffer *self,                \
                       const SpmdBuffer *batch1, const SpmdBuffer *batch2,     \
                       double beta, double alpha) {                            \
    matmul("spmd_rt_baddbmm", out, self, batch1, batch2, beta, alpha, 3,       \
           false, false);                                                      \
  }                                                                            \
  void spmd_rt_matmul(SpmdBuffer *out, const SpmdBuffer *self,                 \
                      const SpmdBuffer *a, const SpmdBuffer *b, double beta,   \
                      double alpha, int64_t trans_a, int64_t trans_b) {        \
    matmul("spmd_rt_matmul", out, self, a, b, beta, alpha,                     \
           checkMatmulRank("spmd_rt_matmul", out), trans_a != 0,               \
           trans_b != 0);                                                      \
  }

/// Defines the four embedding entry points in a backend's namespace: each
/// one call of that backend's `embedding(kernel, out, weight, indices, rows)`
/// or `embeddingBackward(kernel, out, grad_output, indices, padding_idx,
/// scale_grad_by_freq, rows)`, with the rows a rank holds (embeddingRows,
/// Checks.h: the whole table without a `rows` table).
#define SPMD_RT_EMBEDDING_KERNELS(embedding, embeddingBackward)                \
  void spmd_rt_embedding(SpmdBuffer *out, const SpmdBuffer *weight,            \
                         const SpmdBuffer *indices, int64_t padding_idx) {     \
    (void)padding_idx; /* Only the backward skips padding rows. */             \
    embedding("spmd_rt_embedding", out, weight, indices,                       \
              embeddingRows(weight, nullptr));                                 \
  }                                                                            \
  void spmd_rt_embedding_rows(SpmdBuffer *out, const SpmdBuffer *weight,       \
                              const SpmdBuffer *indices,                       \
                              const int64_t *rows) {                           \
    embedding("spmd_rt_embedding_rows", out, weight, indices,                  \
              embeddingRows(weight, rows));                                    \
  }                                                                            \
  void spmd_rt_embedding_dense_backward(                                       \
      SpmdBuffer *out, const SpmdBuffer *grad_output,                          \
      const SpmdBuffer *indices, int64_t padding_idx,                          \
      int64_t scale_grad_by_freq) {                                            \
    embeddingBackward("spmd_rt_embedding_dense_backward", out, grad_output,    \
                      indices, padding_idx, scale_grad_by_freq,                \
                      embeddingRows(out, nullptr));                            \
  }                                                                            \
  void spmd_rt_embedding_dense_backward_rows(                                  \
      SpmdBuffer *out, const SpmdBuffer *grad_output,                          \
      const SpmdBuffer *indices, int64_t padding_idx,                          \
      int64_t scale_grad_by_freq, const int64_t *rows) {                       \
    embeddingBackward("spmd_rt_embedding_dense_backward_rows", out,            \
                      grad_output, indices, padding_idx, scale_grad_by_freq,   \
                      embeddingRows(out, rows));                               \
  }

/// Defines the four nll_loss entry points in a backend's namespace: each one
/// call of that backend's `forward(kernel, output, total_weight, self,
/// target, weight, reduction, ignore_index, rows)` or `backward(kernel, out,
/// grad_output, self, target, weight, total_weight, reduction, ignore_index,
/// rows)`, `rows` NULL (all classes) for the plain kernels.
#define SPMD_RT_NLL_LOSS_KERNELS(forward, backward)                            \
  void spmd_rt_nll_loss_forward(                                               \
      SpmdBuffer *output, SpmdBuffer *total_weight, const SpmdBuffer *self,    \
      const SpmdBuffer *target, const SpmdBuffer *weight, int64_t reduction,   \
      int64_t ignore_index) {                                                  \
    forward("spmd_rt_nll_loss_forward", output, total_weight, self, target,    \
            weight, reduction, ignore_index, nullptr);                         \
  }                                                                            \
  void spmd_rt_nll_loss_forward_rows(                                          \
      SpmdBuffer *output, SpmdBuffer *total_weight, const SpmdBuffer *self,    \
      const SpmdBuffer *target, const SpmdBuffer *weight, int64_t reduction,   \
      int64_t ignore_index, const int64_t *rows) {                             \
    forward("spmd_rt_nll_loss_forward_rows", output, total_weight, self,       \
            target, weight, reduction, ignore_index, rows);                    \
  }                                                                            \
  void spmd_rt_nll_loss_backward(                                              \
      SpmdBuffer *out, const SpmdBuffer *grad_output, const SpmdBuffer *self,  \
      const SpmdBuffer *target, const SpmdBuffer *weight,                      \
      const SpmdBuffer *total_weight, int64_t reduction,                       \
      int64_t ignore_index) {                                                  \
    backward("spmd_rt_nll_loss_backward", out, grad_output, self, target,      \
             weight, total_weight, reduction, ignore_index, nullptr);          \
  }                                                                            \
  void spmd_rt_nll_loss_backward_rows(                                         \
      SpmdBuffer *out, const SpmdBuffer *grad_output, const SpmdBuffer *self,  \
      const SpmdBuffer *target, const SpmdBuffer *weight,                      \
      const SpmdBuffer *total_weight, int64_t reduction, int64_t ignore_index, \
      const int64_t *rows) {                                                   \
    backward("spmd_rt_nll_loss_backward_rows", out, grad_output, self, target, \
             weight, total_weight, reduction, ignore_index, rows);             \
  }

namespace spmd::rt {

struct Backend;

/// The data of one or more buffers (`SpmdBuffer::storage`; spmd_rt_view
/// shares it). Host memory on the CPU backend, device memory on CUDA.
struct Storage {
  std::atomic<int64_t> refs{1};
  int64_t bytes = 0;
  void *data = nullptr;
  /// The backend whose memory holds `data`.
  const Backend *backend = nullptr;
  /// CUDA backend only (CUDA events, opaque here): `ready` is recorded on
  /// the communication stream after a collective that wrote `data`, and the
  /// compute stream waits for it before the first kernel that uses the
  /// buffer (so compute that does not need the result overlaps the
  /// collective); `commRead` is recorded after a collective that read
  /// `data`. The allocator reuses a freed block only once both are done.
  std::shared_ptr<void> ready, commRead;
};

/// One backend of spmd_rt_set_backend. Hooks take `what`, the caller's
/// name, for messages.
struct Backend {
  /// "cpu", "cuda".
  const char *name;
  /// The collective backend that runs on its buffers ("mpi", "nccl").
  const char *collectives;
  /// Buffer data (Storage): `bytes` bytes of it, given back by `release`;
  /// host copies of a whole buffer (spmd_rt_write/read), and a wait for all
  /// the work issued so far (spmd_rt_synchronize).
  void *(*allocate)(int64_t bytes, const char *what);
  void (*release)(Storage &storage);
  void (*write)(SpmdBuffer *buffer, const void *host, const char *what);
  void (*read)(const SpmdBuffer *buffer, void *host, const char *what);
  void (*synchronize)();
  /// Around each collective (null: none): `beforeCollective` orders it
  /// after the kernels issued before, `afterCollective` completes it (null:
  /// the collective backend synchronises, so it is complete on return).
  void (*beforeCollective)(const char *what);
  void (*afterCollective)(SpmdBuffer *out, const SpmdBuffer *in,
                          const char *what);
  /// spmd_rt_finalize (null: nothing): `finish` while the collective
  /// backend still runs, `shutdown` after it stopped.
  void (*finish)();
  void (*shutdown)();
  /// The CUDA stream (a cudaStream_t) the NCCL collectives run on; null:
  /// NCCL makes its own.
  void *(*commStream)();
  /// The kernels of KernelList.def; null where the backend has none (the C
  /// entry point then ends the job naming the kernel and the backend).
#define SPMD_RT_KERNEL(kernel, params, args) void(*kernel) params;
#include "spmd/Runtime/KernelList.def"
};

/// The backend spmd_rt_set_backend chose (the CPU's by default); fixed once
/// the first buffer exists (Buffer.cpp).
const Backend &activeBackend();
/// The built backend named `name`, or null (Dispatch.cpp).
const Backend *findBackend(const std::string &name);
/// Test hook: runs `backend` from now on, with no checks (a unit test gives
/// it an entry that lacks a kernel).
void useBackendForTesting(const Backend &backend);

namespace cpu {
#define SPMD_RT_KERNEL(name, params, args) void spmd_rt_##name params;
#include "spmd/Runtime/KernelList.def"
/// The CPU backend: host memory, these kernels, MPI.
const Backend &backend();
} // namespace cpu

namespace cuda {
#define SPMD_RT_KERNEL(name, params, args) void spmd_rt_##name params;
#include "spmd/Runtime/KernelList.def"
/// The CUDA backend (built with SPMD_HAVE_CUDA): the device memory and
/// stream ordering below, these kernels.
const Backend &backend();
/// Device memory and stream ordering of the CUDA backend (Device.cu).
/// `allocate` takes a block from the caching allocator (cudaMalloc only when
/// no freed block fits); `release` gives a storage's block back, for reuse
/// once its pending collective events are done.
void *allocate(int64_t bytes, const char *what);
void release(Storage &storage);
/// The compute stream waits for a pending collective result in `buffer`.
void acquire(const SpmdBuffer *buffer);
/// Around each collective: the communication stream waits for the compute
/// work issued so far; afterwards `out` gets its `ready` event and `in` its
/// `commRead` event (Storage).
void beforeCollective(const char *what);
void afterCollective(SpmdBuffer *out, const SpmdBuffer *in, const char *what);
/// Host <-> device copies of a whole buffer (spmd_rt_write/read); `read`
/// waits for the buffer's producers and reports device-side errors.
void write(SpmdBuffer *buffer, const void *host, const char *what);
void read(const SpmdBuffer *buffer, void *host, const char *what);
/// Waits for both streams and reports device-side errors.
void synchronize();
/// Called by spmd_rt_finalize after the collective backend stopped: waits,
/// then frees the cached blocks, the streams and the library handles.
void shutdown();
/// Prints the GEMM statistics SPMD_RT_GEMM_STATS=1 asked for (Linalg.cu)
/// and the kernel profile SPMD_RT_PROFILE=1 asked for (Device.cu);
/// spmd_rt_finalize calls them while the runtime still runs.
void reportGemmStats();
void reportProfile();
/// SPMD_RT_PROFILE=1: the GPU time of every kernel call from step 1 on
/// (spmd_rt_set_step; step 0 is the warm-up), by kernel, bracketed by CUDA
/// events on the compute stream (cuda/Backend.cpp calls these around each
/// call).
/// Where the GPU waits for the host, a call's time includes the wait.
bool profiling();
void profileBegin();
void profileEnd(const char *kernel);

/// The compute stream waits for pending collective results among a kernel's
/// buffer arguments (every SpmdBuffer, and cat's list of `n` inputs).
inline void acquireAll() {}
template <typename... Rest>
void acquireAll(const SpmdBuffer *buffer, Rest... rest);
template <typename... Rest>
void acquireAll(int32_t n, const SpmdBuffer *const *list, Rest... rest);
template <typename T, typename... Rest> void acquireAll(T, Rest... rest);

template <typename... Rest>
void acquireAll(const SpmdBuffer *buffer, Rest... rest) {
  if (buffer)
    acquire(buffer);
  acquireAll(rest...);
}
template <typename... Rest>
void acquireAll(int32_t n, const SpmdBuffer *const *list, Rest... rest) {
  for (int32_t i = 0; i < n; ++i)
    acquire(list[i]);
  acquireAll(rest...);
}
/// Results (SpmdBuffer *) are fresh buffers, and scalars need nothing.
template <typename T, typename... Rest> void acquireAll(T, Rest... rest) {
  acquireAll(rest...);
}
} // namespace cuda

/// The seed and step of the job's random draws (spmd_rt_set_seed/_step):
/// with the op id and the global element index, the Philox key and counter
/// (Philox.h `uniform`), so the CUDA kernels draw the CPU's numbers.
uint64_t randomSeed();
uint64_t randomStep();

} // namespace spmd::rt

#endif // SPMD_RUNTIME_BACKENDS_H
