//===- Reduction.cu - reductions over dims on the GPU ---------------------===//
//
// cpu/Reduction.cpp on the device: each SPMD_RT_REDUCTION kernel folds with
// its Reduce.h reducer (below, "sum" stands for any of them). self's dims
// are grouped into runs of reduced and kept dims (size-1 dims dropped,
// neighbours of the same kind merged). With one reduced run, self is a
// [B, R, C] view summed over R into [B, C], which covers the common cases
// with coalesced loads:
//   - everything ([1, R, 1]) and row sums ([B, R, 1]): the threads of a block
//     walk rows, consecutive threads on consecutive elements;
//   - column sums ([1, R, C], e.g. bias gradients) and middle dims
//     ([B, R, C]): a block's warp-wide rows of threads walk columns, again
//     consecutive threads on consecutive elements.
// Long reductions are split into chunks of R over several blocks, whose
// partial sums a second pass adds up in a fixed order (no atomics: the
// result is deterministic). Short rows take a warp each. The other layouts
// (several reduced runs, e.g. BatchNorm's statistics over N, H and W) take
// a block per output element and chunk of its reduced elements, walking
// the innermost reduced run together, or, when an output folds fewer than
// a block's worth of elements, a thread per output element.
//
// Reductions accumulate as the CPU's: in double for floats, in int64 for
// integers; bf16 accumulates in float, ATen's CUDA acc type, and
// is rounded to bf16 once on store.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// [B, R, C] summed over R: blockDim.x (a power of two up to 32) columns by
/// blockDim.y rows per block; blockIdx.x walks the (b, column tile) pairs,
/// blockIdx.y picks the chunk of rows [chunk * rowsPerChunk, +rowsPerChunk).
/// With one chunk the sums, finished for `count` elements, are the results
/// (`out[b * C + c]`), else they go to `partial[chunk * B * C + b * C + c]`.
template <typename T, typename Acc, typename R>
__global__ void __launch_bounds__(kBlock)
    sumTiles(T *out, Acc *partial, const T *__restrict__ in, int64_t batch,
             int64_t rows, int64_t cols, int64_t rowsPerChunk, int64_t count) {
  const R op;
  __shared__ Acc tile[kBlock];
  const int w = blockDim.x, h = blockDim.y;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t tiles = ceilDiv(cols, w);
  const int64_t begin = blockIdx.y * rowsPerChunk;
  const int64_t end = std::min(rows, begin + rowsPerChunk);
  // Block-uniform: every thread takes part in the __syncthreads below.
  for (int64_t t = blockIdx.x; t < batch * tiles; t += gridDim.x) {
    const int64_t b = t / tiles, c = (t % tiles) * w + tx;
    Acc acc = R::identity();
    if (c < cols) {
      const T *p = in + b * rows * cols + c;
#pragma unroll 4
      for (int64_t r = begin + ty; r < end; r += h)
        acc = op(acc, Acc(toOpMath(p[r * cols])));
    }
    tile[ty * w + tx] = acc;
    __syncthreads();
    for (int s = h / 2; s > 0; s /= 2) {
      if (ty < s)
        tile[ty * w + tx] = op(tile[ty * w + tx], tile[(ty + s) * w + tx]);
      __syncthreads();
    }
    // tile[tx] is only written again by this thread.
    if (ty == 0 && c < cols) {
      if (partial)
        partial[blockIdx.y * batch * cols + b * cols + c] = tile[tx];
      else
        out[b * cols + c] = toStorage<T>(R::finish(tile[tx], count));
    }
  }
}

/// [B, R] summed over R, R of at most a few warps' loads: a warp per row.
template <typename T, typename Acc, typename R>
__global__ void sumRowsWarp(T *out, const T *__restrict__ in, int64_t batch,
                            int64_t n) {
  const R op;
  const int lane = threadIdx.x % 32;
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / 32);
  for (int64_t b = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
       b < batch; b += warps) {
    const T *p = in + b * n;
    Acc acc = R::identity();
#pragma unroll 4
    for (int64_t j = lane; j < n; j += 32)
      acc = op(acc, Acc(toOpMath(p[j])));
    acc = warpReduce(acc, op);
    if (lane == 0)
      out[b] = toStorage<T>(R::finish(acc, n));
  }
}

/// Any layout: output element o is kept index (decomposed over keptShape,
/// row-major) and the sum runs over the outer reduced runs (decomposed over
/// reducedShape) and, innermost, `innerLen` elements `innerStride` apart.
/// Strides are self's, in elements. With reducedCount 0 every output is the
/// reducer's value over no elements (self is empty).
struct GeneralView {
  int32_t keptRank, reducedRank;
  Dims keptShape, keptStride, reducedShape, reducedStride;
  int64_t reducedCount, innerLen, innerStride;
};

/// The offset of linear index `i` of `shape` (rank `rank`) under `stride`.
__device__ int64_t offsetOf(int64_t i, int32_t rank, const Dims &shape,
                            const Dims &stride) {
  int64_t offset = 0;
  for (int32_t d = rank - 1; d >= 0; --d) {
    offset += (i % shape.v[d]) * stride.v[d];
    i /= shape.v[d];
  }
  return offset;
}

