//===- Backend.cpp - the CPU backend's entry of the backend table ---------===//
//
// Host memory, the kernels of runtime/lib/cpu/ and the MPI collectives,
// complete when they return.
//
//===----------------------------------------------------------------------===//

#include "../Backends.h"

#include <cstdlib>
#include <cstring>

namespace spmd::rt::cpu {
namespace {

/// 64-byte aligned, for vectorised kernels; never a zero-size request.
void *allocate(int64_t bytes, const char *) {
  size_t request = (static_cast<size_t>(bytes) + 63) / 64 * 64 + 64;
  void *data = std::aligned_alloc(64, request);
  if (!data)
    spmd_rt_fatal("out of memory allocating %lld bytes",
                  static_cast<long long>(bytes));
  return data;
}

void release(Storage &storage) { std::free(storage.data); }

size_t byteSize(const SpmdBuffer *buffer) {
  return static_cast<size_t>(buffer->numel) * spmd_rt_dtype_size(buffer->dtype);
}

void write(SpmdBuffer *buffer, const void *host, const char *) {
  std::memcpy(buffer->data, host, byteSize(buffer));
}

void read(const SpmdBuffer *buffer, void *host, const char *) {
  std::memcpy(host, buffer->data, byteSize(buffer));
}

/// The kernels run to completion on the calling thread.
void synchronize() {}

} // namespace

const Backend &backend() {
  // Host collectives are complete on return: no hooks around them.
  static const Backend cpu = {
      "cpu",       "mpi",   allocate, release, write,   read,
      synchronize, nullptr, nullptr,  nullptr, nullptr, nullptr,
#define SPMD_RT_KERNEL(kernel, params, args) spmd_rt_##kernel,
#include "spmd/Runtime/KernelList.def"
  };
  return cpu;
}

} // namespace spmd::rt::cpu
