//===- Dispatch.cpp - the kernels' C entry points -------------------------===//
//
// Each spmd_rt_<kernel> of Runtime.h calls the CPU or the CUDA implementation
// (Backends.h), as spmd_rt_set_backend chose before the runtime started.
//
//===----------------------------------------------------------------------===//

#include "Backends.h"

#ifdef SPMD_HAVE_CUDA
#define SPMD_RT_KERNEL(name, params, args)                                     \
  void spmd_rt_##name params {                                                 \
    if (spmd::rt::cudaBackendActive()) {                                       \
      spmd::rt::cuda::acquireAll args;                                         \
      if (!spmd::rt::cuda::profiling())                                        \
        return spmd::rt::cuda::spmd_rt_##name args;                            \
      spmd::rt::cuda::profileBegin();                                          \
      spmd::rt::cuda::spmd_rt_##name args;                                     \
      return spmd::rt::cuda::profileEnd("spmd_rt_" #name);                     \
    }                                                                          \
    return spmd::rt::cpu::spmd_rt_##name args;                                 \
  }
#else
#define SPMD_RT_KERNEL(name, params, args)                                     \
  void spmd_rt_##name params { return spmd::rt::cpu::spmd_rt_##name args; }
#endif

extern "C" {
#include "spmd/Runtime/KernelList.def"
} // extern "C"