/// A thread per output element.
template <typename T, typename Acc, typename R>
__global__ void sumGeneral(T *out, const T *__restrict__ in, int64_t outputs,
                           GeneralView v) {
  const R op;
  for (int64_t o = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; o < outputs;
       o += int64_t(gridDim.x) * blockDim.x) {
    const T *base = in + offsetOf(o, v.keptRank, v.keptShape, v.keptStride);
    Acc acc = R::identity();
    for (int64_t r = 0; r < v.reducedCount; ++r) {
      const T *p =
          base + offsetOf(r, v.reducedRank, v.reducedShape, v.reducedStride);
      for (int64_t i = 0; i < v.innerLen; ++i)
        acc = op(acc, Acc(toOpMath(p[i * v.innerStride])));
    }
    out[o] = toStorage<T>(R::finish(acc, v.reducedCount * v.innerLen));
  }
}

/// A block (kBlock threads) per output element and chunk of its reduced
/// elements: element e of the chunk range [chunk * perChunk, +perChunk) is
/// inner element e % innerLen of outer reduced index e / innerLen, so the
/// threads of a block walk the innermost reduced run together (coalesced
/// when it is contiguous). With one chunk the sums, finished for `count`
/// elements, are the results, else they go to `partial[chunk * outputs +
/// o]` for reduceChunks. BatchNorm's statistics ([N, C, H, W] over N, H and
/// W) take this path.
template <typename T, typename Acc, typename R>
__global__ void __launch_bounds__(kBlock)
    sumBlocks(T *out, Acc *partial, const T *__restrict__ in, int64_t outputs,
              GeneralView v, int64_t perChunk, int64_t count) {
  const R op;
  const int64_t total = v.reducedCount * v.innerLen;
  const int64_t begin = blockIdx.y * perChunk;
  const int64_t end = std::min(total, begin + perChunk);
  // Block-uniform: every thread takes part in groupReduce.
  for (int64_t o = blockIdx.x; o < outputs; o += gridDim.x) {
    const T *base = in + offsetOf(o, v.keptRank, v.keptShape, v.keptStride);
    Acc acc = R::identity();
    // Element e is (r, i); the row's address and the divisions are redone
    // only when a step of kBlock elements crosses into another row.
    int64_t e = begin + threadIdx.x, r = e / v.innerLen, i = e % v.innerLen;
    const T *row =
        base + offsetOf(r, v.reducedRank, v.reducedShape, v.reducedStride);
    for (; e < end; e += kBlock) {
      acc = op(acc, Acc(toOpMath(row[i * v.innerStride])));
      i += kBlock;
      if (i >= v.innerLen) {
        r += i / v.innerLen;
        i %= v.innerLen;
        row =
            base + offsetOf(r, v.reducedRank, v.reducedShape, v.reducedStride);
      }
    }
    acc = groupReduce<kBlock>(acc, op);
    if (threadIdx.x == 0) {
      if (partial)
        partial[blockIdx.y * outputs + o] = acc;
      else
        out[o] = toStorage<T>(R::finish(acc, count));
    }
  }
}

/// A run of self's dims: all reduced or all kept.
struct Run {
  int64_t size, stride;
  bool reduced;
};

/// The fewest loads a thread of a chunk gets, the reductions short enough
/// for a thread per output, and the rows short enough for a warp each.
constexpr int64_t kMinLoadsPerThread = 8;
constexpr int64_t kThreadMax = 16;
constexpr int64_t kWarpMax = 1024;

/// Runs a first pass `launch(out, partial)` split in `chunks` chunks: with
/// one chunk it writes the `outputs` results itself (partial null), else
/// its partial sums go to scratch, which reduceChunks folds into `out`,
/// finished for `count` elements per output.
template <typename T, typename Acc, typename R, typename Launch>
void inChunks(const char *kernel, T *out, int64_t outputs, int64_t chunks,
              int64_t count, Launch &&launch) {
  if (chunks == 1) {
    launch(out, static_cast<Acc *>(nullptr));
    checkLaunch(kernel);
    return;
  }
  Scratch partial(chunks * outputs * int64_t(sizeof(Acc)), kernel);
  launch(static_cast<T *>(nullptr), partial.as<Acc>());
  checkLaunch(kernel);
  reduceChunks<T, Acc, R>
      <<<gridFor(outputs * 32), kBlock, 0, computeStream()>>>(
          out, partial.as<Acc>(), outputs, chunks, count);
  checkLaunch(kernel);
}

