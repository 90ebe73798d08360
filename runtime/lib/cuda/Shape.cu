//===- Shape.cu - cat, slices, padding, indexing, scans, factories --------===//
//
// cpu/Shape.cpp's cat, slice, slice_scatter, constant_pad_nd, cumsum,
// gather, scatter, index, local_take, triu, fill and arange on the device
// (copy, expand and permute live in another file). cat and slice are
// 2-D copies (cudaMemcpy2DAsync): rows are the dims before `dim`, a row is
// the bytes of `dim` and the dims after it. Like the CPU kernels they
// support every dtype but f16, and bf16 too (values are moved as
// 2-byte payloads, and fill values and arange's indices are rounded to it
// via float, as c10::BFloat16 does); an input of another dtype than out is
// converted to out's dtype first. cumsum accumulates as the CPU does: in
// double for floats (bf16 included, rounded once on store), in out's type
// for integers. scatter gives the CPU's result exactly: a position written
// twice keeps the last write in index order (a first pass claims each
// position for its last writer), and scatter_add adds each line of index
// along `dim` in one thread, in the CPU's order (the lines run in
// parallel: no two reach the same element). An index outside [-size,
// size) (gather, scatter, index) is recorded in the device error slot,
// with the CPU's message, and its element filled with 0 (scatter: left
// alone); the host reports it at the next synchronisation.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// Copies `height` rows of `width` bytes, `dstPitch` and `srcPitch` bytes
/// apart, on the compute stream: one plain copy when the rows are adjacent
/// on both sides or there is one row, else one 2-D copy.
void copyRows(void *dst, int64_t dstPitch, const void *src, int64_t srcPitch,
              int64_t width, int64_t height, const char *kernel) {
  if (width == 0 || height == 0)
    return;
  if (height == 1 || (dstPitch == width && srcPitch == width)) {
    check(cudaMemcpyAsync(dst, src, static_cast<size_t>(width * height),
                          cudaMemcpyDeviceToDevice, computeStream()),
          kernel);
    return;
  }
  check(cudaMemcpy2DAsync(dst, static_cast<size_t>(dstPitch), src,
                          static_cast<size_t>(srcPitch),
                          static_cast<size_t>(width),
                          static_cast<size_t>(height), cudaMemcpyDeviceToDevice,
                          computeStream()),
        kernel);
}

/// Calls `fn(T{}, in)` with out's element type T and `self`'s data as T
/// (converted when its dtype differs).
template <typename Fn>
void withInputAs(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
                 Fn &&fn) {
  dispatchDevice<kAll | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::unique_ptr<Scratch> storage;
    fn(tag, dataAs<T>(self, storage, kernel));
  });
}

/// local_take's out position k reads this rank's row of the index table
/// (local_take_runs' too, expanded on the host once).
struct TableSource {
  const int64_t *row;
  __device__ int64_t operator()(int64_t k) const { return row[k]; }
};

/// slice with a step: out position k reads start + k * step.
struct StepSource {
  int64_t start, step;
  __device__ int64_t operator()(int64_t k) const { return start + k * step; }
};

/// Where a row goes and which input row it copies, as element offsets; a
/// negative `src` fills the row instead.
struct RowMove {
  int64_t dst, src;
};

/// Moves `n` rows of `inner` elements: row r per map(r) (a RowMove).
/// blockDim.x threads walk a row (rowLaunch).
template <typename T, typename Map>
__global__ void moveRowsKernel(T *out, const T *in, int64_t n, int64_t inner,
                               Map map, T fill) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.y) + threadIdx.y; r < n;
       r += int64_t(gridDim.x) * blockDim.y) {
    const RowMove m = map(r);
    T *dst = out + m.dst;
    if (m.src < 0) {
      for (int64_t j = threadIdx.x; j < inner; j += blockDim.x)
        dst[j] = fill;
      continue;
    }
    const T *src = in + m.src;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x)
      dst[j] = src[j];
  }
}

template <typename T, typename Map>
void moveRows(const char *kernel, T *out, const T *in, int64_t n, int64_t inner,
              Map map, T fill = T{}) {
  if (n == 0 || inner == 0)
    return;
  const RowLaunch l = rowLaunch(n, inner);
  moveRowsKernel<T, Map>
      <<<l.grid, l.block, 0, computeStream()>>>(out, in, n, inner, map, fill);
  checkLaunch(kernel);
}

