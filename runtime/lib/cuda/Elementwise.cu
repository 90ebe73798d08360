//===- Elementwise.cu - broadcasting elementwise ops, copies, dtype casts -===//
//
// The pointwise kernels (the SPMD_RT_POINTWISE entries of KernelList.def,
// with the CPU's formulas: Pointwise.h) and the data movement of
// cpu/Shape.cpp (copy, expand, permute): one strided engine serves them all.
// Each kernel computes in out's dtype; inputs of another dtype are converted
// first (`dataAs`, ATen's TensorIterator type promotion), scalars are
// converted to out's dtype, so results agree with the CPU's to float
// rounding.
//
// bf16 is a storage format, as in ATen's CUDA kernels: an op
// loads bf16 inputs as float, computes and takes its scalars in float
// (ATen's opmath_type, OpMathT) and rounds to bf16 once, on the store.
// Copies (copy, expand, permute) move bf16 as a 2-byte payload.
//
// The engine: the host checks that every input broadcasts to out's shape
// (Checks.h broadcastStrides, the CPU's message), merges dims that every
// operand walks contiguously, and launches a grid-stride kernel; operands
// that all have out's shape take a fast path with no index arithmetic. Both
// index in 32 bits, with the strided kernel's divisions by dim sizes done
// as multiplications, whenever every index fits (fitsInt32), and in 64 bits
// otherwise: one kernel template, instantiated for both index types. When
// out and every input are 16-byte aligned, the fast path (and dtype casts)
// moves a vector of elements per thread and iteration, 16 bytes of the
// narrowest operand (ATen's vectorized_elementwise_kernel). Copies
// that transpose out's innermost dim with the dim where self is contiguous
// (permute's transposes of inner dims) go through shared-memory tiles.
//
//===----------------------------------------------------------------------===//

#include "../Pointwise.h"
#include "Cuda.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

using namespace spmd::rt;
using namespace spmd::rt::cuda;

