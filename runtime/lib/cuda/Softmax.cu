//===- Softmax.cu - softmax, log_softmax and their backwards on the GPU ---===//
//
// cpu/Softmax.cpp on the device, with the same [outer, size, inner] view
// around `dim` and the same passes: folds over `dim` (max, sum) and maps that
// use them, all in the tensor's float type. bf16 tensors are
// computed in float, ATen's opmath type, and rounded to bf16 once on store.
//
// With inner == 1 (the last dim) a group of threads owns a row: a warp for
// rows of up to 1024 elements, a whole block above. Consecutive threads read
// consecutive elements (coalesced), and the group combines its partial folds
// with warp shuffles (and shared memory across the warps of a block). Rows
// of up to 16 elements a thread (32 in the forward's 1024-thread blocks)
// are read into registers once, so the passes read memory once; longer rows
// are read again by every pass. With inner > 1 the threads of a block row hold
// consecutive inner lanes of one outer index (coalesced too) and walk `dim`
// down their columns, each column split over the block's rows when outer *
// inner alone would not fill the GPU; a column's partial folds combine in
// shared memory.
//
// Every fold combines in a fixed order, so results are deterministic.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include <array>
#include <limits>

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

enum class Kind { Softmax, LogSoftmax, SoftmaxBackward, LogSoftmaxBackward };


/// Whether kind K reads a second input (the forward's output).
template <Kind K>
constexpr bool kTwoInputs =
    K == Kind::SoftmaxBackward || K == Kind::LogSoftmaxBackward;

/// One row of n elements shared by kGroup threads: thread `lane` holds
/// elements lane, lane + kGroup, ...; `forEach(f)` calls f(index, a[index],
/// b[index]) for them (b[index] only with kTwo) and `fold(f)` calls
/// f(a[index], b[index]), the values in OpMathT<T>.
///
/// With kCache > 0 the row (at most kGroup * kCache elements) is read into
/// registers once, so that the passes read memory once; `apply(f)` replaces
/// the cached a[index] by f(a[index]). The slots past the row's end hold
/// `pad` (and 0 for b), a value that leaves the kernel's folds unchanged, so
/// that folds need no bounds checks. Without a cache every pass reads
/// memory.
template <typename T, bool kTwo, int kGroup, int kCache> struct RowAxis {
  using A = OpMathT<T>;
  static constexpr int kSlots = kCache > 0 ? kCache : 1;
  const T *__restrict__ a;
  const T *__restrict__ b;
  int64_t base, n;
  int lane;
  // In OpMathT<T>: softmax keeps its exponentials here (`apply`).
  A va[kSlots], vb[kSlots];

  __device__ RowAxis(const T *a, const T *b, int64_t base, int64_t n, int lane,
                     A pad)
      : a(a), b(b), base(base), n(n), lane(lane) {
    if constexpr (kCache > 0) {
#pragma unroll
      for (int k = 0; k < kCache; ++k) {
        const int j = lane + k * kGroup;
        va[k] = j < int(n) ? toOpMath(a[base + j]) : pad;
        if constexpr (kTwo)
          vb[k] = j < int(n) ? toOpMath(b[base + j]) : A(0);
      }
    }
  }

  template <typename F> __device__ void forEach(F f) const {
    if constexpr (kCache > 0) {
#pragma unroll
      for (int k = 0; k < kCache; ++k) {
        const int j = lane + k * kGroup;
        if (j < int(n))
          f(base + j, va[k], kTwo ? vb[k] : A(0));
      }
    } else {
#pragma unroll 4
      for (int64_t j = lane; j < n; j += kGroup)
        f(base + j, toOpMath(a[base + j]), kTwo ? toOpMath(b[base + j]) : A(0));
    }
  }

  template <typename F> __device__ void fold(F f) const {
    if constexpr (kCache > 0) {
#pragma unroll
      for (int k = 0; k < kCache; ++k)
        f(va[k], kTwo ? vb[k] : A(0));
    } else {
      forEach([&](int64_t, A x, A y) { f(x, y); });
    }
  }

  template <typename F> __device__ void apply(F f) {
#pragma unroll
    for (int k = 0; k < kCache; ++k)
      va[k] = f(va[k]);
  }

  template <typename V, typename Op> __device__ V combine(V v, Op op) const {
    return groupReduce<kGroup>(v, op);
  }
};

/// Whether `Axis` is a RowAxis with its row in registers.
template <typename Axis> constexpr bool kCachedRow = false;
template <typename T, bool kTwo, int kGroup, int kCache>
constexpr bool kCachedRow<RowAxis<T, kTwo, kGroup, kCache>> = kCache > 0;

