//===- Device.cu - streams, caching allocator, events, device errors ------===//
//
// The process state of the CUDA backend (Cuda.h, Backends.h):
//
//   - two non-blocking streams on the rank's device (the one NcclBackend made
//     current when the runtime started): compute (kernels, cuBLAS, copies)
//     and communication (NCCL). A collective first makes the communication
//     stream wait for the compute work issued so far (an event), and
//     records an event after itself that the compute stream waits for only
//     when a kernel first uses the result (`acquire`), so compute that does
//     not depend on the collective overlaps it: the "wait at first use" of
//     PyTorch's async collectives (torch.distributed._functional_collectives
//     AsyncCollectiveTensor);
//   - a caching allocator: freed blocks are kept by size and reused, so a
//     step that allocates what the previous one did calls cudaMalloc only in
//     the first step (PyTorch's CUDACachingAllocator idea, without block
//     splitting). A block that a collective still reads or writes is reused
//     only after that collective's event completed (PyTorch's
//     record_stream);
//   - the device error slot, the kernel-name table for its messages, and the
//     cache of constant host tables copied to the device;
//   - IntervalTimer, and with it SPMD_RT_PROFILE=1: events around every
//     kernel call from step 1 on, and a table of GPU time per kernel printed
//     by spmd_rt_finalize.
//
// The runtime is driven from one thread (the SPMD program); a mutex guards
// the state anyway, so a misbehaving caller cannot corrupt it.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

using namespace spmd::rt;
using namespace spmd::rt::cuda;

namespace {

/// A block of device memory as the allocator handed it out.
struct Block {
  void *data = nullptr;
  int64_t size = 0; // bytes, rounded
};

/// Rounded request size: 512-byte granules, so that equal requests share
/// blocks and every block is aligned for vector loads.
int64_t roundSize(int64_t bytes) {
  return std::max<int64_t>(512, (bytes + 511) / 512 * 512);
}

/// Whether a CUDA event (as kept in Storage) has completed.
bool eventDone(const std::shared_ptr<void> &event) {
  if (!event)
    return true;
  cudaError_t rc = cudaEventQuery(static_cast<cudaEvent_t>(event.get()));
  if (rc == cudaErrorNotReady)
    return false;
  check(rc, "cudaEventQuery");
  return true;
}

/// A new event recorded on `stream`, destroyed with its last owner
/// (cudaEventDestroy is safe on an event that has not completed yet).
std::shared_ptr<void> recordEvent(cudaStream_t stream, const char *what) {
  cudaEvent_t event = nullptr;
  check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what);
  check(cudaEventRecord(event, stream), what);
  return std::shared_ptr<void>(event, [](void *e) {
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(e));
  });
}

struct Context {
  std::mutex mutex;
  int device = 0;
  cudaStream_t compute = nullptr, comm = nullptr;
  DeviceError *errors = nullptr;
  std::vector<std::string> kernelNames = {"<unknown kernel>"};
  // Allocator: free blocks by size; blocks waiting for collective events;
  // sizes of the blocks handed out.
  std::multimap<int64_t, void *> freeBlocks;
  struct Deferred {
    Block block;
    std::shared_ptr<void> ready, commRead;
  };
  std::vector<Deferred> deferred;
  std::unordered_map<void *, int64_t> blockSizes;
  // Constant host tables, by (address, count).
  std::map<std::pair<const int64_t *, int64_t>, void *> tables;

