//===- Embedding.cpp - embedding and embedding_dense_backward -------------===//

#include "Kernels.h"

#include <algorithm>
#include <cstring>

using namespace spmd::rt;

namespace {

/// Calls `fn(i, row)` for each index i of `indices` (i64 or i32) with its
/// value, fatal unless it lies in [0, numRows).
template <typename Fn>
void forEachIndex(const char *kernel, const SpmdBuffer *indices,
                  int64_t numRows, Fn &&fn) {
  dispatch<kInt>(
      indices->dtype, kernel,
      [&](auto tag) {
        using I = decltype(tag);
        const I *idx = dataOf<I>(indices);
        for (int64_t i = 0, e = indices->numel; i < e; ++i) {
          int64_t row = idx[i];
          if (row < 0 || row >= numRows)
            spmd_rt_fatal("%s: index %lld at position %lld is out of range "
                          "[0, %lld)",
                          kernel, static_cast<long long>(row),
                          static_cast<long long>(i),
                          static_cast<long long>(numRows));
          fn(i, row);
        }
      },
      "indices");
}

void embedding(const char *kernel, SpmdBuffer *out, const SpmdBuffer *weight,
               const SpmdBuffer *indices, EmbeddingRows rows) {
  const int64_t d = checkEmbedding(kernel, out, weight, indices, rows);
  dispatch<kFloat>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> storage;
    const T *w = dataAs<T>(weight, storage, kernel);
    T *o = dataOf<T>(out);
    forEachIndex(kernel, indices, rows.vocab, [&](int64_t i, int64_t row) {
      // A row held elsewhere contributes zero here (a masked Partial).
      int64_t local = row - rows.begin;
      if (local < 0 || local >= rows.count)
        std::fill(o + i * d, o + (i + 1) * d, T(0));
      else
        std::memcpy(o + i * d, w + local * d,
                    static_cast<size_t>(d) * sizeof(T));
    });
  });
}

/// ATen's embedding_dense_backward_cpu: scatter-adds grad_output rows into
/// out, skipping padding_idx; scale_grad_by_freq divides each row's
/// contributions by the number of times its index occurs. Only the held
/// rows are written (out row r is global row rows.begin + r).
void embeddingBackward(const char *kernel, SpmdBuffer *out,
                       const SpmdBuffer *grad_output, const SpmdBuffer *indices,
                       int64_t padding_idx, int64_t scale_grad_by_freq,
                       EmbeddingRows rows) {
  const int64_t d =
      checkEmbeddingBackward(kernel, out, grad_output, indices, rows);
  std::vector<int64_t> counts;
  if (scale_grad_by_freq) {
    counts.assign(static_cast<size_t>(rows.vocab), 0);
    forEachIndex(kernel, indices, rows.vocab,
                 [&](int64_t, int64_t row) { ++counts[row]; });
  }
  dispatch<kFloat>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> storage;
    const T *g = dataAs<T>(grad_output, storage, kernel);
    T *o = dataOf<T>(out);
    std::fill(o, o + out->numel, T(0));
    forEachIndex(kernel, indices, rows.vocab, [&](int64_t i, int64_t row) {
      int64_t local = row - rows.begin;
      if (row == padding_idx || local < 0 || local >= rows.count)
        return;
      T *dst = o + local * d;
      const T *src = g + i * d;
      if (!scale_grad_by_freq) {
        for (int64_t j = 0; j < d; ++j)
          dst[j] += src[j];
        return;
      }
      // ATen: grad_weight[row].add_(grad[i], 1.0 / count).
      const T scale = static_cast<T>(1.0 / static_cast<double>(counts[row]));
      for (int64_t j = 0; j < d; ++j)
        dst[j] += scale * src[j];
    });
  });
}

} // namespace

namespace spmd::rt::cpu {

SPMD_RT_EMBEDDING_KERNELS(embedding, embeddingBackward)

} // namespace spmd::rt::cpu
