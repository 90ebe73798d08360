//===- Dispatch.cpp - the backend registry, the kernels' entry points -----===//
//
// The backends built into the runtime (Backends.h; the CPU's always, the
// CUDA backend and the NCCL collectives when the runtime is built with
// them), and each spmd_rt_<kernel> of Runtime.h as a call of the running
// backend's kernel.
//
//===----------------------------------------------------------------------===//

#include "Backends.h"
#include "Collectives.h"

using spmd::rt::Backend;

const Backend *spmd::rt::findBackend(const std::string &name) {
  static const Backend *const built[] = {
      &cpu::backend(),
#ifdef SPMD_HAVE_CUDA
      &cuda::backend(),
#endif
  };
  for (const Backend *backend : built)
    if (name == backend->name)
      return backend;
  return nullptr;
}

const spmd::runtime::CollectiveLibrary *
spmd::runtime::findCollectiveLibrary(const std::string &name) {
  static const CollectiveLibrary *const built[] = {
      &mpiLibrary(),
#ifdef SPMD_HAVE_NCCL
      &ncclLibrary(),
#endif
  };
  for (const CollectiveLibrary *library : built)
    if (name == library->name)
      return library;
  return nullptr;
}

namespace {
/// The running backend's kernel `member` ("spmd_rt_<name>" in messages);
/// fatal where the backend has none.
template <typename Kernel>
Kernel kernelOf(Kernel Backend::*member, const char *kernel) {
  const Backend &backend = spmd::rt::activeBackend();
  if (Kernel fn = backend.*member)
    return fn;
  spmd_rt_fatal("%s: not implemented by backend '%s'", kernel, backend.name);
}
} // namespace

#define SPMD_RT_KERNEL(name, params, args)                                     \
  void spmd_rt_##name params {                                                 \
    return kernelOf(&Backend::name, "spmd_rt_" #name) args;                    \
  }

extern "C" {
#include "spmd/Runtime/KernelList.def"
} // extern "C"