namespace {

//===----------------------------------------------------------------------===//
// The strided engine
//===----------------------------------------------------------------------===//

/// Out's shape and each input's element strides over it (0 where an input
/// is broadcast), after merging dims.
template <int N> struct Indexing {
  int32_t rank = 0;
  int64_t shape[SPMD_MAX_RANK] = {};
  int64_t strides[N > 0 ? N : 1][SPMD_MAX_RANK] = {};
};

template <typename T, int N> struct Inputs { const T *ptr[N > 0 ? N : 1]; };

/// Division by a dim's size, fixed at launch, in the kernel's index type I.
/// 64-bit indices divide.
template <typename I> struct DimDivider {
  I divisor = 1;
  DimDivider() = default;
  explicit DimDivider(I d) : divisor(d) {}
  __device__ I div(I n) const { return n / divisor; }
};

/// 32-bit indices multiply by a magic number instead (Granlund-Montgomery,
/// as ATen's IntDivider): a 32-bit division is a long instruction sequence
/// on the GPU, this is a multiply-high, an add and a shift. Exact for
/// n < 2^31, which the host guarantees (fitsInt32).
template <> struct DimDivider<uint32_t> {
  uint32_t divisor = 1, magic = 0, shift = 0;
  DimDivider() = default;
  explicit DimDivider(uint32_t d) : divisor(d) {
    while (shift < 32 && (uint64_t(1) << shift) < d)
      ++shift;
    const uint64_t one = 1;
    magic = static_cast<uint32_t>(((one << 32) * ((one << shift) - d)) / d + 1);
  }
  __device__ uint32_t div(uint32_t n) const {
    return (__umulhi(n, magic) + n) >> shift;
  }
};

/// Indexing as the strided kernel reads it, in its index type I.
template <int N, typename I> struct DeviceIndexing {
  int32_t rank = 0;
  DimDivider<I> shape[SPMD_MAX_RANK];
  I strides[N > 0 ? N : 1][SPMD_MAX_RANK] = {};

  DeviceIndexing() = default;
  explicit DeviceIndexing(const Indexing<N> &ix) : rank(ix.rank) {
    for (int32_t d = 0; d < rank; ++d) {
      shape[d] = DimDivider<I>(static_cast<I>(ix.shape[d]));
      for (int k = 0; k < N; ++k)
        strides[k][d] = static_cast<I>(ix.strides[k][d]);
    }
  }

  /// Adds each operand's offset of out's element i to `offsets`.
  __device__ void addOffsets(I i, I *offsets) const {
    I rest = i;
    for (int32_t d = rank - 1; d > 0; --d) {
      const I next = shape[d].div(rest);
      const I coord = rest - next * shape[d].divisor;
      rest = next;
      for (int k = 0; k < N; ++k)
        offsets[k] += coord * strides[k][d];
    }
    // What is left is dim 0's coordinate, with no division (at rank 0 it
    // is 0 and the strides are 0).
    for (int k = 0; k < N; ++k)
      offsets[k] += rest * strides[k][0];
  }
};

/// Indices below this fit the kernels' 32-bit index type.
constexpr int64_t kInt32Limit = int64_t(1) << 31;

/// Whether out's element indices and every input's offsets stay below 2^31,
/// so that the kernels may index in 32 bits: 64-bit integer division and
/// multiplication cost several instructions each per element, and bound the
/// strided copies (permute) rather than memory.
template <int N> bool fitsInt32(int64_t numel, const Indexing<N> &ix) {
  if (numel >= kInt32Limit)
    return false;
  for (int k = 0; k < N; ++k) {
    int64_t last = 0;
    for (int32_t d = 0; d < ix.rank; ++d)
      last += (ix.shape[d] - 1) * ix.strides[k][d];
    if (last >= kInt32Limit)
      return false;
  }
  return true;
}

/// Calls `fn(I{})` with the index type I: uint32_t when `narrow`, else
/// int64_t. Each kernel is instantiated for both.
template <typename Fn> void withIndexType(bool narrow, Fn &&fn) {
  if (narrow)
    fn(uint32_t{});
  else
    fn(int64_t{});
}

/// `op` over `x...` computed in M: each value is loaded as M and the result
/// stored as T (for bf16, one rounding, on the store).
template <typename T, typename M, typename Op, typename... X>
__device__ inline T apply(const Op &op, X... x) {
  return convertValue<T>(op(convertValue<M>(x)...));
}

/// `op` over the inputs at `offsets`.
template <typename T, typename M, int N, typename In, typename I, typename Op,
          size_t... K>
__device__ inline T applyAt(const Op &op, const Inputs<In, N> &in,
                            const I *offsets, std::index_sequence<K...>) {
  return apply<T, M>(op, in.ptr[K][offsets[K]]...);
}

/// V consecutive elements, loaded and stored as whole 16-byte accesses
/// (ATen's aligned_vector): one access where V elements take 16 bytes or
/// fewer, several where they take more.
template <typename T, int V>
struct alignas(std::min<size_t>(16, sizeof(T) * V)) Vec {
  T v[V];
};

/// `op` over lane `e` of the inputs' vectors `x`.
template <typename T, typename M, int V, typename In, typename Op, size_t... K>
__device__ inline T applyLane(const Op &op, const Vec<In, V> *x, int e,
                              std::index_sequence<K...>) {
  return apply<T, M>(op, x[K].v[e]...);
}

/// out[i] = op(inputs at i) where out and the inputs are all contiguous, V
/// elements per thread and iteration: whole vectors, then the numel % V
/// elements past the last one. V = 1 is the one-element kernel. Inputs are
/// of type In, converted to M (dtype casts: In is the source dtype).
template <typename T, typename M, int N, int V, typename In, typename I,
          typename Op>
__global__ void mapContiguous(T *out, Inputs<In, N> in, I numel, Op op) {
  const I first = blockIdx.x * I(blockDim.x) + threadIdx.x;
  const I stride = I(gridDim.x) * blockDim.x;
  const I vectors = numel / V;
  for (I j = first; j < vectors; j += stride) {
    Vec<In, V> x[N > 0 ? N : 1];
    for (int k = 0; k < N; ++k)
      x[k] = reinterpret_cast<const Vec<In, V> *>(in.ptr[k])[j];
    Vec<T, V> y;
#pragma unroll
    for (int e = 0; e < V; ++e)
      y.v[e] = applyLane<T, M, V>(op, x, e, std::make_index_sequence<N>());
    reinterpret_cast<Vec<T, V> *>(out)[j] = y;
  }
  if constexpr (V > 1) {
    for (I i = vectors * V + first; i < numel; i += stride) {
      I offsets[N > 0 ? N : 1];
      for (int k = 0; k < N; ++k)
        offsets[k] = i;
      out[i] = applyAt<T, M, N>(op, in, offsets, std::make_index_sequence<N>());
    }
  }
}

/// Launches mapContiguous over `numel` elements. Vector accesses need every
/// pointer aligned to 16 bytes (the allocator's blocks are; views offset by
/// a few elements are not): the host picks V from the pointers, so the
/// unaligned case gets the one-element kernel rather than a fault. V is 16
/// bytes of the narrower of In and T (8 for bf16 <-> f32).
template <typename T, typename M, int N, typename In, typename I, typename Op>
void launchContiguous(T *out, const Inputs<In, N> &in, I numel, Op op) {
  auto isAligned = [](const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  bool aligned = isAligned(out);
  for (int k = 0; k < N; ++k)
    aligned = aligned && isAligned(in.ptr[k]);
  auto launch = [&](auto width) {
    constexpr int V = decltype(width)::value;
    mapContiguous<T, M, N, V>
        <<<gridFor(ceilDiv(numel, V)), kBlock, 0, computeStream()>>>(out, in,
                                                                     numel, op);
  };
  constexpr int kVec = 16 / std::min(sizeof(T), sizeof(In));
  if (aligned)
    launch(std::integral_constant<int, kVec>{});
  else
    launch(std::integral_constant<int, 1>{});
}

template <typename T, typename M, int N, typename I, typename Op>
__global__ void mapStrided(T *out, Inputs<T, N> in, I numel,
                           DeviceIndexing<N, I> ix, Op op) {
  for (I i = blockIdx.x * I(blockDim.x) + threadIdx.x; i < numel;
       i += I(gridDim.x) * blockDim.x) {
    I offsets[N > 0 ? N : 1] = {};
    ix.addOffsets(i, offsets);
    out[i] = applyAt<T, M, N>(op, in, offsets, std::make_index_sequence<N>());
  }
}

/// Drops size-1 dims and merges dim d-1 into d wherever every operand (out
/// is contiguous) steps over both as over one dim.
template <int N> void coalesce(Indexing<N> &ix) {
  Indexing<N> merged;
  for (int32_t d = 0; d < ix.rank; ++d) {
    if (ix.shape[d] == 1)
      continue;
    int32_t r = merged.rank;
    bool mergeable = r > 0;
    for (int k = 0; k < N && mergeable; ++k)
      mergeable = merged.strides[k][r - 1] == ix.strides[k][d] * ix.shape[d];
    if (mergeable) {
      merged.shape[r - 1] *= ix.shape[d];
      for (int k = 0; k < N; ++k)
        merged.strides[k][r - 1] = ix.strides[k][d];
      continue;
    }
    merged.shape[r] = ix.shape[d];
    for (int k = 0; k < N; ++k)
      merged.strides[k][r] = ix.strides[k][d];
    merged.rank = r + 1;
  }
  ix = merged;
}

/// out[i] = op(inputs at i) computed in M, the inputs (already of type T)
/// broadcast to out's shape with the given strides.
template <typename T, typename M, int N, typename Op>
void launchMap(const char *kernel, SpmdBuffer *out, Inputs<T, N> in,
               Indexing<N> ix, Op op) {
  if (out->numel == 0)
    return;
  bool contiguous = true;
  int64_t outStrides[SPMD_MAX_RANK];
  contiguousStrides(ix.rank, ix.shape, outStrides);
  for (int k = 0; k < N; ++k)
    for (int32_t d = 0; d < ix.rank; ++d)
      contiguous =
          contiguous && (ix.shape[d] == 1 || ix.strides[k][d] == outStrides[d]);
  T *o = static_cast<T *>(out->data);
  if (!contiguous)
    coalesce(ix);
  withIndexType(fitsInt32(out->numel, ix), [&](auto index) {
    using I = decltype(index);
    const I numel = static_cast<I>(out->numel);
    if (contiguous)
      launchContiguous<T, M, N>(o, in, numel, op);
    else
      mapStrided<T, M, N><<<gridFor(out->numel), kBlock, 0, computeStream()>>>(
          o, in, numel, DeviceIndexing<N, I>(ix), op);
  });
  checkLaunch(kernel);
}

//===----------------------------------------------------------------------===//
// Tiled transposes
//===----------------------------------------------------------------------===//

/// Tiles of kTile x kTile elements, each moved by kTile x kTileRows threads.
constexpr int kTile = 32;
constexpr int kTileRows = 8;

/// A copy into contiguous out that reads self contiguously along out's dim
/// `c` rather than its innermost dim `i`: a batch of 2-D transposes of
/// [rows = size of c, cols = size of i] over out's other dims (`batch`, with
/// out's strides as operand 0 and self's as operand 1).
template <typename I> struct TransposeShape {
  I rows, cols, tilesPerRow, batches;
  I outRowStride, inColStride;
  DeviceIndexing<2, I> batch;
};

/// The strided kernel reads such a copy one element per 32-byte sector; this
/// one stages a tile in shared memory so that both the reads (along c) and
/// the writes (along i) are coalesced. The +1 column keeps the transposed
/// reads of the tile free of bank conflicts.
template <typename T, typename I>
__global__ void transposeTiles(T *out, const T *in, TransposeShape<I> t) {
  __shared__ T tile[kTile][kTile + 1];
  const I tileRow = blockIdx.x / t.tilesPerRow;
  const I row0 = tileRow * kTile;
  const I col0 = (blockIdx.x - tileRow * t.tilesPerRow) * kTile;
  for (I b = blockIdx.y; b < t.batches; b += gridDim.y) {
    I offsets[2] = {};
    t.batch.addOffsets(b, offsets);
    const I row = row0 + threadIdx.x;
    for (int k = threadIdx.y; k < kTile; k += kTileRows)
      if (row < t.rows && col0 + k < t.cols)
        tile[k][threadIdx.x] =
            in[offsets[1] + row + (col0 + k) * t.inColStride];
    __syncthreads();
    const I col = col0 + threadIdx.x;
    for (int k = threadIdx.y; k < kTile; k += kTileRows)
      if (row0 + k < t.rows && col < t.cols)
        out[offsets[0] + (row0 + k) * t.outRowStride + col] =
            tile[threadIdx.x][k];
    __syncthreads();
  }
}

/// The dim of coalesced `ix` along which self is contiguous when it is not
/// out's innermost, or -1. Dims below 8 stay with the strided kernel: its
/// reads then share sectors, and most of a tile would idle. So do inner
/// strides of 0 (expand), whose reads are broadcasts.
int32_t transposedDim(const Indexing<1> &ix) {
  constexpr int64_t kMinSize = 8;
  const int32_t inner = ix.rank - 1;
  if (ix.rank < 2 || ix.strides[0][inner] <= 1 || ix.shape[inner] < kMinSize)
    return -1;
  for (int32_t d = 0; d < inner; ++d)
    if (ix.strides[0][d] == 1)
      return ix.shape[d] < kMinSize ? -1 : d;
  return -1;
}

/// out = self read at coalesced `ix`, as transposes of out's dim `c` and its
/// innermost dim.
template <typename T>
void launchTranspose(SpmdBuffer *out, const T *in, const Indexing<1> &ix,
                     int32_t c) {
  const int32_t inner = ix.rank - 1;
  int64_t outStrides[SPMD_MAX_RANK];
  contiguousStrides(ix.rank, ix.shape, outStrides);
  Indexing<2> batch;
  for (int32_t d = 0; d < inner; ++d) {
    if (d == c)
      continue;
    batch.shape[batch.rank] = ix.shape[d];
    batch.strides[0][batch.rank] = outStrides[d];
    batch.strides[1][batch.rank] = ix.strides[0][d];
    ++batch.rank;
  }
  coalesce(batch);
  const int64_t rows = ix.shape[c], cols = ix.shape[inner];
  const int64_t tilesPerRow = ceilDiv(cols, kTile);
  const int64_t batches = out->numel / (rows * cols);
  const dim3 grid(static_cast<unsigned>(ceilDiv(rows, kTile) * tilesPerRow),
                  static_cast<unsigned>(std::min<int64_t>(batches, 65535)));
  withIndexType(fitsInt32(out->numel, ix), [&](auto index) {
    using I = decltype(index);
    TransposeShape<I> t{I(rows),
                        I(cols),
                        I(tilesPerRow),
                        I(batches),
                        I(outStrides[c]),
                        I(ix.strides[0][inner]),
                        DeviceIndexing<2, I>(batch)};
    transposeTiles<<<grid, dim3(kTile, kTileRows), 0, computeStream()>>>(
        static_cast<T *>(out->data), in, t);
  });
}

template <typename T> struct Identity {
  __device__ T operator()(T x) const { return x; }
};

/// out = self read at the strides `makeIndexing()` gives over out's shape
/// (expand, permute): a copy in out's dtype, with no arithmetic, so bf16
/// keeps its bits (NaN payloads included).
template <typename MakeIndexing>
void copyStrided(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
                 MakeIndexing &&makeIndexing) {
  dispatchDevice<kAll | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    Indexing<1> ix = makeIndexing();
    std::unique_ptr<Scratch> converted;
    Inputs<T, 1> in{{dataAs<T>(self, converted, kernel)}};
    coalesce(ix);
    const int32_t c = transposedDim(ix);
    if (c < 0 || out->numel == 0)
      return launchMap<T, T, 1>(kernel, out, in, ix, Identity<T>{});
    launchTranspose(out, in.ptr[0], ix, c);
    checkLaunch(kernel);
  });
}

} // namespace