  Context() {
    const char *what = "cuda backend";
    // The device was made current by NcclBackend when the runtime started
    // (spmd_rt_rank starts it if nothing did yet).
    (void)spmd_rt_rank();
    check(cudaGetDevice(&device), what);
    check(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), what);
    check(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), what);
    check(cudaMalloc(&errors, sizeof(DeviceError)), what);
    check(cudaMemset(errors, 0, sizeof(DeviceError)), what);
    // NCCL's packing scratch comes from the stream-ordered pool: keep what
    // it frees instead of returning it to the driver at each synchronisation.
    cudaMemPool_t pool = nullptr;
    check(cudaDeviceGetDefaultMemPool(&pool, device), what);
    uint64_t keep = UINT64_MAX;
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep),
          what);
  }

  /// Moves deferred blocks whose events completed to the free lists.
  void collectDeferred() {
    for (size_t i = 0; i < deferred.size();) {
      if (eventDone(deferred[i].ready) && eventDone(deferred[i].commRead)) {
        freeBlocks.emplace(deferred[i].block.size, deferred[i].block.data);
        deferred[i] = std::move(deferred.back());
        deferred.pop_back();
      } else {
        ++i;
      }
    }
  }

  /// Returns every cached block to CUDA (after the device is idle).
  void emptyCache(const char *what) {
    check(cudaDeviceSynchronize(), what);
    collectDeferred();
    for (auto &[size, data] : freeBlocks) {
      blockSizes.erase(data);
      check(cudaFree(data), what);
    }
    freeBlocks.clear();
  }

  void *allocate(int64_t bytes, const char *what) {
    std::lock_guard<std::mutex> lock(mutex);
    int64_t size = roundSize(bytes);
    if (!deferred.empty())
      collectDeferred();
    // The smallest free block that fits without wasting over a quarter.
    auto it = freeBlocks.lower_bound(size);
    if (it != freeBlocks.end() && it->first <= size + size / 4) {
      void *data = it->second;
      freeBlocks.erase(it);
      return data;
    }
    void *data = nullptr;
    cudaError_t rc = cudaMalloc(&data, static_cast<size_t>(size));
    if (rc == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      emptyCache(what);
      rc = cudaMalloc(&data, static_cast<size_t>(size));
    }
    if (rc == cudaErrorMemoryAllocation)
      spmd_rt_fatal("%s: out of device memory allocating %lld bytes", what,
                    static_cast<long long>(bytes));
    check(rc, what);
    blockSizes[data] = size;
    return data;
  }

  void release(void *data, std::shared_ptr<void> ready,
               std::shared_ptr<void> commRead) {
    std::lock_guard<std::mutex> lock(mutex);
    auto found = blockSizes.find(data);
    if (found == blockSizes.end())
      spmd_rt_fatal("cuda backend: freeing device memory the allocator did "
                    "not hand out");
    Block block{data, found->second};
    if (eventDone(ready) && eventDone(commRead))
      freeBlocks.emplace(block.size, block.data);
    else
      deferred.push_back({block, std::move(ready), std::move(commRead)});
  }
};

Context *globalContext = nullptr;

Context &context() {
  // Created on first use, after the runtime chose the device; never
  // destroyed by a static destructor (spmd_rt_finalize shuts it down), since
  // the CUDA runtime may already be unloading at exit.
  if (!globalContext)
    globalContext = new Context;
  return *globalContext;
}

Storage *storageOf(const SpmdBuffer *buffer) {
  return static_cast<Storage *>(buffer->storage);
}

/// A new timing event recorded on the compute stream.
cudaEvent_t recordTimingEvent(const char *what) {
  cudaEvent_t event = nullptr;
  check(cudaEventCreate(&event), what);
  check(cudaEventRecord(event, context().compute), what);
  return event;
}

} // namespace

//===----------------------------------------------------------------------===//
// Cuda.h
//===----------------------------------------------------------------------===//

void spmd::rt::cuda::fail(cudaError_t rc, const char *what) {
  spmd_rt_fatal("%s: CUDA error %s: %s", what, cudaGetErrorName(rc),
                cudaGetErrorString(rc));
}

cudaStream_t spmd::rt::cuda::computeStream() { return context().compute; }

cudaStream_t spmd::rt::cuda::commStream() { return context().comm; }

IntervalTimer::IntervalTimer(const char *env) : env(env) {
  const char *value = std::getenv(env);
  enabled = value && *value && std::string(value) != "0";
}

bool IntervalTimer::active() const { return enabled && randomStep() >= 1; }

void IntervalTimer::begin() { start = recordTimingEvent(env); }

void IntervalTimer::end(const char *label, double work) {
  intervals.push_back({label, start, recordTimingEvent(env), work});
}