/// The elements of one (outer, inner) column, split over the blockDim.y
/// threads of a block column: thread y walks d = y, y + blockDim.y, ...
/// The values are given in OpMathT<T>, as by RowAxis.
template <typename T, bool kTwo> struct ColumnAxis {
  using A = OpMathT<T>;
  const T *__restrict__ a;
  const T *__restrict__ b;
  int64_t base, size, inner;

  template <typename F> __device__ void forEach(F f) const {
#pragma unroll 4
    for (int64_t d = threadIdx.y; d < size; d += blockDim.y) {
      const int64_t i = base + d * inner;
      f(i, toOpMath(a[i]), kTwo ? toOpMath(b[i]) : A(0));
    }
  }

  template <typename F> __device__ void fold(F f) const {
    forEach([&](int64_t, A x, A y) { f(x, y); });
  }

  /// Combines the block column's partial folds (a tree over y in shared
  /// memory); every thread gets the result.
  template <typename V, typename Op> __device__ V combine(V v, Op op) const {
    __shared__ V tile[kBlock];
    const int w = blockDim.x, x = threadIdx.x, y = threadIdx.y;
    tile[y * w + x] = v;
    __syncthreads();
    for (int s = blockDim.y / 2; s > 0; s /= 2) {
      if (y < s)
        tile[y * w + x] = op(tile[y * w + x], tile[(y + s) * w + x]);
      __syncthreads();
    }
    v = tile[x];
    // `tile` is reused by the next combine.
    __syncthreads();
    return v;
  }
};

/// One line along `dim` of a kernel of kind K, whose elements `axis` gives
/// as (index, a, b): a is self (forward) or grad_output (backward), b the
/// forward's output (backward only). The math runs in A = OpMathT<T>; each
/// result is rounded to T once, on store.
template <Kind K, typename T, typename Axis>
__device__ void softmaxLine(Axis axis, T *__restrict__ out) {
  using A = OpMathT<T>;
  if constexpr (K == Kind::Softmax || K == Kind::LogSoftmax) {
    A max = -std::numeric_limits<A>::infinity();
    axis.fold([&](A x, A) { max = MaxOp()(max, x); });
    max = axis.combine(max, MaxOp());
    // softmax keeps exp(x - max) in a cached row (as the CPU keeps it in
    // out); other rows compute it again in the last pass.
    constexpr bool kKeepExp = K == Kind::Softmax && kCachedRow<Axis>;
    if constexpr (kKeepExp)
      axis.apply([&](A x) { return expOf(x - max); });
    auto e = [&](A v) { return kKeepExp ? v : expOf(v - max); };
    A sum = 0;
    axis.fold([&](A x, A) { sum += e(x); });
    sum = axis.combine(sum, AddOp());
    if constexpr (K == Kind::Softmax) {
      // ATen: exp(x - max) * (1 / sum).
      const A r = A(1) / sum;
      axis.forEach([&](int64_t i, A x, A) { out[i] = toStorage<T>(e(x) * r); });
    } else {
      // ATen: (x - max) - log(sum); subtracting max + log(sum) at once would
      // lose the small differences of large logits.
      const A c = logOf(sum);
      axis.forEach(
          [&](int64_t i, A x, A) { out[i] = toStorage<T>((x - max) - c); });
    }
  } else if constexpr (K == Kind::SoftmaxBackward) {
    // ATen: output * (grad - sum(grad * output)).
    A sum = 0;
    axis.fold([&](A g, A y) { sum += g * y; });
    sum = axis.combine(sum, AddOp());
    axis.forEach(
        [&](int64_t i, A g, A y) { out[i] = toStorage<T>(y * (g - sum)); });
  } else {
    // ATen: grad - exp(output) * sum(grad).
    A sum = 0;
    axis.fold([&](A g, A) { sum += g; });
    sum = axis.combine(sum, AddOp());
    axis.forEach([&](int64_t i, A g, A y) {
      out[i] = toStorage<T>(g - expOf(y) * sum);
    });
  }
}

/// inner == 1: kGroup threads per row of n elements (see RowAxis).
template <Kind K, typename T, int kGroup, int kCache>
__global__ void __launch_bounds__(kRowThreads<kGroup>)
    softmaxRows(T *__restrict__ out, const T *__restrict__ a,
                const T *__restrict__ b, int64_t rows, int64_t n) {
  // What the folds ignore: exp(-inf - max) is 0 for the forward's sum (and
  // -inf the max's identity), 0 adds nothing to the backward's sums.
  using A = OpMathT<T>;
  constexpr A kPad = kTwoInputs<K> ? A(0) : -std::numeric_limits<A>::infinity();
  // With kGroup > 32 a block owns one row, so the loop is block-uniform.
  const RowCursor<kGroup> cursor;
  for (int64_t row = cursor.first(); row < rows; row += cursor.step())
    softmaxLine<K>(RowAxis<T, kTwoInputs<K>, kGroup, kCache>(
                       a, b, row * n, n, cursor.lane(), kPad),
                   out);
}

/// inner > 1: a block owns blockDim.x (a power of two up to 32) consecutive
/// inner lanes of one outer index, blockDim.y threads per lane.
template <Kind K, typename T>
__global__ void __launch_bounds__(kBlock)
    softmaxColumns(T *__restrict__ out, const T *__restrict__ a,
                   const T *__restrict__ b, int64_t outer, int64_t size,
                   int64_t inner) {
  const int64_t tiles = ceilDiv(inner, blockDim.x);
  // Block-uniform: every thread takes part in the combines.
  for (int64_t t = blockIdx.x; t < outer * tiles; t += gridDim.x) {
    const int64_t o = t / tiles, i = t % tiles * blockDim.x + threadIdx.x;
    softmaxLine<K>(ColumnAxis<T, kTwoInputs<K>>{a, b, o * size * inner + i,
                                                i < inner ? size : 0, inner},
                   out);
  }
}

