//===- Embedding.cu - embedding and embedding_dense_backward on the GPU ---===//
//
// cpu/Embedding.cpp on the device. Each index owns one row of D elements,
// walked by the threads of a block row (consecutive threads on consecutive
// columns, so loads and stores coalesce). An index outside [0, vocab) is
// recorded in the device error slot and its row skipped; the host reports
// it at the next synchronisation.
//
// bf16: the forward copies rows as payload; the backward sums in
// float (ATen's opmath_type, as its embedding backward accumulates in
// acc_type) and rounds the sums to bf16 once.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// Whether `p` may be read as 16-byte vectors.
bool aligned16(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// What the kernels need to read index i: the indices, the rows this rank
/// holds, and where an index outside [0, vocab) is recorded.
template <typename I> struct Indices {
  const I *data;
  EmbeddingRows rows;
  DeviceError *error;
  int kernel;

  /// The global row of index i, or -1 when it lies outside [0, vocab); then
  /// the error is recorded if `report` (by one of the threads of index i).
  __device__ int64_t row(int64_t i, bool report) const {
    const int64_t row = data[i];
    if (row >= 0 && row < rows.vocab)
      return row;
    if (report)
      raiseError(error, DeviceErrorKind::EmbeddingIndex, kernel, row,
                 rows.vocab, i);
    return -1;
  }

  /// Global row `row` among the held rows, or -1 when held elsewhere.
  __device__ int64_t held(int64_t row) const {
    const int64_t local = row - rows.begin;
    return local >= 0 && local < rows.count ? local : -1;
  }
};

template <typename I>
Indices<I> indicesOf(const char *kernel, const SpmdBuffer *indices,
                     EmbeddingRows rows) {
  return {dataOf<I>(indices), rows, deviceErrorSlot(), kernelId(kernel)};
}

/// out row i = weight row indices[i] - rows.begin, or zeros when that row is
/// held elsewhere. Rows are copied as `units` items of U: a 16-byte vector
/// when the rows allow it, else the element type.
template <typename I, typename U>
__global__ void embeddingKernel(U *out, const U *weight, Indices<I> indices,
                                int64_t n, int64_t units) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.y) + threadIdx.y; i < n;
       i += int64_t(gridDim.x) * blockDim.y) {
    const int64_t row = indices.row(i, threadIdx.x == 0);
    if (row < 0)
      continue;
    const int64_t local = indices.held(row);
    U *dst = out + i * units;
    if (local < 0) {
      // A row held elsewhere contributes zero here (a masked Partial).
      for (int64_t j = threadIdx.x; j < units; j += blockDim.x)
        dst[j] = U{};
      continue;
    }
    const U *src = weight + local * units;
    for (int64_t j = threadIdx.x; j < units; j += blockDim.x)
      dst[j] = src[j];
  }
}

void embedding(const char *kernel, SpmdBuffer *out, const SpmdBuffer *weight,
               const SpmdBuffer *indices, EmbeddingRows rows) {
  const int64_t d = checkEmbedding(kernel, out, weight, indices, rows);
  dispatchDevice<kFloat | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::unique_ptr<Scratch> storage;
    const T *w = dataAs<T>(weight, storage, kernel);
    T *o = dataOf<T>(out);
    dispatch<kInt>(
        indices->dtype, kernel,
        [&](auto indexTag) {
          using I = decltype(indexTag);
          const int64_t n = indices->numel;
          auto launch = [&](auto unit, int64_t units) {
            using U = decltype(unit);
            const RowLaunch l = rowLaunch(n, units);
            embeddingKernel<I, U><<<l.grid, l.block, 0, computeStream()>>>(
                reinterpret_cast<U *>(o), reinterpret_cast<const U *>(w),
                indicesOf<I>(kernel, indices, rows), n, units);
            checkLaunch(kernel);
          };
          const int64_t rowBytes = d * int64_t(sizeof(T));
          if (rowBytes % 16 == 0 && aligned16(o) && aligned16(w))
            launch(uint4{}, rowBytes / 16);
          else
            launch(T{}, d);
        },
        "indices");
  });
}

/// Counts, for each held row, the indices naming it (scale_grad_by_freq).
template <typename I>
__global__ void countKernel(unsigned long long *counts, Indices<I> indices,
                            int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = indices.row(i, true);
    if (row < 0)
      continue;
    const int64_t local = indices.held(row);
    if (local >= 0)
      atomicAdd(&counts[local], 1ull);
  }
}

