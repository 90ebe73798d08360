//===- Backend.cpp - the CUDA backend's entry of the backend table --------===//
//
// Device memory (Device.cu), the kernels of runtime/lib/cuda/ and NCCL on
// the communication stream. Each kernel first makes the compute stream wait
// for pending collective results among its buffers, and is timed when
// SPMD_RT_PROFILE asks.
//
//===----------------------------------------------------------------------===//

#include "../Backends.h"

#include <cuda_runtime_api.h>

namespace spmd::rt::cuda {
cudaStream_t commStream();

namespace {

// The kernels as this backend runs them: run_<name> calls spmd_rt_<name>
// (qualified: the buffer arguments would bring in the C entry point).
#define SPMD_RT_KERNEL(name, params, args)                                     \
  void run_##name params {                                                     \
    acquireAll args;                                                           \
    if (!profiling())                                                          \
      return cuda::spmd_rt_##name args;                                        \
    profileBegin();                                                            \
    cuda::spmd_rt_##name args;                                                 \
    profileEnd("spmd_rt_" #name);                                              \
  }
#include "spmd/Runtime/KernelList.def"

/// Reports device errors while MPI can still end the job, then the
/// statistics SPMD_RT_GEMM_STATS and SPMD_RT_PROFILE asked for.
void finish() {
  synchronize();
  reportGemmStats();
  reportProfile();
}

void *communicationStream() { return commStream(); }

} // namespace

const Backend &backend() {
  static const Backend cuda = {
      "cuda",          "nccl", allocate,    release,
      write,           read,   synchronize, beforeCollective,
      afterCollective, finish, shutdown,    communicationStream,
#define SPMD_RT_KERNEL(kernel, params, args) run_##kernel,
#include "spmd/Runtime/KernelList.def"
  };
  return cuda;
}

} // namespace spmd::rt::cuda