/// local_take and slice with a step: out row r = (i, k) (i over the dims
/// before `dim`, k along it) reads self row (i, source(k)), or is filled
/// when that is outside [0, selfSize).
template <typename Source> struct TakeRows {
  int64_t size, selfSize, inner;
  Source source;
  __device__ RowMove operator()(int64_t r) const {
    const int64_t i = r / size, from = source(r - i * size);
    return {r * inner,
            from < 0 || from >= selfSize ? -1 : (i * selfSize + from) * inner};
  }
};

/// slice_scatter with a step: src row r = (i, k) goes to out row (i, start
/// + k * step).
struct ScatterRows {
  int64_t size, outSize, inner, start, step;
  __device__ RowMove operator()(int64_t r) const {
    const int64_t i = r / size, k = r - i * size;
    return {(i * outSize + start + k * step) * inner, r * inner};
  }
};

/// spmd.local_take along `dim`: out position k reads self position
/// source(k), or `fill` where it is outside self. `makeSource()` gives the
/// device-side source once the shapes are checked.
template <typename MakeSource>
void localTake(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
               int64_t dim, double fill, MakeSource makeSource) {
  const DimLayout l = checkLocalTake(kernel, out, self, dim);
  const int64_t size = out->shape[dim], outer = l.outer, inner = l.inner;
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    if (out->numel == 0)
      return;
    // The CPU's static_cast<T>(fill); bf16 rounds the float value.
    const T value = convertValue<T>(static_cast<OpMathT<T>>(fill));
    moveRows(kernel, dataOf<T>(out), in, outer * size, inner,
             TakeRows<decltype(makeSource())>{size, self->shape[dim], inner,
                                              makeSource()},
             value);
  });
}

/// out[i] = self at out's position i shifted back by `before` per dim, or
/// `fill` outside self (constant_pad_nd; negative `before` crops).
template <typename T>
__global__ void padKernel(T *out, const T *in, int64_t n, int32_t rank,
                          Dims outShape, Dims selfShape, Dims before, T fill) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = i, from = 0, stride = 1;
    bool inside = true;
    for (int32_t d = rank - 1; d >= 0; --d) {
      const int64_t at = rest % outShape.v[d] - before.v[d];
      rest /= outShape.v[d];
      inside = inside && at >= 0 && at < selfShape.v[d];
      from += at * stride;
      stride *= selfShape.v[d];
    }
    out[i] = inside ? in[from] : fill;
  }
}

/// Running sums down each (outer, inner) column of [outer, size, inner], a
/// thread a column (consecutive threads hold consecutive inner lanes).
template <typename T>
__global__ void cumsumKernel(T *out, const T *in, int64_t outer, int64_t size,
                             int64_t inner) {
  using Acc = std::conditional_t<std::is_integral_v<T>, T, double>;
  const int64_t columns = outer * inner;
  for (int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; c < columns;
       c += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = c / inner, j = c - i * inner;
    const int64_t base = i * size * inner + j;
    Acc sum = 0;
    for (int64_t k = 0; k < size; ++k) {
      sum += static_cast<Acc>(toOpMath(in[base + k * inner]));
      out[base + k * inner] = toStorage<T>(static_cast<OpMathT<T>>(sum));
    }
  }
}

/// Where index kernels report an index outside [-size, size).
struct IndexErrors {
  DeviceError *slot;
  int kernel;
  /// `k` wrapped into [0, size), or -1 when out of bounds (recorded, with
  /// `dim` for the message).
  __device__ int64_t wrap(int64_t k, int64_t size, int64_t dim) const {
    if (k < -size || k >= size) {
      raiseError(slot, DeviceErrorKind::DimIndex, kernel, k, size, dim);
      return -1;
    }
    return k < 0 ? k + size : k;
  }
};

/// out[i] = self[i with index[i] at `dim`] (gather); out has index's shape.
template <typename T>
__global__ void
gatherKernel(T *out, const T *in, const int64_t *index, int64_t n, int32_t rank,
             int32_t dim, Dims outShape, Dims selfShape, IndexErrors errors) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t k = errors.wrap(index[i], selfShape.v[dim], dim);
    if (k < 0) {
      out[i] = T{};
      continue;
    }
    int64_t rest = i, from = 0, stride = 1;
    for (int32_t d = rank - 1; d >= 0; --d) {
      const int64_t at = rest % outShape.v[d];
      rest /= outShape.v[d];
      from += (d == dim ? k : at) * stride;
      stride *= selfShape.v[d];
    }
    out[i] = in[from];
  }
}