/// sums row (indices[i] - rows.begin) += grad row i, in M = OpMathT<T>,
/// scaled by 1 / count when `counts` is given; padding_idx and rows held
/// elsewhere get nothing. Rows named by several indices are summed with
/// atomics, in no fixed order.
template <typename T, typename I>
__global__ void embeddingBackwardKernel(OpMathT<T> *sums, const T *grad,
                                        Indices<I> indices, int64_t n,
                                        int64_t d, int64_t paddingIdx,
                                        const unsigned long long *counts) {
  using M = OpMathT<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.y) + threadIdx.y; i < n;
       i += int64_t(gridDim.x) * blockDim.y) {
    const int64_t row = indices.row(i, threadIdx.x == 0);
    if (row < 0)
      continue;
    const int64_t local = indices.held(row);
    if (row == paddingIdx || local < 0)
      continue;
    M *dst = sums + local * d;
    const T *src = grad + i * d;
    if (!counts) {
      for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
        atomicAdd(dst + j, convertValue<M>(src[j]));
      continue;
    }
    // ATen: grad_weight[row].add_(grad[i], 1.0 / count).
    const M scale = static_cast<M>(1.0 / static_cast<double>(counts[local]));
    for (int64_t j = threadIdx.x; j < d; j += blockDim.x)
      atomicAdd(dst + j, scale * convertValue<M>(src[j]));
  }
}

/// ATen's embedding_dense_backward_cuda: scatter-adds grad_output rows into
/// out, skipping padding_idx; scale_grad_by_freq divides each row's
/// contributions by the number of times its index occurs. Only the held
/// rows are written (out row r is global row rows.begin + r).
void embeddingBackward(const char *kernel, SpmdBuffer *out,
                       const SpmdBuffer *grad_output, const SpmdBuffer *indices,
                       int64_t padding_idx, int64_t scale_grad_by_freq,
                       EmbeddingRows rows) {
  const int64_t d =
      checkEmbeddingBackward(kernel, out, grad_output, indices, rows);
  const int64_t n = indices->numel;
  // Only held rows use their count, so only those are counted.
  std::unique_ptr<Scratch> counts;
  if (scale_grad_by_freq)
    dispatch<kInt>(
        indices->dtype, kernel,
        [&](auto indexTag) {
          using I = decltype(indexTag);
          const int64_t bytes =
              rows.count * int64_t(sizeof(unsigned long long));
          counts = std::make_unique<Scratch>(bytes, kernel);
          check(cudaMemsetAsync(counts->data(), 0, static_cast<size_t>(bytes),
                                computeStream()),
                kernel);
          countKernel<I><<<gridFor(n), kBlock, 0, computeStream()>>>(
              counts->as<unsigned long long>(),
              indicesOf<I>(kernel, indices, rows), n);
          checkLaunch(kernel);
        },
        "indices");
  dispatchDevice<kFloat | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using M = OpMathT<T>;
    std::unique_ptr<Scratch> storage;
    const T *g = dataAs<T>(grad_output, storage, kernel);
    // The sums: out itself, or for bf16 a float buffer rounded into out at
    // the end (atomics on bf16 would round every partial sum).
    std::unique_ptr<Scratch> sumsStorage;
    M *sums;
    if constexpr (std::is_same_v<T, M>) {
      sums = dataOf<T>(out);
    } else {
      sumsStorage =
          std::make_unique<Scratch>(out->numel * int64_t(sizeof(M)), kernel);
      sums = sumsStorage->as<M>();
    }
    check(cudaMemsetAsync(sums, 0, static_cast<size_t>(out->numel) * sizeof(M),
                          computeStream()),
          kernel);
    dispatch<kInt>(
        indices->dtype, kernel,
        [&](auto indexTag) {
          using I = decltype(indexTag);
          const RowLaunch l = rowLaunch(n, d);
          embeddingBackwardKernel<T, I>
              <<<l.grid, l.block, 0, computeStream()>>>(
                  sums, g, indicesOf<I>(kernel, indices, rows), n, d,
                  padding_idx,
                  counts ? counts->as<unsigned long long>() : nullptr);
          checkLaunch(kernel);
        },
        "indices");
    if constexpr (!std::is_same_v<T, M>) {
      // The sums as a buffer of out's shape, for `convert` to round.
      SpmdBuffer sumsBuffer = *out;
      sumsBuffer.data = sums;
      sumsBuffer.dtype = DTypeOf<M>::value;
      convert(out->data, out->dtype, &sumsBuffer, kernel);
    }
  });
}

} // namespace

SPMD_RT_EMBEDDING_KERNELS(embedding, embeddingBackward)

} // namespace spmd::rt::cuda