std::map<std::string, IntervalTimer::Total> IntervalTimer::collect() {
  std::map<std::string, Total> totals;
  for (const Interval &i : intervals) {
    float ms = 0;
    check(cudaEventSynchronize(i.stop), env);
    check(cudaEventElapsedTime(&ms, i.start, i.stop), env);
    Total &t = totals[i.label];
    t.calls += 1;
    t.ms += ms;
    t.work += i.work;
    (void)cudaEventDestroy(i.start);
    (void)cudaEventDestroy(i.stop);
  }
  intervals.clear();
  return totals;
}

Scratch::Scratch(int64_t bytes, const char *what) : size(bytes) {
  ptr = context().allocate(bytes, what);
}

Scratch::~Scratch() { context().release(ptr, nullptr, nullptr); }

const int64_t *spmd::rt::cuda::deviceTable(const int64_t *host, int64_t count,
                                           const char *what) {
  Context &c = context();
  std::lock_guard<std::mutex> lock(c.mutex);
  auto key = std::make_pair(host, count);
  auto found = c.tables.find(key);
  if (found != c.tables.end())
    return static_cast<const int64_t *>(found->second);
  void *data = nullptr;
  size_t bytes =
      static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(int64_t);
  check(cudaMalloc(&data, bytes), what);
  if (count > 0)
    check(cudaMemcpy(data, host, static_cast<size_t>(count) * sizeof(int64_t),
                     cudaMemcpyHostToDevice),
          what);
  c.tables.emplace(key, data);
  return static_cast<const int64_t *>(data);
}

DeviceError *spmd::rt::cuda::deviceErrorSlot() { return context().errors; }

int spmd::rt::cuda::kernelId(const char *kernel) {
  Context &c = context();
  std::lock_guard<std::mutex> lock(c.mutex);
  for (size_t i = 0; i < c.kernelNames.size(); ++i)
    if (c.kernelNames[i] == kernel)
      return static_cast<int>(i);
  c.kernelNames.push_back(kernel);
  return static_cast<int>(c.kernelNames.size() - 1);
}

void spmd::rt::cuda::checkDeviceErrors() {
  Context &c = context();
  const char *what = "cuda backend";
  DeviceError error{};
  check(cudaDeviceSynchronize(), what);
  check(cudaMemcpy(&error, c.errors, sizeof error, cudaMemcpyDeviceToHost),
        what);
  if (error.kind == static_cast<int>(DeviceErrorKind::None))
    return;
  const char *kernel =
      error.kernel >= 0 && error.kernel < static_cast<int>(c.kernelNames.size())
          ? c.kernelNames[error.kernel].c_str()
          : "<unknown kernel>";
  switch (static_cast<DeviceErrorKind>(error.kind)) {
  case DeviceErrorKind::EmbeddingIndex:
    spmd_rt_fatal("%s: index %lld at position %lld is out of range [0, %lld)",
                  kernel, error.value, error.position, error.bound);
  case DeviceErrorKind::NllTarget:
    spmd_rt_fatal("%s: target %lld of sample %lld is out of bounds [0, %lld)",
                  kernel, error.value, error.position, error.bound);
  case DeviceErrorKind::DimIndex:
    spmd_rt_fatal("%s: index %lld is out of bounds for dim %lld of size %lld",
                  kernel, error.value, error.position, error.bound);
  case DeviceErrorKind::PlaneIndex:
    spmd_rt_fatal("%s: index %lld is outside a plane of %lld elements", kernel,
                  error.value, error.bound);
  case DeviceErrorKind::None:
    break;
  }
  spmd_rt_fatal("%s: device error %d", kernel, error.kind);
}

//===----------------------------------------------------------------------===//
// Backends.h
//===----------------------------------------------------------------------===//

void *spmd::rt::cuda::allocate(int64_t bytes, const char *what) {
  return context().allocate(bytes, what);
}

void spmd::rt::cuda::release(Storage &storage) {
  context().release(storage.data, std::move(storage.ready),
                    std::move(storage.commRead));
}

