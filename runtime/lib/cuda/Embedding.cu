//===- Embedding.cu - embedding and embedding_dense_backward on the GPU ---===//
//
// cpu/Embedding.cpp on the device. Each index owns one row of D elements,
// walked by the threads of a block row (consecutive threads on consecutive
// columns, so loads and stores coalesce). An index outside [0, vocab) is
// recorded in the device error slot and its row skipped; the host reports
// it at the next synchronisation.
//
// bf16 (CUDA only): the forward copies rows as payload; the backward sums in
// float (ATen's opmath_type, as its embedding backward accumulates in
// acc_type) and rounds the sums to bf16 once.
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// Checks that `rows` [indices..., D] matches `indices` and returns D.
int64_t checkRows(const char *kernel, const char *name, const SpmdBuffer *rows,
                  const SpmdBuffer *indices, int64_t d) {
  bool ok = rows->rank == indices->rank + 1 && rows->shape[indices->rank] == d;
  for (int32_t k = 0; k < indices->rank && ok; ++k)
    ok = rows->shape[k] == indices->shape[k];
  if (!ok)
    spmd_rt_fatal("%s: %s %s is not indices %s + [%lld]", kernel, name,
                  shapeStr(rows).c_str(), shapeStr(indices).c_str(),
                  static_cast<long long>(d));
  return d;
}

/// The rows of the table this rank holds: global rows [begin, begin +
/// count) of a table of `vocab` rows (the whole table when unsharded).
struct Rows {
  int64_t begin, count, vocab;
};

/// Whether `p` may be read as 16-byte vectors.
bool aligned16(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// out row i = weight row indices[i] - rows.begin, or zeros when that row is
/// held elsewhere. Rows are copied as `units` items of U: a 16-byte vector
/// when the rows allow it, else the element type.
template <typename I, typename U>
__global__ void embeddingKernel(U *out, const U *weight, const I *indices,
                                int64_t n, int64_t units, Rows rows,
                                DeviceError *error, int kernel) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.y) + threadIdx.y; i < n;
       i += int64_t(gridDim.x) * blockDim.y) {
    const int64_t row = indices[i];
    if (row < 0 || row >= rows.vocab) {
      if (threadIdx.x == 0)
        raiseError(error, DeviceErrorKind::EmbeddingIndex, kernel, row,
                   rows.vocab, i);
      continue;
    }
    const int64_t local = row - rows.begin;
    U *dst = out + i * units;
    if (local < 0 || local >= rows.count) {
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
               const SpmdBuffer *indices, Rows rows) {
  checkRank(kernel, "weight", weight, 2);
  if (rows.count > weight->shape[0])
    spmd_rt_fatal("%s: %lld rows held in a weight of %lld rows", kernel,
                  static_cast<long long>(rows.count),
                  static_cast<long long>(weight->shape[0]));
  const int64_t d = checkRows(kernel, "out", out, indices, weight->shape[1]);
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
                dataOf<I>(indices), n, units, rows, deviceErrorSlot(),
                kernelId(kernel));
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
__global__ void countKernel(unsigned long long *counts, const I *indices,
                            int64_t n, Rows rows, DeviceError *error,
                            int kernel) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = indices[i];
    if (row < 0 || row >= rows.vocab) {
      raiseError(error, DeviceErrorKind::EmbeddingIndex, kernel, row,
                 rows.vocab, i);
      continue;
    }
    const int64_t local = row - rows.begin;
    if (local >= 0 && local < rows.count)
      atomicAdd(&counts[local], 1ull);
  }
}

/// sums row (indices[i] - rows.begin) += grad row i, in M = OpMathT<T>,
/// scaled by 1 / count when `counts` is given; padding_idx and rows held
/// elsewhere get nothing. Rows named by several indices are summed with
/// atomics, in no fixed order.
template <typename T, typename I>
__global__ void embeddingBackwardKernel(OpMathT<T> *sums, const T *grad,
                                        const I *indices, int64_t n, int64_t d,
                                        Rows rows, int64_t paddingIdx,
                                        const unsigned long long *counts,
                                        DeviceError *error, int kernel) {
  using M = OpMathT<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.y) + threadIdx.y; i < n;
       i += int64_t(gridDim.x) * blockDim.y) {
    const int64_t row = indices[i];
    if (row < 0 || row >= rows.vocab) {
      if (threadIdx.x == 0)
        raiseError(error, DeviceErrorKind::EmbeddingIndex, kernel, row,
                   rows.vocab, i);
      continue;
    }
    const int64_t local = row - rows.begin;
    if (row == paddingIdx || local < 0 || local >= rows.count)
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
                       Rows rows) {
  checkRank(kernel, "out", out, 2);
  if (rows.count > out->shape[0])
    spmd_rt_fatal("%s: %lld rows held in an out of %lld rows", kernel,
                  static_cast<long long>(rows.count),
                  static_cast<long long>(out->shape[0]));
  const int64_t d =
      checkRows(kernel, "grad_output", grad_output, indices, out->shape[1]);
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
              counts->as<unsigned long long>(), dataOf<I>(indices), n, rows,
              deviceErrorSlot(), kernelId(kernel));
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
                  sums, g, dataOf<I>(indices), n, d, rows, padding_idx,
                  counts ? counts->as<unsigned long long>() : nullptr,
                  deviceErrorSlot(), kernelId(kernel));
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

void spmd_rt_embedding(SpmdBuffer *out, const SpmdBuffer *weight,
                       const SpmdBuffer *indices, int64_t padding_idx) {
  (void)padding_idx; // Only the backward skips padding rows.
  embedding("spmd_rt_embedding", out, weight, indices,
            {0, weight->shape[0], weight->rank == 2 ? weight->shape[0] : 0});
}

void spmd_rt_embedding_rows(SpmdBuffer *out, const SpmdBuffer *weight,
                            const SpmdBuffer *indices, const int64_t *rows) {
  embedding("spmd_rt_embedding_rows", out, weight, indices,
            {rows[0], rows[1], rows[2]});
}

void spmd_rt_embedding_dense_backward(SpmdBuffer *out,
                                      const SpmdBuffer *grad_output,
                                      const SpmdBuffer *indices,
                                      int64_t padding_idx,
                                      int64_t scale_grad_by_freq) {
  int64_t numWeights = out->rank == 2 ? out->shape[0] : 0;
  embeddingBackward("spmd_rt_embedding_dense_backward", out, grad_output,
                    indices, padding_idx, scale_grad_by_freq,
                    {0, numWeights, numWeights});
}

void spmd_rt_embedding_dense_backward_rows(
    SpmdBuffer *out, const SpmdBuffer *grad_output, const SpmdBuffer *indices,
    int64_t padding_idx, int64_t scale_grad_by_freq, const int64_t *rows) {
  embeddingBackward("spmd_rt_embedding_dense_backward_rows", out, grad_output,
                    indices, padding_idx, scale_grad_by_freq,
                    {rows[0], rows[1], rows[2]});
}

} // namespace spmd::rt::cuda