/// index.Tensor's indices: n index tensors over out's `batch` leading dims
/// (strides 0 where one broadcasts), and self's indexed dims.
struct IndexTables {
  const int64_t *ix[SPMD_MAX_RANK];
  int64_t strides[SPMD_MAX_RANK][SPMD_MAX_RANK];
  int64_t sizes[SPMD_MAX_RANK], selfStrides[SPMD_MAX_RANK];
  Dims batchShape;
  int32_t n, batch;
};

/// index.Tensor: out row r (of out's leading `batch` dims) reads self at
/// the n indices' values for r; a row whose index is out of bounds
/// (recorded) is filled.
struct IndexRows {
  IndexTables t;
  IndexErrors errors;
  int64_t inner;
  __device__ RowMove operator()(int64_t r) const {
    int64_t at[SPMD_MAX_RANK];
    int64_t rest = r;
    for (int32_t d = t.batch - 1; d >= 0; --d) {
      at[d] = rest % t.batchShape.v[d];
      rest /= t.batchShape.v[d];
    }
    int64_t from = 0;
    bool valid = true;
    for (int32_t k = 0; k < t.n; ++k) {
      int64_t offset = 0;
      for (int32_t d = 0; d < t.batch; ++d)
        offset += at[d] * t.strides[k][d];
      const int64_t i = errors.wrap(t.ix[k][offset], t.sizes[k], k);
      valid = valid && i >= 0;
      from += i * t.selfStrides[k];
    }
    return {r * inner, valid ? from : -1};
  }
};

/// Keeps (.., i, j) with j - i >= diagonal and zeroes the rest; row r of
/// the [matrices * rows, cols] view is matrix row r % rows.
template <typename T>
__global__ void triuKernel(T *out, const T *in, int64_t n, int64_t rows,
                           int64_t cols, int64_t diagonal) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.y) + threadIdx.y; r < n;
       r += int64_t(gridDim.x) * blockDim.y) {
    // Columns [0, zeros) lie below the diagonal.
    const int64_t below = r % rows + diagonal;
    const int64_t zeros = below < 0 ? 0 : below > cols ? cols : below;
    const int64_t row = r * cols;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
      out[row + j] = j < zeros ? T{} : in[row + j];
  }
}

/// A scatter's positions: index (contiguous, `shape`) element i, whose
/// value k goes to out at i's position with k at `dim`, reads src at i's
/// position.
struct ScatterMap {
  Dims shape, outShape, outStrides, srcStrides;
  int32_t rank, dim;
  IndexErrors errors;
  /// i's out and src offsets, or false when index[i] is out of bounds
  /// (recorded; the slot keeps the first error, so a second pass over the
  /// same index records nothing new).
  __device__ bool at(const int64_t *index, int64_t i, int64_t &to,
                     int64_t &from) const {
    const int64_t k = errors.wrap(index[i], outShape.v[dim], dim);
    if (k < 0)
      return false;
    int64_t rest = i;
    to = 0, from = 0;
    for (int32_t d = rank - 1; d >= 0; --d) {
      const int64_t c = rest % shape.v[d];
      rest /= shape.v[d];
      to += (d == dim ? k : c) * outStrides.v[d];
      from += c * srcStrides.v[d];
    }
    return true;
  }
};

/// scatter, first pass: each out position keeps the largest index position
/// (plus one) that writes it, so that the last write in row-major order
/// wins, as ATen's CPU scatter.
__global__ void scatterClaimKernel(unsigned long long *winner,
                                   const int64_t *index, int64_t n,
                                   ScatterMap map) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t to, from;
    if (map.at(index, i, to, from))
      atomicMax(winner + to, static_cast<unsigned long long>(i + 1));
  }
}

/// scatter, second pass: each position's winner writes.
template <typename T>
__global__ void scatterWriteKernel(T *out, const T *src, const int64_t *index,
                                   const unsigned long long *winner, int64_t n,
                                   ScatterMap map) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t to, from;
    if (map.at(index, i, to, from) &&
        winner[to] == static_cast<unsigned long long>(i + 1))
      out[to] = src[from];
  }
}

