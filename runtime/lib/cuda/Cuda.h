//===- Cuda.h - shared machinery of the CUDA kernels ------------*- C++ -*-===//
//
// What every file of runtime/lib/cuda/ builds on. The CUDA backend
// (spmd_rt_set_backend("cuda")) keeps every SpmdBuffer's data in device
// memory of the GPU the rank owns; descriptors (shape, dtype) stay on the
// host, so shape checks run on the host before a launch, with the CPU
// kernels' messages (Checks.h).
//
// Streams: every kernel, cuBLAS call and copy is issued on the compute
// stream (`computeStream()`), so kernels are ordered among themselves and
// the host never waits for the GPU inside a kernel call. Collectives run on
// a second stream (NcclBackend), ordered against the compute stream with
// events (Device.cu).
//
// Errors: a failing CUDA call ends the job through spmd_rt_fatal naming the
// kernel (`check`). An invalid index found on the device (embedding indices,
// nll_loss targets) is recorded in the device error slot (`raiseError`) and
// reported, with the kernel's message, at the next synchronisation
// (spmd_rt_synchronize, a read back to the host, the end of the job).
//
// Private to the runtime; compiled by nvcc when CMake finds the CUDA toolkit
// (SPMD_HAVE_CUDA).
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_CUDA_CUDA_H
#define SPMD_RUNTIME_CUDA_CUDA_H

#include "../Backends.h"
#include "../Checks.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>

namespace spmd::rt {
template <> struct DTypeOf<__nv_bfloat16> {
  static constexpr int32_t value = SPMD_BF16;
};
} // namespace spmd::rt

namespace spmd::rt::cuda {

//===----------------------------------------------------------------------===//
// bf16
//===----------------------------------------------------------------------===//

/// The C++ type of SPMD_BF16 on the device.
using BFloat16 = __nv_bfloat16;

/// The type a kernel computes in: float for bf16 (ATen's `opmath_type`: bf16
/// is a storage format, arithmetic and accumulation are fp32), else T.
template <typename T> struct OpMath {
  using type = T;
};
template <> struct OpMath<BFloat16> {
  using type = float;
};
template <typename T> using OpMathT = typename OpMath<T>::type;

/// ATen's conversion of a value to `To` (to bool: nonzero), on the host or
/// the device. bf16 converts through float both ways, as c10::BFloat16 does
/// (its only constructor takes a float), rounding to nearest even.
template <typename To, typename From>
__host__ __device__ inline To convertValue(From v) {
  if constexpr (std::is_same_v<To, From>)
    return v;
  else if constexpr (std::is_same_v<From, BFloat16>)
    return convertValue<To>(__bfloat162float(v));
  else if constexpr (std::is_same_v<To, BFloat16>)
    return __float2bfloat16(static_cast<float>(v));
  else if constexpr (std::is_same_v<To, Bool8>)
    return v != From(0);
  else
    return static_cast<To>(v);
}

/// The type sums accumulate in: double for f32 and f64 (as the CPU kernels),
/// float for bf16 (ATen's CUDA acc_type), int64 for the integers.
template <typename T>
using AccT = std::conditional_t<
    std::is_same_v<T, BFloat16>, float,
    std::conditional_t<std::is_floating_point_v<T>, double, int64_t>>;

/// `v` in the type kernels compute in: bf16 widened (exactly) to float, any
/// other type unchanged. Device code converts explicitly rather than rely on
/// __nv_bfloat16's operators, which round every intermediate to bf16.
template <typename T> __host__ __device__ inline OpMathT<T> toOpMath(T v) {
  if constexpr (std::is_same_v<T, BFloat16>)
    return __bfloat162float(v);
  else
    return v;
}

/// `v` (an OpMathT<T> or AccT<T>) stored as T: rounded once to the nearest
/// even bf16, any other type by static_cast.
template <typename T, typename V> __host__ __device__ inline T toStorage(V v) {
  if constexpr (std::is_same_v<T, BFloat16>) {
    static_assert(std::is_same_v<V, float>, "bf16 is rounded from float");
    return __float2bfloat16(v);
  } else {
    return static_cast<T>(v);
  }
}

/// `dispatch<Set>` (Checks.h), plus SPMD_BF16 -> BFloat16 when `Set` has
/// kBFloat16.
template <unsigned Set, typename Fn>
void dispatchDevice(int32_t dtype, const char *kernel, Fn &&fn,
                    const char *what = "") {
  if constexpr ((Set & kBFloat16) != 0)
    if (dtype == SPMD_BF16)
      return fn(BFloat16{});
  dispatch<Set>(dtype, kernel, fn, what);
}

//===----------------------------------------------------------------------===//
// Errors and streams
//===----------------------------------------------------------------------===//

/// Ends the job: `<what>: CUDA error <name>: <description>`.
[[noreturn]] void fail(cudaError_t rc, const char *what);
inline void check(cudaError_t rc, const char *what) {
  if (rc != cudaSuccess)
    fail(rc, what);
}
/// Checks that the last kernel launch was accepted (cudaGetLastError).
inline void checkLaunch(const char *kernel) { check(cudaGetLastError(), kernel); }

/// The stream every kernel of this backend runs on, and the one NCCL runs
/// on (NcclBackend).
cudaStream_t computeStream();
cudaStream_t commStream();

/// Threads per block of the 1-D kernels.
constexpr int kBlock = 256;
/// Blocks of a grid-stride loop over `n` items (at least 1, at most enough
/// to fill the GPU several times over).
inline unsigned gridFor(int64_t n) {
  int64_t blocks = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, 65536)));
}

