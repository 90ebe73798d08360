//===- Buffer.cpp - backend choice, buffers, memory accounting, errors ----===//
//
// Buffers live where the backend chosen by spmd_rt_set_backend computes
// (Backends.h): host memory (64-byte aligned) for "cpu", device memory from
// the CUDA backend's caching allocator for "cuda" (cuda/Device.cu). Memory
// accounting counts the bytes buffers asked for, on either.
//
//===----------------------------------------------------------------------===//

#include "Backends.h"
#include "Collectives.h"
#include "JobStatus.h"
#include "spmd/Runtime/Runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <mpi.h>

using spmd::rt::Backend;
using spmd::rt::Storage;

namespace {
std::atomic<int64_t> liveBytes{0};
std::atomic<int64_t> peakBytes{0};

/// The backend spmd_rt_set_backend chose (null: the CPU's), and whether a
/// buffer exists yet (after which the choice is fixed).
std::atomic<const Backend *> running{nullptr};
std::atomic<bool> buffersMade{false};

int64_t byteSize(const SpmdBuffer *buffer) {
  return buffer->numel *
         static_cast<int64_t>(spmd_rt_dtype_size(buffer->dtype));
}

/// A descriptor of `rank` dims with `shape`; numel computed, no data.
SpmdBuffer *newDescriptor(int32_t dtype, int32_t rank, const int64_t *shape) {
  if (rank < 0 || rank > SPMD_MAX_RANK)
    spmd_rt_fatal("tensor rank %d is outside [0, %d]", rank, SPMD_MAX_RANK);
  auto *buffer = static_cast<SpmdBuffer *>(std::calloc(1, sizeof(SpmdBuffer)));
  if (!buffer)
    spmd_rt_fatal("out of memory allocating a buffer descriptor");
  buffer->dtype = dtype;
  buffer->rank = rank;
  buffer->numel = 1;
  for (int32_t i = 0; i < rank; ++i) {
    if (shape[i] < 0)
      spmd_rt_fatal("negative dimension %lld",
                    static_cast<long long>(shape[i]));
    buffer->shape[i] = shape[i];
    buffer->numel *= shape[i];
  }
  return buffer;
}

/// The backend whose memory holds `buffer`'s data (host memory for a
/// descriptor the runtime did not allocate).
const Backend &ownerOf(const SpmdBuffer *buffer) {
  const auto *storage = static_cast<const Storage *>(buffer->storage);
  return storage ? *storage->backend : spmd::rt::cpu::backend();
}
} // namespace

const Backend &spmd::rt::activeBackend() {
  const Backend *backend = running.load(std::memory_order_relaxed);
  return backend ? *backend : cpu::backend();
}

void spmd::rt::useBackendForTesting(const Backend &backend) {
  running = &backend;
}