//===----------------------------------------------------------------------===//
// Cuda.h
//===----------------------------------------------------------------------===//

void spmd::rt::cuda::convert(void *dst, int32_t dtype, const SpmdBuffer *b,
                             const char *kernel) {
  if (b->numel == 0)
    return;
  dispatchDevice<kAll | kBFloat16>(dtype, kernel, [&](auto toTag) {
    using To = decltype(toTag);
    dispatchDevice<kAll | kBFloat16>(b->dtype, kernel, [&](auto fromTag) {
      using From = decltype(fromTag);
      // The contiguous kernel with no op: apply's conversion of each From
      // to To (M = To) is the cast.
      withIndexType(b->numel < kInt32Limit, [&](auto index) {
        using I = decltype(index);
        launchContiguous<To, To, 1>(
            static_cast<To *>(dst),
            Inputs<From, 1>{{static_cast<const From *>(b->data)}},
            static_cast<I>(b->numel), Identity<To>{});
      });
      checkLaunch(kernel);
    });
  });
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

namespace spmd::rt::cuda {

/// How the device runs Pointwise.h's formulas: the strided engine, in
/// OpMathT of out's dtype (float for bf16), with scalars converted to it
/// (through out's dtype where the op takes them in its storage type).
struct PointwiseEngine {
  /// CUDA's functions (erf does not reuse the exp(-x^2) that the CPU's
  /// takes).
  struct Math {
    template <typename T> SPMD_RT_HOST_DEVICE static T tanh(T x) {
      return ::tanh(x);
    }
    template <typename T> SPMD_RT_HOST_DEVICE static T erf(T x) {
      return ::erf(x);
    }
    template <typename T> SPMD_RT_HOST_DEVICE static T erf(T x, T) {
      return ::erf(x);
    }
    template <typename T> SPMD_RT_HOST_DEVICE static T exp(T x) {
      return ::exp(x);
    }
    template <typename T> SPMD_RT_HOST_DEVICE static T sqrt(T x) {
      return ::sqrt(x);
    }
    template <typename T> SPMD_RT_HOST_DEVICE static T log(T x) {
      return ::log(x);
    }
    template <typename T> SPMD_RT_HOST_DEVICE static T cos(T x) {
      return ::cos(x);
    }
    template <typename T> SPMD_RT_HOST_DEVICE static T sin(T x) {
      return ::sin(x);
    }
    /// ATen's CUDA rsqrt kernel: the device's rsqrt (1 / sqrt on the
    /// host, which has none).
    template <typename T> SPMD_RT_HOST_DEVICE static T rsqrt(T x) {
#if defined(__CUDA_ARCH__)
      return ::rsqrt(x);
#else
      return T(1) / ::sqrt(x);
#endif
    }
    template <typename T> SPMD_RT_HOST_DEVICE static T pow(T base, T exponent) {
      return ::pow(base, exponent);
    }
  };
  template <typename T> using Compute = OpMathT<T>;
  template <typename T, typename Op> static OpMathT<T> scalar(double value) {
    if constexpr (ScalarsInStorageType<Op>::value)
      return convertValue<OpMathT<T>>(convertValue<T>(value));
    else
      return convertValue<OpMathT<T>>(value);
  }
  /// Device memory for a temporary.
  using Temporary = Scratch;
  static void copy(SpmdBuffer *out, const SpmdBuffer *self) {
    cuda::spmd_rt_copy(out, self);
  }
  /// As on the CPU: dispatches on out's dtype T within `Set` (and bf16
  /// where `Set` has the floats), converts inputs to T, checks
  /// broadcasting and maps `makeOp(T{})` over out, an op computing in
  /// M = OpMathT<T>: the op and its scalars are in float for bf16.
  template <unsigned Set, int N, typename MakeOp>
  static void elementwise(const char *kernel, SpmdBuffer *out,
                          const std::array<const SpmdBuffer *, N> &ins,
                          MakeOp &&makeOp) {
    constexpr unsigned kSet = (Set & kFloat) != 0 ? Set | kBFloat16 : Set;
    dispatchDevice<kSet>(out->dtype, kernel, [&](auto tag) {
      using T = decltype(tag);
      using M = OpMathT<T>;
      Indexing<N> ix;
      ix.rank = out->rank;
      std::copy(out->shape, out->shape + out->rank, ix.shape);
      Inputs<T, N> in;
      std::unique_ptr<Scratch> converted[N > 0 ? N : 1];
      for (int k = 0; k < N; ++k) {
        broadcastStrides(kernel, ins[k], out->rank, out->shape, ix.strides[k]);
        in.ptr[k] = dataAs<T>(ins[k], converted[k], kernel);
      }
      launchMap<T, M, N>(kernel, out, in, ix, makeOp(tag));
    });
  }
};

#define SPMD_RT_KERNEL(name, params, args)
#define SPMD_RT_POINTWISE SPMD_RT_DEFINE_POINTWISE
#include "spmd/Runtime/KernelList.def"

void spmd_rt_copy(SpmdBuffer *out, const SpmdBuffer *self) {
  const char *kernel = "spmd_rt_copy";
  checkSameNumel(kernel, "out", out, "self", self);
  if (out->dtype != self->dtype)
    return convert(out->data, out->dtype, self, kernel);
  size_t bytes =
      static_cast<size_t>(out->numel) * spmd_rt_dtype_size(out->dtype);
  if (bytes > 0 && out->data != self->data)
    check(cudaMemcpyAsync(out->data, self->data, bytes,
                          cudaMemcpyDeviceToDevice, computeStream()),
          kernel);
}

void spmd_rt_expand(SpmdBuffer *out, const SpmdBuffer *self) {
  const char *kernel = "spmd_rt_expand";
  copyStrided(kernel, out, self, [&] {
    Indexing<1> ix;
    ix.rank = out->rank;
    std::copy(out->shape, out->shape + out->rank, ix.shape);
    broadcastStrides(kernel, self, out->rank, out->shape, ix.strides[0]);
    return ix;
  });
}

void spmd_rt_permute(SpmdBuffer *out, const SpmdBuffer *self, int32_t n,
                     const int64_t *dims) {
  const char *kernel = "spmd_rt_permute";
  checkPermute(kernel, out, self, n, dims);
  copyStrided(kernel, out, self, [&] {
    Indexing<1> ix;
    ix.rank = n;
    int64_t selfStrides[SPMD_MAX_RANK];
    contiguousStrides(n, self->shape, selfStrides);
    for (int32_t k = 0; k < n; ++k) {
      ix.shape[k] = out->shape[k];
      ix.strides[0][k] = selfStrides[dims[k]];
    }
    return ix;
  });
}

} // namespace spmd::rt::cuda
