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
#include "../Reduce.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

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
template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<BFloat16> { using type = float; };
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
inline void checkLaunch(const char *kernel) {
  check(cudaGetLastError(), kernel);
}

/// The stream every kernel of this backend runs on, and the one NCCL runs
/// on (NcclBackend).
cudaStream_t computeStream();
cudaStream_t commStream();

/// GPU time of labelled intervals on the compute stream, kept while the
/// environment variable `env` is set (and not "0") and the step
/// (spmd_rt_set_step) is 1 or later, step 0 being the warm-up:
/// SPMD_RT_PROFILE (Device.cu) and SPMD_RT_GEMM_STATS (Linalg.cu). The
/// events cost host time, so steps are not timed with them on.
class IntervalTimer {
public:
  explicit IntervalTimer(const char *env);
  /// Whether the current step is timed.
  bool active() const;
  /// Brackets one interval; `work` counts what it did (e.g. FLOP).
  void begin();
  void end(const char *label, double work = 0);
  struct Total {
    int64_t calls = 0;
    double ms = 0, work = 0;
  };
  /// The totals by label (waiting for the last interval); forgets them.
  std::map<std::string, Total> collect();

private:
  struct Interval {
    const char *label;
    cudaEvent_t start, stop;
    double work;
  };
  const char *env;
  bool enabled;
  cudaEvent_t start = nullptr;
  std::vector<Interval> intervals;
};

/// Threads per block of the 1-D kernels.
constexpr int kBlock = 256;

/// a / b rounded up, for a >= 0 and b > 0.
__host__ __device__ constexpr int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

/// Blocks of a grid-stride loop over `n` items (at least 1, at most enough
/// to fill the GPU several times over).
inline unsigned gridFor(int64_t n) {
  int64_t blocks = ceilDiv(n, kBlock);
  return static_cast<unsigned>(
      std::max<int64_t>(1, std::min<int64_t>(blocks, 65536)));
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
  const int64_t blocks = std::clamp<int64_t>(ceilDiv(n, y), 1, 65536);
  return {dim3(static_cast<unsigned>(blocks)), dim3(x, y)};
}

/// Threads of a block of a kernel that gives each row kGroup threads: kGroup
/// (a block a row), or several rows of a warp each.
template <int kGroup> constexpr int kRowThreads = std::max(kGroup, kBlock);

/// In a kernel of kRowThreads<kGroup> threads a block and kGroup a row: the
/// first row of this thread's group, the grid's row step and the thread's
/// lane in its row. With kGroup > 32 a block owns one row, so loops over
/// rows are block-uniform.
template <int kGroup> struct RowCursor {
  static constexpr int kRowsPerBlock = kRowThreads<kGroup> / kGroup;
  __device__ int64_t first() const {
    return blockIdx.x * int64_t(kRowsPerBlock) + threadIdx.x / kGroup;
  }
  __device__ int64_t step() const { return int64_t(gridDim.x) * kRowsPerBlock; }
  __device__ int lane() const { return threadIdx.x % kGroup; }
};

/// Blocks for `rows` rows of kGroup threads each (RowCursor), at most 2^30.
template <int kGroup> unsigned rowBlocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(
      ceilDiv(rows, RowCursor<kGroup>::kRowsPerBlock), int64_t(1) << 30));
}

//===----------------------------------------------------------------------===//
// Reductions across threads
//===----------------------------------------------------------------------===//

/// How a sum over `rows` rows splits into chunks of rows, whose blocks write
/// partial results that a second pass (reduceChunks) folds.
struct RowChunks {
  int64_t count, rowsPerChunk;
};

/// The split of `rows` rows (both results at least 1) when `blocksPerChunk`
/// blocks walk a chunk: enough chunks for a few waves of an H100's 132 SMs
/// (2048 blocks), chunks of at least `minRows` rows, at most 65535 chunks
/// (the grid's y).
inline RowChunks chunkRows(int64_t rows, int64_t blocksPerChunk,
                           int64_t minRows) {
  constexpr int64_t kTargetBlocks = 2048;
  const int64_t chunks =
      std::max<int64_t>(1, std::min({ceilDiv(kTargetBlocks, blocksPerChunk),
                                     ceilDiv(rows, minRows), int64_t(65535)}));
  const int64_t rowsPerChunk = std::max<int64_t>(1, ceilDiv(rows, chunks));
  return {std::max<int64_t>(1, ceilDiv(rows, rowsPerChunk)), rowsPerChunk};
}

/// Function objects of the reductions.
struct AddOp {
  template <typename V> __device__ V operator()(V a, V b) const {
    return a + b;
  }
};
/// NaN propagates, as in the CPU kernels' MaxOp (ATen's vectorised maximum).
struct MaxOp {
  template <typename V> __device__ V operator()(V a, V b) const {
    return (a > b) || (a != a) ? a : b;
  }
};