/// scatter_add: a thread per line of index along `dim` (the positions that
/// differ only at `dim`, which reach one line of out and no other thread's)
/// adds the line's values in order: the CPU's additions, in its order.
template <typename T>
__global__ void scatterAddKernel(T *out, const T *src, const int64_t *index,
                                 int64_t lines, ScatterMap map) {
  const int64_t size = map.shape.v[map.dim];
  int64_t inner = 1;
  for (int32_t d = map.dim + 1; d < map.rank; ++d)
    inner *= map.shape.v[d];
  for (int64_t l = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; l < lines;
       l += int64_t(gridDim.x) * blockDim.x) {
    const int64_t first = (l / inner) * size * inner + l % inner;
    for (int64_t j = 0; j < size; ++j) {
      int64_t to, from;
      if (!map.at(index, first + j * inner, to, from))
        continue;
      if constexpr (std::is_same_v<T, Bool8>)
        out[to] = out[to] || src[from];
      else
        out[to] = toStorage<T>(toOpMath(out[to]) + toOpMath(src[from]));
    }
  }
}

template <typename T> __global__ void fillKernel(T *out, int64_t n, T value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

template <typename T>
__global__ void arangeKernel(T *out, int64_t n, double start, double step) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = convertValue<T>(arangeValue(start, step, i));
}

} // namespace

void spmd_rt_cat(SpmdBuffer *out, int32_t n, const SpmdBuffer *const *inputs,
                 int64_t dim) {
  const char *kernel = "spmd_rt_cat";
  const DimLayout l = checkCat(kernel, out, n, inputs, dim);
  const int64_t outer = l.outer, inner = l.inner;
  dispatchDevice<kAll | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const int64_t outRow = out->shape[dim] * inner * int64_t(sizeof(T));
    char *o = static_cast<char *>(out->data);
    int64_t position = 0;
    std::unique_ptr<Scratch> storage;
    for (int32_t k = 0; k < n; ++k) {
      const SpmdBuffer *input = inputs[k];
      if (catSkips(input))
        continue;
      const T *in = dataAs<T>(input, storage, kernel);
      const int64_t chunk = input->shape[dim] * inner * int64_t(sizeof(T));
      copyRows(o + position, outRow, in, chunk, chunk, outer, kernel);
      position += chunk;
    }
  });
}

void spmd_rt_slice(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim,
                   int64_t start, int64_t step) {
  const char *kernel = "spmd_rt_slice";
  const DimLayout l = checkSlice(kernel, out, self, dim, start, step);
  if (step != 1) {
    localTake(kernel, out, self, dim, 0.0, [&] {
      return StepSource{start, step};
    });
    return;
  }
  const int64_t outer = l.outer, inner = l.inner;
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    const int64_t bytes = sizeof(T);
    copyRows(out->data, l.size * inner * bytes, in + start * inner,
             self->shape[dim] * inner * bytes, l.size * inner * bytes, outer,
             kernel);
  });
}

void spmd_rt_slice_scatter(SpmdBuffer *out, const SpmdBuffer *self,
                           const SpmdBuffer *src, int64_t dim, int64_t start,
                           int64_t step) {
  const char *kernel = "spmd_rt_slice_scatter";
  const DimLayout l =
      checkSliceScatter(kernel, out, self, src, dim, start, step);
  const int64_t outer = l.outer, size = l.size, inner = l.inner;
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    const int64_t bytes = sizeof(T);
    if (o != in)
      copyRows(o, out->numel * bytes, in, out->numel * bytes,
               out->numel * bytes, 1, kernel);
    std::unique_ptr<Scratch> storage;
    const T *from = dataAs<T>(src, storage, kernel);
    if (step == 1) {
      copyRows(o + start * inner, self->shape[dim] * inner * bytes, from,
               size * inner * bytes, size * inner * bytes, outer, kernel);
      return;
    }
    moveRows(kernel, o, from, outer * size, inner,
             ScatterRows{size, self->shape[dim], inner, start, step});
  });
}