void spmd::rt::cuda::acquire(const SpmdBuffer *buffer) {
  Storage *storage = storageOf(buffer);
  if (!storage || !storage->ready)
    return;
  // Once per result: later kernels are ordered after this one anyway.
  check(cudaStreamWaitEvent(context().compute,
                            static_cast<cudaEvent_t>(storage->ready.get()), 0),
        "cudaStreamWaitEvent");
  storage->ready.reset();
}

void spmd::rt::cuda::beforeCollective(const char *what) {
  Context &c = context();
  std::shared_ptr<void> issued = recordEvent(c.compute, what);
  check(cudaStreamWaitEvent(c.comm, static_cast<cudaEvent_t>(issued.get()), 0),
        what);
}

void spmd::rt::cuda::afterCollective(SpmdBuffer *out, const SpmdBuffer *in,
                                     const char *what) {
  std::shared_ptr<void> done = recordEvent(context().comm, what);
  if (Storage *storage = storageOf(out))
    storage->ready = done;
  if (Storage *storage = storageOf(in))
    storage->commRead = done;
}

void spmd::rt::cuda::write(SpmdBuffer *buffer, const void *host,
                           const char *what) {
  size_t bytes =
      static_cast<size_t>(buffer->numel) * spmd_rt_dtype_size(buffer->dtype);
  if (bytes == 0)
    return;
  cudaStream_t stream = context().compute;
  check(cudaMemcpyAsync(buffer->data, host, bytes, cudaMemcpyHostToDevice,
                        stream),
        what);
  // The caller may reuse `host` on return.
  check(cudaStreamSynchronize(stream), what);
}

void spmd::rt::cuda::read(const SpmdBuffer *buffer, void *host,
                          const char *what) {
  acquire(buffer);
  size_t bytes =
      static_cast<size_t>(buffer->numel) * spmd_rt_dtype_size(buffer->dtype);
  cudaStream_t stream = context().compute;
  if (bytes > 0)
    check(cudaMemcpyAsync(host, buffer->data, bytes, cudaMemcpyDeviceToHost,
                          stream),
          what);
  check(cudaStreamSynchronize(stream), what);
  checkDeviceErrors();
}

void spmd::rt::cuda::synchronize() { checkDeviceErrors(); }

namespace {
IntervalTimer &kernelTimer() {
  static IntervalTimer timer("SPMD_RT_PROFILE");
  return timer;
}
} // namespace

bool spmd::rt::cuda::profiling() { return kernelTimer().active(); }

void spmd::rt::cuda::profileBegin() { kernelTimer().begin(); }

void spmd::rt::cuda::profileEnd(const char *kernel) {
  kernelTimer().end(kernel);
}

void spmd::rt::cuda::reportProfile() {
  std::map<std::string, IntervalTimer::Total> totals = kernelTimer().collect();
  if (totals.empty())
    return;
  double all = 0;
  for (const auto &entry : totals)
    all += entry.second.ms;
  std::vector<std::pair<std::string, IntervalTimer::Total>> sorted(
      totals.begin(), totals.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto &a, const auto &b) {
    return a.second.ms > b.second.ms;
  });
  int rank = spmd_rt_rank();
  std::printf("spmd-run: rank %d: kernel profile from step 1: %.3f ms in "
              "kernels\n",
              rank, all);
  for (const auto &[kernel, t] : sorted)
    std::printf("spmd-run: rank %d:   %-40s %8lld calls %10.3f ms %5.1f%%\n",
                rank, kernel.c_str(), static_cast<long long>(t.calls), t.ms,
                all > 0 ? 100 * t.ms / all : 0.0);
  std::fflush(stdout);
}

void spmd::rt::cuda::shutdown() {
  if (!globalContext)
    return;
  Context &c = *globalContext;
  const char *what = "spmd_rt_finalize";
  checkDeviceErrors();
  c.emptyCache(what);
  for (auto &[key, data] : c.tables)
    check(cudaFree(data), what);
  c.tables.clear();
  check(cudaFree(c.errors), what);
  check(cudaStreamDestroy(c.compute), what);
  check(cudaStreamDestroy(c.comm), what);
  delete globalContext;
  globalContext = nullptr;
}
