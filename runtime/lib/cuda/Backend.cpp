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

// The kernels of KernelList.def this backend lacks, each defining
// SPMD_RT_CUDA_LACKS_<name> as a comma: their table entries are null, so a
// call reports "spmd_rt_<name>: not implemented by backend 'cuda'".
// Convolution and pooling (the vision models) run on the CPU backend only.
#define SPMD_RT_CUDA_LACKS_convolution ,
#define SPMD_RT_CUDA_LACKS_convolution_backward ,
#define SPMD_RT_CUDA_LACKS_max_pool2d_with_indices ,
#define SPMD_RT_CUDA_LACKS_max_pool2d_with_indices_backward ,
#define SPMD_RT_CUDA_LACKS_avg_pool2d ,
#define SPMD_RT_CUDA_LACKS_avg_pool2d_backward ,
#define SPMD_RT_CUDA_LACKS_adaptive_avg_pool2d ,
#define SPMD_RT_CUDA_LACKS_adaptive_avg_pool2d_backward ,
// The mixture-of-experts router's topk, the experts' sort and their
// backward's scatter: CPU only so far.
#define SPMD_RT_CUDA_LACKS_scatter ,
#define SPMD_RT_CUDA_LACKS_sort ,
#define SPMD_RT_CUDA_LACKS_topk ,
// `lacking` when this backend lacks kernel `name`, else `present`: the probe
// macro's comma, where it is defined, shifts `lacking` into second place.
#define SPMD_RT_SECOND_(first, second, ...) second
#define SPMD_RT_SECOND(...) SPMD_RT_SECOND_(__VA_ARGS__)
#define SPMD_RT_IF_LACKS(name, lacking, present)                               \
  SPMD_RT_SECOND(SPMD_RT_CUDA_LACKS_##name lacking, present, )

// The kernels as this backend runs them: run_<name> calls spmd_rt_<name>
// (qualified: the buffer arguments would bring in the C entry point).
#define SPMD_RT_KERNEL(name, params, args)                                     \
  SPMD_RT_IF_LACKS(                                                            \
      name, , void run_##name params {                                         \
        acquireAll args;                                                       \
        if (!profiling())                                                      \
          return cuda::spmd_rt_##name args;                                    \
        profileBegin();                                                        \
        cuda::spmd_rt_##name args;                                             \
        profileEnd("spmd_rt_" #name);                                          \
      })
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
#define SPMD_RT_KERNEL(kernel, params, args)                                   \
  SPMD_RT_IF_LACKS(kernel, nullptr, run_##kernel),
#include "spmd/Runtime/KernelList.def"
  };
  return cuda;
}

} // namespace spmd::rt::cuda
