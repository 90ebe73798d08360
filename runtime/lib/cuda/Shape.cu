//===- Shape.cu - cat, slice, local_take, triu, factories on the GPU ------===//
//
// cpu/Shape.cpp's cat, slice, local_take, triu, fill and arange on the
// device (copy, expand and permute live in another file). cat and slice are
// 2-D copies (cudaMemcpy2DAsync): rows are the dims before `dim`, a row is
// the bytes of `dim` and the dims after it. Like the CPU kernels they
// support every dtype but f16, and bf16 too (values are moved as
// 2-byte payloads, and fill values and arange's indices are rounded to it
// via float, as c10::BFloat16 does); an input of another dtype than out is
// converted to out's dtype first.
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

/// Out row r = (i, k) of `inner` elements (i over the dims before `dim`, k
/// along it) is self row (i, source(k)), or `fill` when that is outside
/// [0, selfSize).
template <typename T, typename Source>
__global__ void localTakeKernel(T *out, const T *in, int64_t outer,
                                int64_t size, int64_t selfSize, int64_t inner,
                                Source source, T fill) {
  const int64_t n = outer * size;
  for (int64_t r = blockIdx.x * int64_t(blockDim.y) + threadIdx.y; r < n;
       r += int64_t(gridDim.x) * blockDim.y) {
    const int64_t i = r / size, k = r - i * size;
    const int64_t from = source(k);
    T *dst = out + r * inner;
    if (from < 0 || from >= selfSize) {
      for (int64_t j = threadIdx.x; j < inner; j += blockDim.x)
        dst[j] = fill;
      continue;
    }
    const T *src = in + (i * selfSize + from) * inner;
    for (int64_t j = threadIdx.x; j < inner; j += blockDim.x)
      dst[j] = src[j];
  }
}

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
    const RowLaunch l = rowLaunch(outer * size, inner);
    // The CPU's static_cast<T>(fill); bf16 rounds the float value.
    const T value = convertValue<T>(static_cast<OpMathT<T>>(fill));
    localTakeKernel<<<l.grid, l.block, 0, computeStream()>>>(
        dataOf<T>(out), in, outer, size, self->shape[dim], inner, makeSource(),
        value);
    checkLaunch(kernel);
  });
}

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
                             int64_t dim, int64_t runs, const int64_t *starts,
                             const int64_t *counts, double fill) {
  const char *kernel = "spmd_rt_local_take_runs";
  localTake(kernel, out, self, dim, fill, [&] {
    const int64_t size = out->shape[dim];
    return TableSource{deviceTable(spmd_rt_runs_row(starts, counts, runs, size),
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