#ifdef __CUDACC__
/// exp and log in the compute type's precision (f32 for f32 and bf16).
__device__ inline float expOf(float x) { return expf(x); }
__device__ inline double expOf(double x) { return exp(x); }
__device__ inline float logOf(float x) { return logf(x); }
__device__ inline double logOf(double x) { return log(x); }

/// `op` over the 32 lanes of a warp; every lane gets lane 0's result (the
/// butterfly can leave the lanes with sums rounded differently, or with +0
/// and -0 maxima).
template <typename V, typename Op = AddOp>
__device__ V warpReduce(V v, Op op = {}) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return __shfl_sync(0xffffffffu, v, 0);
}

/// `op` over the kGroup threads of a row: a warp (kGroup == 32), or the
/// whole 1-D block (kGroup == blockDim.x, a multiple of 32, where every
/// thread of the block must call it); the warps' results combine in order
/// and every thread gets the result.
template <int kGroup, typename V, typename Op = AddOp>
__device__ V groupReduce(V v, Op op = {}) {
  v = warpReduce(v, op);
  if constexpr (kGroup > 32) {
    __shared__ V partial[kGroup / 32];
    if (threadIdx.x % 32 == 0)
      partial[threadIdx.x / 32] = v;
    __syncthreads();
    v = partial[0];
    for (int w = 1; w < kGroup / 32; ++w)
      v = op(v, partial[w]);
    // `partial` is reused by the next reduction.
    __syncthreads();
  }
  return v;
}

/// out[o] = Reducer's fold over the chunks of partial[chunk * outputs + o],
/// finished for `count` elements per output and rounded to T once: the
/// second pass of reductions split over chunks of blocks, folding the chunks
/// in a fixed order (deterministic). A warp per output.
template <typename T, typename Acc, typename R = SumReducer<T, Acc>>
__global__ void reduceChunks(T *out, const Acc *partial, int64_t outputs,
                             int64_t chunks, int64_t count = 1) {
  const R op;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t o = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
       o < outputs; o += warps) {
    Acc acc = R::identity();
    for (int64_t k = lane; k < chunks; k += 32)
      acc = op(acc, partial[k * outputs + o]);
    acc = warpReduce(acc, op);
    if (lane == 0)
      out[o] = toStorage<T>(R::finish(acc, count));
  }
}
#endif

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
const int64_t *deviceTable(const int64_t *host, int64_t count,
                           const char *what);

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
// Matrix products
//===----------------------------------------------------------------------===//

/// c[i] = alpha * op(a[i]) op(b[i]) + beta * c[i] for i < batch, row-major:
/// c[i] is [n, m] at c + i * strideC; a[i] is [n, k] (stored [k, n] when
/// transA) at a + i * strideA, b[i] [k, m] (stored [m, k] when transB) at
/// b + i * strideB; strides in elements. One cublasGemmStridedBatchedEx on
/// the compute stream, multiplying in OpMathT<T> (f32 for bf16, no TF32);
/// C is T or, for bf16, float (the product unrounded). Timed under
/// SPMD_RT_GEMM_STATS. cuBLAS errors end the job naming `kernel`.
/// Instantiated for (float, float), (double, double), (BFloat16, BFloat16)
/// and (BFloat16, float) in Linalg.cu.
template <typename T, typename C>
void gemmBatched(const char *kernel, int64_t batch, int64_t n, int64_t k,
                 int64_t m, double alpha, const T *a, bool transA,
                 int64_t strideA, const T *b, bool transB, int64_t strideB,
                 double beta, C *c, int64_t strideC);

//===----------------------------------------------------------------------===//
// Device-side errors
//===----------------------------------------------------------------------===//

/// Which message a device error gets (Device.cu's table).
enum class DeviceErrorKind : int {
  None = 0,
  EmbeddingIndex = 1, // the CPU's "index I at position P is out of range"
  NllTarget = 2,      // the CPU's "target I of sample P is out of bounds"
  DimIndex = 3,       // the CPU's "index I is out of bounds for dim D of size"
  PlaneIndex = 4,     // the CPU's "index I is outside a plane of N elements"
};

/// The first invalid value a kernel met since the last check.
struct DeviceError {
  int kind;
  int kernel; // index into Device.cu's kernel-name table (kernelId)
  long long value;
  long long bound;
  long long position; // element index of the value (DimIndex: the dim), or
                      // -1 if not given
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
                                  int kernel, long long value, long long bound,
                                  long long position = -1) {
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

} // namespace spmd::rt::cuda

#endif // SPMD_RUNTIME_CUDA_CUDA_H