void spmd_rt_constant_pad_nd(SpmdBuffer *out, const SpmdBuffer *self, int32_t n,
                             const int64_t *pad, double value) {
  const char *kernel = "spmd_rt_constant_pad_nd";
  checkConstantPad(kernel, out, self, n, pad);
  const int32_t rank = self->rank;
  // before[d]: how far out's dim d starts before self's (negative: crops).
  Dims before = {}, outShape = {}, selfShape = {};
  for (int32_t k = 0; 2 * k < n; ++k)
    before.v[rank - 1 - k] = pad[2 * k];
  std::copy(out->shape, out->shape + rank, outShape.v);
  std::copy(self->shape, self->shape + rank, selfShape.v);
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    const int64_t count = out->numel;
    if (count == 0)
      return;
    padKernel<T><<<gridFor(count), kBlock, 0, computeStream()>>>(
        dataOf<T>(out), in, count, rank, outShape, selfShape, before,
        convertValue<T>(value));
    checkLaunch(kernel);
  });
}

void spmd_rt_cumsum(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim) {
  const char *kernel = "spmd_rt_cumsum";
  const DimLayout l = checkCumsum(kernel, out, self, dim);
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    const int64_t columns = l.outer * l.inner;
    if (columns == 0 || l.size == 0)
      return;
    cumsumKernel<T><<<gridFor(columns), kBlock, 0, computeStream()>>>(
        dataOf<T>(out), in, l.outer, l.size, l.inner);
    checkLaunch(kernel);
  });
}

void spmd_rt_gather(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim,
                    const SpmdBuffer *index) {
  const char *kernel = "spmd_rt_gather";
  checkGather(kernel, out, self, dim, index);
  std::unique_ptr<Scratch> indexStorage;
  const int64_t *ix = dataAs<int64_t>(index, indexStorage, kernel);
  Dims outShape = {}, selfShape = {};
  std::copy(out->shape, out->shape + out->rank, outShape.v);
  std::copy(self->shape, self->shape + self->rank, selfShape.v);
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    const int64_t count = out->numel;
    if (count == 0)
      return;
    gatherKernel<T><<<gridFor(count), kBlock, 0, computeStream()>>>(
        dataOf<T>(out), in, ix, count, self->rank, static_cast<int32_t>(dim),
        outShape, selfShape, IndexErrors{deviceErrorSlot(), kernelId(kernel)});
    checkLaunch(kernel);
  });
}

void spmd_rt_scatter(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim,
                     const SpmdBuffer *index, const SpmdBuffer *src,
                     int64_t add) {
  const char *kernel = add ? "spmd_rt_scatter_add" : "spmd_rt_scatter";
  checkScatter(kernel, out, self, dim, index, src);
  check(cudaMemcpyAsync(out->data, self->data,
                        static_cast<size_t>(out->numel) *
                            spmd_rt_dtype_size(out->dtype),
                        cudaMemcpyDeviceToDevice, computeStream()),
        kernel);
  const int64_t n = index->numel;
  if (n == 0)
    return;
  std::unique_ptr<Scratch> indexStorage;
  const int64_t *ix = dataAs<int64_t>(index, indexStorage, kernel);
  ScatterMap map = {};
  map.rank = index->rank;
  map.dim = static_cast<int32_t>(dim);
  map.errors = IndexErrors{deviceErrorSlot(), kernelId(kernel)};
  std::copy(index->shape, index->shape + index->rank, map.shape.v);
  std::copy(self->shape, self->shape + self->rank, map.outShape.v);
  contiguousStrides(self->rank, self->shape, map.outStrides.v);
  contiguousStrides(src->rank, src->shape, map.srcStrides.v);
  dispatchDevice<kAll | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    if (add) {
      const int64_t lines = n / index->shape[dim];
      scatterAddKernel<T><<<gridFor(lines), kBlock, 0, computeStream()>>>(
          dataOf<T>(out), dataOf<T>(src), ix, lines, map);
    } else {
      Scratch winner(out->numel * int64_t(sizeof(unsigned long long)), kernel);
      check(cudaMemsetAsync(winner.data(), 0,
                            out->numel * sizeof(unsigned long long),
                            computeStream()),
            kernel);
      scatterClaimKernel<<<gridFor(n), kBlock, 0, computeStream()>>>(
          winner.as<unsigned long long>(), ix, n, map);
      scatterWriteKernel<T><<<gridFor(n), kBlock, 0, computeStream()>>>(
          dataOf<T>(out), dataOf<T>(src), ix, winner.as<unsigned long long>(),
          n, map);
    }
    checkLaunch(kernel);
  });
}