/// A launch over `n` rows of `width` items: blockDim.x threads (the smallest
/// power of two covering `width`, at most kBlock) walk a row, blockDim.y
/// rows share a block, and the grid strides over the rest. Consecutive
/// threads touch consecutive items, and a row's index arithmetic is done
/// once per row rather than once per element.
struct RowLaunch {
  dim3 grid, block;
};

inline RowLaunch rowLaunch(int64_t n, int64_t width) {
  unsigned x = 1;
  while (x < unsigned(kBlock) && x < width)
    x *= 2;
  const unsigned y = kBlock / x;
  const int64_t blocks = std::clamp<int64_t>((n + y - 1) / y, 1, 65536);
  return {dim3(static_cast<unsigned>(blocks)), dim3(x, y)};
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// Device memory from the backend's caching allocator (Device.cu); usable by
/// every operation issued on the compute stream after it, released to the
/// allocator (not to CUDA) when the scope ends: later compute-stream work may
/// reuse it, which is safe because the stream runs in order.
class Scratch {
public:
  Scratch(int64_t bytes, const char *what);
  ~Scratch();
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  void *data() const { return ptr; }
  template <typename T> T *as() const { return static_cast<T *>(ptr); }

private:
  void *ptr = nullptr;
  int64_t size = 0;
};

/// A device copy of the `count` int64 values at host address `host`: the
/// constant tables the lowering passes (local_take indices, random offsets).
/// Cached by (address, count) for the life of the process, since those
/// tables are constants of the program.
const int64_t *deviceTable(const int64_t *host, int64_t count, const char *what);

/// Writes `b`'s elements converted to out dtype `dtype` into `dst` (device),
/// on the compute stream (ATen's type promotion of mixed-dtype inputs).
void convert(void *dst, int32_t dtype, const SpmdBuffer *b, const char *kernel);

/// `b`'s data as `T`: its own data when it holds `T`, else a converted copy
/// kept in `storage`.
template <typename T>
const T *dataAs(const SpmdBuffer *b, std::unique_ptr<Scratch> &storage,
                const char *kernel) {
  if (b->dtype == DTypeOf<T>::value)
    return static_cast<const T *>(b->data);
  storage = std::make_unique<Scratch>(b->numel * int64_t(sizeof(T)), kernel);
  convert(storage->data(), DTypeOf<T>::value, b, kernel);
  return storage->template as<T>();
}

//===----------------------------------------------------------------------===//
// Device-side errors
//===----------------------------------------------------------------------===//

/// Which message a device error gets (Device.cu's table).
enum class DeviceErrorKind : int {
  None = 0,
  EmbeddingIndex = 1, // the CPU's "index I at position P is out of range"
  NllTarget = 2,      // the CPU's "target I of sample P is out of bounds"
};

/// The first invalid value a kernel met since the last check.
struct DeviceError {
  int kind;
  int kernel; // index into Device.cu's kernel-name table (kernelId)
  long long value;
  long long bound;
  long long position; // element index of the value, -1 if not given
};

/// The device pointer to pass to kernels that validate values.
DeviceError *deviceErrorSlot();
/// A small id for `kernel` (a string literal) for DeviceError::kernel.
int kernelId(const char *kernel);
/// Ends the job if a kernel recorded an error (synchronises the device).
void checkDeviceErrors();

#ifdef __CUDACC__
/// Records the first error; later ones are dropped.
__device__ inline void raiseError(DeviceError *slot, DeviceErrorKind kind,
                                  int kernel, long long value,
                                  long long bound, long long position = -1) {
  if (atomicCAS(&slot->kind, 0, static_cast<int>(kind)) == 0) {
    slot->kernel = kernel;
    slot->value = value;
    slot->bound = bound;
    slot->position = position;
  }
}
#endif

//===----------------------------------------------------------------------===//
// Shapes passed by value to kernels
//===----------------------------------------------------------------------===//

/// A shape or a stride list of at most SPMD_MAX_RANK dims, by value.
struct Dims {
  int64_t v[SPMD_MAX_RANK];
};

/// The product of a buffer's dims [begin, end).
inline int64_t productOf(const SpmdBuffer *b, int32_t begin, int32_t end) {
  int64_t p = 1;
  for (int32_t d = begin; d < end; ++d)
    p *= b->shape[d];
  return p;
}

} // namespace spmd::rt::cuda

#endif // SPMD_RUNTIME_CUDA_CUDA_H