/// The column launch: lanes across inner (coalesced), and the rest of a
/// block's threads, up to the dim's size, split the dim so that short
/// outer * inner still fill the GPU.
template <Kind K, typename T>
void launchColumns(T *out, const T *a, const T *b, const DimLayout &l) {
  unsigned w = 1, h = 1;
  while (w < 32 && w < l.inner)
    w *= 2;
  while (w * h < unsigned(kBlock) && h < l.size)
    h *= 2;
  const int64_t blocks =
      std::min<int64_t>(l.outer * ceilDiv(l.inner, w), int64_t(1) << 30);
  softmaxColumns<K, T>
      <<<static_cast<unsigned>(blocks), dim3(w, h), 0, computeStream()>>>(
          out, a, b, l.outer, l.size, l.inner);
}

template <Kind K, typename T, int kGroup, int kCache>
void launchRows(T *out, const T *a, const T *b, int64_t rows, int64_t n) {
  softmaxRows<K, T, kGroup, kCache>
      <<<rowBlocks<kGroup>(rows), kRowThreads<kGroup>, 0, computeStream()>>>(
          out, a, b, rows, n);
}

/// The row launch: a warp per row up to 1024 elements, else a block; rows
/// of up to 16 elements a thread (32 for the forward's 1024-thread blocks)
/// stay in registers (in OpMathT<T>: bf16 rows take f32's registers). f64
/// rows keep 256 threads: 1024-thread blocks (64 registers a thread) would
/// spill its math.
template <Kind K, typename T>
void launchRows(T *out, const T *a, const T *b, int64_t rows, int64_t n) {
  if (n <= 32 * 16)
    return launchRows<K, T, 32, 16>(out, a, b, rows, n);
  if (n <= 1024)
    return launchRows<K, T, 32, 0>(out, a, b, rows, n);
  if (n <= 256 * 16)
    return launchRows<K, T, 256, 16>(out, a, b, rows, n);
  if constexpr (sizeof(OpMathT<T>) == 8) {
    launchRows<K, T, 256, 0>(out, a, b, rows, n);
  } else {
    if (n <= 1024 * 16)
      return launchRows<K, T, 1024, 16>(out, a, b, rows, n);
    if constexpr (!kTwoInputs<K>)
      if (n <= 1024 * 32)
        return launchRows<K, T, 1024, 32>(out, a, b, rows, n);
    launchRows<K, T, 1024, 0>(out, a, b, rows, n);
  }
}

/// Checks the operands of a softmax-family kernel (all shaped like out,
/// `dim` in range), converts the inputs to out's float type (f32, f64 or
/// bf16) and launches kind K.
template <Kind K, size_t N>
void softmaxKernel(const char *kernel, SpmdBuffer *out,
                   const std::array<const SpmdBuffer *, N> &ins, int64_t dim) {
  const DimLayout l = checkSoftmax(kernel, out, ins.data(), N, dim);
  dispatchDevice<kFloat | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    if (out->numel == 0)
      return;
    std::unique_ptr<Scratch> storage[N];
    const T *in[2] = {nullptr, nullptr};
    for (size_t k = 0; k < N; ++k)
      in[k] = dataAs<T>(ins[k], storage[k], kernel);
    T *o = dataOf<T>(out);
    if (l.inner != 1)
      launchColumns<K, T>(o, in[0], in[1], l);
    else
      launchRows<K, T>(o, in[0], in[1], l.outer, l.size);
    checkLaunch(kernel);
  });
}

} // namespace

/// ATen's softmax: exp(x - max) / sum(exp(x - max)).
void spmd_rt_softmax(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim) {
  softmaxKernel<Kind::Softmax, 1>("spmd_rt_softmax", out, {self}, dim);
}

/// ATen's log_softmax: (x - max) - log(sum(exp(x - max))).
void spmd_rt_log_softmax(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim) {
  softmaxKernel<Kind::LogSoftmax, 1>("spmd_rt_log_softmax", out, {self}, dim);
}

/// ATen's softmax_backward_data formula: output * (grad - sum(grad * output)).
void spmd_rt_softmax_backward_data(SpmdBuffer *out,
                                   const SpmdBuffer *grad_output,
                                   const SpmdBuffer *output, int64_t dim) {
  softmaxKernel<Kind::SoftmaxBackward, 2>("spmd_rt_softmax_backward_data", out,
                                          {grad_output, output}, dim);
}

/// ATen's log_softmax_backward_data formula: grad - exp(output) * sum(grad).
void spmd_rt_log_softmax_backward_data(SpmdBuffer *out,
                                       const SpmdBuffer *grad_output,
                                       const SpmdBuffer *output, int64_t dim) {
  softmaxKernel<Kind::LogSoftmaxBackward, 2>(
      "spmd_rt_log_softmax_backward_data", out, {grad_output, output}, dim);
}

} // namespace spmd::rt::cuda