extern "C" {

int32_t spmd_rt_set_backend(const char *name) {
  std::string wanted = name ? name : "(null)";
  if (wanted != "cpu" && wanted != "cuda")
    spmd_rt_fatal("unknown backend '%s' (known: cpu, cuda)", wanted.c_str());
  if (wanted == spmd_rt_backend())
    return 0;
  if (buffersMade)
    spmd_rt_fatal("backend '%s' must be chosen before the first buffer ('%s' "
                  "is running)",
                  wanted.c_str(), spmd_rt_backend());
  const Backend *chosen = spmd::rt::findBackend(wanted);
  if (!chosen)
    spmd_rt_fatal("backend '%s' is not built (the CUDA toolkit, cuBLAS or "
                  "NCCL was not found at configure time)",
                  wanted.c_str());
  // The CUDA kernels take their collectives from NCCL on device buffers;
  // this also checks that a GPU is visible and the runtime has not started.
  spmd_rt_set_collective_backend(chosen->collectives);
  running = chosen;
  return 0;
}

const char *spmd_rt_backend(void) { return spmd::rt::activeBackend().name; }

size_t spmd_rt_dtype_size(int32_t dtype) {
  switch (dtype) {
  case SPMD_F32:
  case SPMD_I32:
    return 4;
  case SPMD_F64:
  case SPMD_I64:
    return 8;
  case SPMD_F16:
  case SPMD_BF16:
    return 2;
  case SPMD_I1:
    return 1;
  }
  spmd_rt_fatal("unknown dtype %d", dtype);
}

const char *spmd_rt_dtype_name(int32_t dtype) {
  switch (dtype) {
  case SPMD_F32:
    return "f32";
  case SPMD_F64:
    return "f64";
  case SPMD_F16:
    return "f16";
  case SPMD_BF16:
    return "bf16";
  case SPMD_I64:
    return "i64";
  case SPMD_I32:
    return "i32";
  case SPMD_I1:
    return "i1";
  }
  return "<unknown dtype>";
}

SpmdBuffer *spmd_rt_alloc(int32_t dtype, int32_t rank, const int64_t *shape) {
  // Once per op of a lowered program: MPI moves its collectives in flight.
  spmd::runtime::progressCollectives();
  SpmdBuffer *buffer = newDescriptor(dtype, rank, shape);
  auto *storage = new Storage;
  storage->bytes = byteSize(buffer);
  buffersMade = true;
  const Backend &backend = spmd::rt::activeBackend();
  storage->data = backend.allocate(storage->bytes, "spmd_rt_alloc");
  storage->backend = &backend;
  buffer->data = storage->data;
  buffer->storage = storage;
  int64_t live = liveBytes += storage->bytes;
  int64_t peak = peakBytes.load();
  while (live > peak && !peakBytes.compare_exchange_weak(peak, live)) {
  }
  return buffer;
}

SpmdBuffer *spmd_rt_view(const SpmdBuffer *source, int32_t rank,
                         const int64_t *shape) {
  SpmdBuffer *view = newDescriptor(source->dtype, rank, shape);
  if (view->numel != source->numel)
    spmd_rt_fatal("spmd_rt_view: %lld elements viewed as %lld",
                  static_cast<long long>(source->numel),
                  static_cast<long long>(view->numel));
  view->data = source->data;
  view->storage = source->storage;
  if (view->storage) // a borrowed buffer's memory has no owner here
    static_cast<Storage *>(view->storage)->refs++;
  return view;
}

SpmdBuffer *spmd_rt_borrow(int32_t dtype, int32_t rank, const int64_t *shape,
                           void *data) {
  if (&spmd::rt::activeBackend() != &spmd::rt::cpu::backend())
    spmd_rt_fatal("spmd_rt_borrow: borrowed host memory on backend '%s'",
                  spmd_rt_backend());
  SpmdBuffer *buffer = newDescriptor(dtype, rank, shape);
  buffer->data = data;
  return buffer;
}

void spmd_rt_free(SpmdBuffer *buffer) {
  if (!buffer)
    return;
  spmd::runtime::completeCollective(buffer);
  auto *storage = static_cast<Storage *>(buffer->storage);
  if (storage && --storage->refs == 0) {
    liveBytes -= storage->bytes;
    storage->backend->release(*storage);
    delete storage;
  }
  std::free(buffer);
}

int64_t spmd_rt_live_bytes(void) { return liveBytes.load(); }
int64_t spmd_rt_peak_bytes(void) { return peakBytes.load(); }
void spmd_rt_reset_peak(void) { peakBytes.store(liveBytes.load()); }

void spmd_rt_constant(SpmdBuffer *out, const void *data, int64_t bytes) {
  if (bytes != byteSize(out))
    spmd_rt_fatal("constant of %lld bytes for a buffer of %lld bytes",
                  static_cast<long long>(bytes),
                  static_cast<long long>(byteSize(out)));
  spmd_rt_write(out, data);
}

void spmd_rt_write(SpmdBuffer *buffer, const void *host) {
  ownerOf(buffer).write(buffer, host, "spmd_rt_write");
}

void spmd_rt_read(const SpmdBuffer *buffer, void *host) {
  ownerOf(buffer).read(buffer, host, "spmd_rt_read");
}

void spmd_rt_synchronize(void) { spmd::rt::activeBackend().synchronize(); }

void spmd_rt_fatal(const char *format, ...) {
  int initialized = 0, finalized = 0, rank = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  bool running = initialized && !finalized;
  if (running)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // One write per line: the ranks of a job share stderr, and a line written
  // in pieces interleaves with another rank's.
  char line[4096];
  int len =
      std::snprintf(line, sizeof(line), "spmd-run: rank %d: error: ", rank);
  va_list args;
  va_start(args, format);
  len += std::vsnprintf(line + len, sizeof(line) - len, format, args);
  va_end(args);
  len = std::min<int>(len, sizeof(line) - 2);
  line[len] = '\n';
  std::fwrite(line, 1, len + 1, stderr);
  std::fflush(stderr);
  spmd::rt::jobStatusFailed();
  if (running)
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

} // extern "C"
