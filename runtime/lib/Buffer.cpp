//===- Buffer.cpp - buffers, memory accounting, fatal errors --------------===//

#include "spmd/Runtime/Runtime.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <mpi.h>

namespace {
std::atomic<int64_t> liveBytes{0};
std::atomic<int64_t> peakBytes{0};

/// The data of one or more buffers (spmd_rt_view shares it).
struct Storage {
  std::atomic<int64_t> refs{1};
  int64_t bytes = 0;
  void *data = nullptr;
};

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
} // namespace

extern "C" {

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
  SpmdBuffer *buffer = newDescriptor(dtype, rank, shape);
  auto *storage = new Storage;
  storage->bytes = byteSize(buffer);
  // 64-byte alignment for vectorised kernels; never a zero-size request.
  size_t request = (static_cast<size_t>(storage->bytes) + 63) / 64 * 64 + 64;
  storage->data = std::aligned_alloc(64, request);
  if (!storage->data)
    spmd_rt_fatal("out of memory allocating %lld bytes",
                  static_cast<long long>(storage->bytes));
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
  static_cast<Storage *>(view->storage)->refs++;
  return view;
}

void spmd_rt_free(SpmdBuffer *buffer) {
  if (!buffer)
    return;
  auto *storage = static_cast<Storage *>(buffer->storage);
  if (storage && --storage->refs == 0) {
    liveBytes -= storage->bytes;
    std::free(storage->data);
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
  std::memcpy(out->data, data, static_cast<size_t>(bytes));
}

void spmd_rt_fatal(const char *format, ...) {
  int initialized = 0, finalized = 0, rank = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  bool running = initialized && !finalized;
  if (running)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "spmd-run: rank %d: error: ", rank);
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fputc('\n', stderr);
  std::fflush(stderr);
  if (running)
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::exit(1);
}

} // extern "C"