void spmd_rt_index(SpmdBuffer *out, const SpmdBuffer *self, int32_t n,
                   const SpmdBuffer *const *indices) {
  const char *kernel = "spmd_rt_index";
  checkIndex(kernel, out, self, n, indices);
  IndexTables t = {};
  t.n = n;
  t.batch = out->rank - (self->rank - n);
  int64_t rows = 1, inner = 1;
  for (int32_t d = 0; d < t.batch; ++d) {
    t.batchShape.v[d] = out->shape[d];
    rows *= out->shape[d];
  }
  for (int32_t d = n; d < self->rank; ++d)
    inner *= self->shape[d];
  int64_t selfStrides[SPMD_MAX_RANK];
  contiguousStrides(self->rank, self->shape, selfStrides);
  std::vector<std::unique_ptr<Scratch>> storage(n);
  for (int32_t k = 0; k < n; ++k) {
    const SpmdBuffer *b = indices[k];
    t.ix[k] = dataAs<int64_t>(b, storage[k], kernel);
    t.sizes[k] = self->shape[k];
    t.selfStrides[k] = selfStrides[k];
    int64_t own[SPMD_MAX_RANK];
    contiguousStrides(b->rank, b->shape, own);
    for (int32_t d = 0; d < b->rank; ++d)
      if (b->shape[d] != 1)
        t.strides[k][t.batch - b->rank + d] = own[d];
  }
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    moveRows(
        kernel, dataOf<T>(out), in, rows, inner,
        IndexRows{t, IndexErrors{deviceErrorSlot(), kernelId(kernel)}, inner});
  });
}

void spmd_rt_local_take(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim,
                        const int64_t *indices, double fill) {
  const char *kernel = "spmd_rt_local_take";
  localTake(kernel, out, self, dim, fill, [&] {
    // Only this rank's row goes to the device (cached: a program constant).
    const int64_t size = out->shape[dim];
    return TableSource{
        deviceTable(spmd_rt_rank_row(indices, size), size, kernel)};
  });
}

void spmd_rt_local_take_runs(SpmdBuffer *out, const SpmdBuffer *self,
                             int64_t dim, int64_t runs, int64_t rank_stride,
                             const int64_t *starts, const int64_t *counts,
                             double fill) {
  const char *kernel = "spmd_rt_local_take_runs";
  localTake(kernel, out, self, dim, fill, [&] {
    const int64_t size = out->shape[dim];
    return TableSource{
        deviceTable(spmd_rt_runs_row(starts, counts, runs, rank_stride, size),
                    size, kernel)};
  });
}

/// Keeps (.., i, j) with j - i >= diagonal, zeroes the rest (ATen's triu).
void spmd_rt_triu(SpmdBuffer *out, const SpmdBuffer *self, int64_t diagonal) {
  const char *kernel = "spmd_rt_triu";
  const MatrixStack stack = checkTriu(kernel, out, self);
  const int64_t matrices = stack.matrices, rows = stack.rows, cols = stack.cols;
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    if (out->numel == 0)
      return;
    const int64_t n = matrices * rows;
    const RowLaunch l = rowLaunch(n, cols);
    triuKernel<T><<<l.grid, l.block, 0, computeStream()>>>(
        dataOf<T>(out), in, n, rows, cols, diagonal);
    checkLaunch(kernel);
  });
}

void spmd_rt_fill(SpmdBuffer *out, double value) {
  const char *kernel = "spmd_rt_fill";
  dispatchDevice<kAll | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = out->numel;
    fillKernel<T><<<gridFor(n), kBlock, 0, computeStream()>>>(
        dataOf<T>(out), n, convertValue<T>(value));
    checkLaunch(kernel);
  });
}

void spmd_rt_arange(SpmdBuffer *out, double start, double step) {
  const char *kernel = "spmd_rt_arange";
  dispatchDevice<kNumeric | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const int64_t n = out->numel;
    arangeKernel<T><<<gridFor(n), kBlock, 0, computeStream()>>>(dataOf<T>(out),
                                                                n, start, step);
    checkLaunch(kernel);
  });
}

} // namespace spmd::rt::cuda