/// [B, R, C] summed over R into `out`.
template <typename T, typename Acc, typename R>
void sumBRC(const char *kernel, T *out, const T *in, int64_t b, int64_t r,
            int64_t c) {
  if (c == 1 && r <= kWarpMax) {
    sumRowsWarp<T, Acc, R>
        <<<gridFor(b * 32), kBlock, 0, computeStream()>>>(out, in, b, r);
    checkLaunch(kernel);
    return;
  }
  int w = 1;
  while (w < 32 && w < c)
    w *= 2;
  const int h = kBlock / w;
  const int64_t blocks = b * ceilDiv(c, w);
  const RowChunks split = chunkRows(r, blocks, h * kMinLoadsPerThread);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(blocks, 1 << 30)),
                  static_cast<unsigned>(split.count));
  const dim3 block(w, h);
  inChunks<T, Acc, R>(
      kernel, out, b * c, split.count, r, [&](T *results, Acc *partial) {
        sumTiles<T, Acc, R><<<grid, block, 0, computeStream()>>>(
            results, partial, in, b, r, c, split.rowsPerChunk, r);
      });
}

/// Sums `in` (shaped like self) over the reduced runs into `out`.
template <typename T, typename Acc, typename R>
void sumRuns(const char *kernel, T *out, int64_t outputs, const T *in,
             const Run *runs, int32_t count) {
  int32_t reducedRuns = 0, at = 0;
  for (int32_t k = 0; k < count; ++k)
    if (runs[k].reduced) {
      ++reducedRuns;
      at = k;
    }
  if (reducedRuns == 1 && runs[at].size > kThreadMax) {
    const int64_t b = at > 0 ? runs[0].size : 1;
    const int64_t c = at + 1 < count ? runs[at + 1].size : 1;
    return sumBRC<T, Acc, R>(kernel, out, in, b, runs[at].size, c);
  }
  GeneralView v{};
  v.reducedCount = 1;
  v.innerLen = 1;
  for (int32_t k = 0; k < count; ++k) {
    const Run &run = runs[k];
    if (!run.reduced) {
      v.keptShape.v[v.keptRank] = run.size;
      v.keptStride.v[v.keptRank++] = run.stride;
    } else if (k == at) {
      v.innerLen = run.size;
      v.innerStride = run.stride;
    } else {
      v.reducedShape.v[v.reducedRank] = run.size;
      v.reducedStride.v[v.reducedRank++] = run.stride;
      v.reducedCount *= run.size;
    }
  }
  const int64_t total = v.reducedCount * v.innerLen;
  if (total < kBlock) {
    sumGeneral<T, Acc, R>
        <<<gridFor(outputs), kBlock, 0, computeStream()>>>(out, in, outputs, v);
    checkLaunch(kernel);
    return;
  }
  const RowChunks split =
      chunkRows(total, outputs, kBlock * kMinLoadsPerThread);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(outputs, 1 << 30)),
                  static_cast<unsigned>(split.count));
  inChunks<T, Acc, R>(
      kernel, out, outputs, split.count, total, [&](T *results, Acc *partial) {
        sumBlocks<T, Acc, R><<<grid, kBlock, 0, computeStream()>>>(
            results, partial, in, outputs, v, split.rowsPerChunk, total);
      });
}

/// The SPMD_RT_REDUCTION kernels: out is self folded by `Reducer` over the
/// listed dims (checkReduction).
template <unsigned Set, template <typename, typename> class Reducer>
void reduce(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
            int32_t n, const int64_t *dims) {
  const ReducedDims reduced = checkReduction(kernel, out, self, n, dims);
  // cuda:: because argument-dependent lookup also finds the C entry point.
  if (reduced.copy)
    return cuda::spmd_rt_copy(out, self);
  const int32_t rank = self->rank;
  const bool *reduce = reduced.reduce;
  dispatchDevice<Set | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using Acc = AccT<T>;
    using R = Reducer<T, Acc>;
    if (out->numel == 0)
      return;
    T *o = dataOf<T>(out);
    // Over no elements: one thread per output writes the reducer's value.
    if (self->numel == 0) {
      GeneralView none{};
      sumGeneral<T, Acc, R>
          <<<gridFor(out->numel), kBlock, 0, computeStream()>>>(
              o, nullptr, out->numel, none);
      checkLaunch(kernel);
      return;
    }
    std::unique_ptr<Scratch> storage;
    const T *in = dataAs<T>(self, storage, kernel);
    // Runs of reduced and kept dims, innermost last, with self's strides.
    Run runs[SPMD_MAX_RANK];
    int32_t runCount = 0;
    for (int32_t d = 0; d < rank; ++d) {
      if (self->shape[d] == 1)
        continue;
      if (runCount > 0 && runs[runCount - 1].reduced == reduce[d])
        runs[runCount - 1].size *= self->shape[d];
      else
        runs[runCount++] = {self->shape[d], 0, reduce[d]};
    }
    int64_t stride = 1;
    for (int32_t k = runCount - 1; k >= 0; --k) {
      runs[k].stride = stride;
      stride *= runs[k].size;
    }
    sumRuns<T, Acc, R>(kernel, o, out->numel, in, runs, runCount);
  });
}

} // namespace

#define SPMD_RT_KERNEL(name, params, args)
#define SPMD_RT_REDUCTION SPMD_RT_DEFINE_REDUCTION
#include "spmd/Runtime/KernelList.def"

} // namespace spmd::rt::cuda
