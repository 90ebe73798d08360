//===- Shape.cpp - copies, views, cat, slices, padding, indexing, scans ---===//
//
// Data movement kernels. They support every dtype but f16 (bf16 reaches them
// as f32, cpu/Backend.cpp); an input of another dtype than out is converted
// to out's dtype first.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include "../Math.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <type_traits>
#include <vector>

using namespace spmd::rt;

namespace {

/// Square tiles of the blocked transpose: 32 x 32 elements stay in L1.
constexpr int64_t kTile = 32;

/// out[.] = in[.] over `s` (operand 0 out, contiguous; operand 1 in). When
/// the innermost dim reads `in` with a stride but another dim reads it
/// contiguously (a transpose), copies in tiles so reads and writes both stay
/// in cache, like ATen's copy_same_type_transpose_.
template <typename T> void copyStrided(StridedSpace<2> s, T *out, const T *in) {
  s.coalesce();
  int32_t r = s.rank;
  int32_t contiguousDim = -1;
  if (r >= 2 && s.strides[1][r - 1] != 1)
    for (int32_t d = 0; d < r - 1; ++d)
      if (s.strides[1][d] == 1)
        contiguousDim = d;
  if (contiguousDim < 0) {
    mapStrided<T, 1>(s, out, {in}, [](T x) { return x; });
    return;
  }
  s.moveDim(contiguousDim, r - 2);
  const int64_t rows = s.shape[r - 2], cols = s.shape[r - 1];
  const int64_t outRow = s.strides[0][r - 2], outCol = s.strides[0][r - 1];
  const int64_t inRow = s.strides[1][r - 2], inCol = s.strides[1][r - 1];
  forEachOuter(s, 2, [&](const int64_t *off) {
    T *o = out + off[0];
    const T *x = in + off[1];
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
        int64_t c1 = std::min(cols, c0 + kTile);
        for (int64_t i = r0; i < r1; ++i)
          for (int64_t j = c0; j < c1; ++j)
            o[i * outRow + j * outCol] = x[i * inRow + j * inCol];
      }
    }
  });
}

/// Calls `fn(T{}, in)` with out's element type T and `self`'s data as T
/// (converted when its dtype differs).
template <typename Fn>
void withInputAs(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
                 Fn &&fn) {
  dispatch<kAll>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> storage;
    fn(tag, dataAs<T>(self, storage, kernel));
  });
}

/// Calls fn(i, k, at) for each position i of `index`, in row-major order:
/// `at` its coordinates, k its value wrapped into [0, size) (the size of
/// `dim`). An index outside [-size, size) ends the job with ATen's message.
template <typename Fn>
void forEachIndex(const char *kernel, const SpmdBuffer *index, int64_t dim,
                  int64_t size, Fn &&fn) {
  std::vector<int64_t> storage;
  const int64_t *ix = dataAs<int64_t>(index, storage, kernel);
  int64_t at[SPMD_MAX_RANK] = {};
  for (int64_t i = 0, e = index->numel; i < e; ++i) {
    int64_t k = ix[i];
    if (k < -size || k >= size)
      spmd_rt_fatal("%s: index %lld is out of bounds for dim %lld of size "
                    "%lld",
                    kernel, static_cast<long long>(k),
                    static_cast<long long>(dim), static_cast<long long>(size));
    fn(i, k < 0 ? k + size : k, at);
    for (int32_t d = index->rank - 1; d >= 0 && ++at[d] == index->shape[d]; --d)
      at[d] = 0;
  }
}

} // namespace

namespace spmd::rt::cpu {

void spmd_rt_copy(SpmdBuffer *out, const SpmdBuffer *self) {
  const char *kernel = "spmd_rt_copy";
  checkSameNumel(kernel, "out", out, "self", self);
  if (out->dtype == self->dtype) {
    std::memcpy(out->data, self->data,
                static_cast<size_t>(out->numel) *
                    spmd_rt_dtype_size(out->dtype));
    return;
  }
  dispatch<kAll>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    convertTo(dataOf<T>(out), self, kernel);
  });
}

void spmd_rt_expand(SpmdBuffer *out, const SpmdBuffer *self) {
  const char *kernel = "spmd_rt_expand";
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    mapBroadcast<T, 1>(kernel, out, {self}, {in}, [](T x) { return x; });
  });
}

void spmd_rt_permute(SpmdBuffer *out, const SpmdBuffer *self, int32_t n,
                     const int64_t *dims) {
  const char *kernel = "spmd_rt_permute";
  checkPermute(kernel, out, self, n, dims);
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    StridedSpace<2> s;
    s.rank = n;
    int64_t selfStrides[SPMD_MAX_RANK];
    contiguousStrides(n, self->shape, selfStrides);
    contiguousStrides(n, out->shape, s.strides[0]);
    for (int32_t k = 0; k < n; ++k) {
      s.shape[k] = out->shape[k];
      s.strides[1][k] = selfStrides[dims[k]];
    }
    copyStrided<T>(s, dataOf<T>(out), in);
  });
}

void spmd_rt_cat(SpmdBuffer *out, int32_t n, const SpmdBuffer *const *inputs,
                 int64_t dim) {
  const char *kernel = "spmd_rt_cat";
  const DimLayout l = checkCat(kernel, out, n, inputs, dim);
  const int64_t outer = l.outer, inner = l.inner;
  const int64_t outRow = out->shape[dim] * inner;
  dispatch<kAll>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    int64_t position = 0;
    std::vector<T> storage;
    for (int32_t k = 0; k < n; ++k) {
      const SpmdBuffer *input = inputs[k];
      if (catSkips(input))
        continue;
      const T *in = dataAs<T>(input, storage, kernel);
      const int64_t chunk = input->shape[dim] * inner;
      for (int64_t i = 0; i < outer; ++i)
        std::memcpy(o + i * outRow + position, in + i * chunk,
                    static_cast<size_t>(chunk) * sizeof(T));
      position += chunk;
    }
  });
}

void spmd_rt_slice(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim,
                   int64_t start, int64_t step) {
  const char *kernel = "spmd_rt_slice";
  const DimLayout l = checkSlice(kernel, out, self, dim, start, step);
  const int64_t outer = l.outer, size = l.size, inner = l.inner;
  const int64_t inRow = self->shape[dim] * inner;
  const int64_t outRow = size * inner;
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    for (int64_t i = 0; i < outer; ++i) {
      if (step == 1) {
        std::memcpy(o + i * outRow, in + i * inRow + start * inner,
                    static_cast<size_t>(outRow) * sizeof(T));
        continue;
      }
      for (int64_t k = 0; k < size; ++k)
        std::memcpy(o + i * outRow + k * inner,
                    in + i * inRow + (start + k * step) * inner,
                    static_cast<size_t>(inner) * sizeof(T));
    }
  });
}

void spmd_rt_slice_scatter(SpmdBuffer *out, const SpmdBuffer *self,
                           const SpmdBuffer *src, int64_t dim, int64_t start,
                           int64_t step) {
  const char *kernel = "spmd_rt_slice_scatter";
  const DimLayout l =
      checkSliceScatter(kernel, out, self, src, dim, start, step);
  const int64_t outer = l.outer, size = l.size, inner = l.inner;
  const int64_t outRow = self->shape[dim] * inner, srcRow = size * inner;
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    std::memcpy(o, in, static_cast<size_t>(out->numel) * sizeof(T));
    std::vector<T> storage;
    const T *from = dataAs<T>(src, storage, kernel);
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t k = 0; k < size; ++k)
        std::memcpy(o + i * outRow + (start + k * step) * inner,
                    from + i * srcRow + k * inner,
                    static_cast<size_t>(inner) * sizeof(T));
  });
}

void spmd_rt_constant_pad_nd(SpmdBuffer *out, const SpmdBuffer *self, int32_t n,
                             const int64_t *pad, double value) {
  const char *kernel = "spmd_rt_constant_pad_nd";
  checkConstantPad(kernel, out, self, n, pad);
  const int32_t rank = self->rank;
  // before[d]: how far out's dim d starts before self's (negative: crops).
  int64_t before[SPMD_MAX_RANK] = {};
  for (int32_t k = 0; 2 * k < n; ++k)
    before[rank - 1 - k] = pad[2 * k];
  int64_t selfStrides[SPMD_MAX_RANK];
  contiguousStrides(rank, self->shape, selfStrides);
  // The last dim's overlap [first, last) in self's coordinates, copied as
  // one run per row of out whose outer indices all land inside self.
  const int64_t inner = rank ? self->shape[rank - 1] : 1;
  const int64_t outInner = rank ? out->shape[rank - 1] : 1;
  const int64_t shift = rank ? before[rank - 1] : 0;
  const int64_t first = std::max<int64_t>(0, -shift);
  const int64_t last = std::min(inner, outInner - shift);
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    std::fill(o, o + out->numel, convertElem<T>(value));
    if (first >= last || out->numel == 0)
      return;
    int64_t index[SPMD_MAX_RANK] = {};
    for (int64_t row = 0, rows = out->numel / outInner; row < rows; ++row) {
      int64_t from = 0;
      bool inside = true;
      for (int32_t d = 0; d + 1 < rank && inside; ++d) {
        const int64_t at = index[d] - before[d];
        inside = at >= 0 && at < self->shape[d];
        from += at * selfStrides[d];
      }
      if (inside)
        for (int64_t j = first; j < last; ++j)
          o[row * outInner + j + shift] = in[from + j];
      for (int32_t d = rank - 2; d >= 0 && ++index[d] == out->shape[d]; --d)
        index[d] = 0;
    }
  });
}

void spmd_rt_cumsum(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim) {
  const char *kernel = "spmd_rt_cumsum";
  const DimLayout l = checkCumsum(kernel, out, self, dim);
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    for (int64_t i = 0; i < l.outer; ++i)
      for (int64_t j = 0; j < l.inner; ++j) {
        // ATen's CPU cumsum accumulates in the result's type (at::acc_type
        // of float is double on the CPU).
        using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
        Acc sum = 0;
        for (int64_t k = 0; k < l.size; ++k) {
          int64_t at = (i * l.size + k) * l.inner + j;
          sum += static_cast<Acc>(in[at]);
          o[at] = static_cast<T>(sum);
        }
      }
  });
}

void spmd_rt_gather(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim,
                    const SpmdBuffer *index) {
  const char *kernel = "spmd_rt_gather";
  checkGather(kernel, out, self, dim, index);
  const int32_t rank = self->rank;
  int64_t selfStrides[SPMD_MAX_RANK];
  contiguousStrides(rank, self->shape, selfStrides);
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    forEachIndex(kernel, index, dim, self->shape[dim],
                 [&](int64_t i, int64_t k, const int64_t *at) {
                   int64_t from = 0;
                   for (int32_t d = 0; d < rank; ++d)
                     from += (d == dim ? k : at[d]) * selfStrides[d];
                   o[i] = in[from];
                 });
  });
}

void spmd_rt_scatter(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim,
                     const SpmdBuffer *index, const SpmdBuffer *src,
                     int64_t add) {
  const char *kernel = add ? "spmd_rt_scatter_add" : "spmd_rt_scatter";
  checkScatter(kernel, out, self, dim, index, src);
  const int32_t rank = self->rank;
  int64_t outStrides[SPMD_MAX_RANK], srcStrides[SPMD_MAX_RANK];
  contiguousStrides(rank, self->shape, outStrides);
  contiguousStrides(rank, src->shape, srcStrides);
  cpu::spmd_rt_copy(out, self);
  dispatch<kAll>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    const T *in = dataOf<T>(src);
    // Row-major over index: a repeated position keeps the last write, as
    // ATen's CPU scatter.
    forEachIndex(kernel, index, dim, self->shape[dim],
                 [&](int64_t, int64_t k, const int64_t *at) {
                   int64_t to = 0, from = 0;
                   for (int32_t d = 0; d < rank; ++d) {
                     to += (d == dim ? k : at[d]) * outStrides[d];
                     from += at[d] * srcStrides[d];
                   }
                   if constexpr (std::is_same_v<T, Bool8>)
                     o[to] = add ? Bool8(o[to] || in[from]) : in[from];
                   else
                     o[to] = add ? static_cast<T>(o[to] + in[from]) : in[from];
                 });
  });
}

/// The first k of self's elements along `dim` in order, largest first
/// (largest) or smallest first, equal values by position, NaN above every
/// number: topk, and sort (k the whole dim).
static void selectAlong(const char *kernel, SpmdBuffer *values,
                        SpmdBuffer *indices, const SpmdBuffer *self, int64_t k,
                        int64_t dim, bool largest) {
  const DimLayout l = checkTopk(kernel, values, indices, self, k, dim);
  dispatch<kNumeric>(self->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *in = dataOf<T>(self);
    T *v = dataOf<T>(values);
    int64_t *ix = dataOf<int64_t>(indices);
    auto isNan = [](T x) {
      if constexpr (std::is_floating_point_v<T>)
        return x != x;
      return false;
    };
    std::vector<int64_t> order(static_cast<size_t>(l.size));
    for (int64_t outer = 0; outer < l.outer; ++outer)
      for (int64_t inner = 0; inner < l.inner; ++inner) {
        const T *row = in + outer * l.size * l.inner + inner;
        auto at = [&](int64_t j) { return row[j * l.inner]; };
        auto before = [&](int64_t a, int64_t b) {
          T x = at(a), y = at(b);
          bool nx = isNan(x), ny = isNan(y);
          if (nx != ny)
            return largest ? nx : ny;
          if (!nx && x != y)
            return largest ? x > y : x < y;
          return a < b;
        };
        for (int64_t j = 0; j < l.size; ++j)
          order[j] = j;
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          before);
        const int64_t base = outer * k * l.inner + inner;
        for (int64_t j = 0; j < k; ++j) {
          v[base + j * l.inner] = at(order[j]);
          ix[base + j * l.inner] = order[j];
        }
      }
  });
}

void spmd_rt_topk(SpmdBuffer *values, SpmdBuffer *indices,
                  const SpmdBuffer *self, int64_t k, int64_t dim,
                  int64_t largest) {
  selectAlong("spmd_rt_topk", values, indices, self, k, dim, largest != 0);
}

void spmd_rt_sort(SpmdBuffer *values, SpmdBuffer *indices,
                  const SpmdBuffer *self, int64_t dim, int64_t descending) {
  const char *kernel = "spmd_rt_sort";
  checkDim(kernel, self, dim);
  selectAlong(kernel, values, indices, self, self->shape[dim], dim,
              descending != 0);
}

void spmd_rt_index(SpmdBuffer *out, const SpmdBuffer *self, int32_t n,
                   const SpmdBuffer *const *indices) {
  const char *kernel = "spmd_rt_index";
  checkIndex(kernel, out, self, n, indices);
  const int32_t batch = out->rank - (self->rank - n);
  int64_t rows = 1, inner = 1;
  for (int32_t d = 0; d < batch; ++d)
    rows *= out->shape[d];
  for (int32_t d = n; d < self->rank; ++d)
    inner *= self->shape[d];
  // Each index's strides over out's leading `batch` dims (0 where it
  // broadcasts), and self's strides over the indexed dims, in rows.
  std::vector<std::vector<int64_t>> storage(n);
  std::vector<const int64_t *> ix(n);
  std::vector<std::array<int64_t, SPMD_MAX_RANK>> strides(n);
  int64_t selfStrides[SPMD_MAX_RANK];
  contiguousStrides(self->rank, self->shape, selfStrides);
  for (int32_t k = 0; k < n; ++k) {
    const SpmdBuffer *b = indices[k];
    ix[k] = dataAs<int64_t>(b, storage[k], kernel);
    int64_t own[SPMD_MAX_RANK];
    contiguousStrides(b->rank, b->shape, own);
    strides[k].fill(0);
    for (int32_t d = 0; d < b->rank; ++d)
      if (b->shape[d] != 1)
        strides[k][batch - b->rank + d] = own[d];
  }
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    int64_t at[SPMD_MAX_RANK] = {};
    for (int64_t r = 0; r < rows; ++r) {
      int64_t from = 0;
      for (int32_t k = 0; k < n; ++k) {
        int64_t offset = 0;
        for (int32_t d = 0; d < batch; ++d)
          offset += at[d] * strides[k][d];
        int64_t i = ix[k][offset], size = self->shape[k];
        if (i < -size || i >= size)
          spmd_rt_fatal("%s: index %lld is out of bounds for dim %d of size "
                        "%lld",
                        kernel, static_cast<long long>(i), k,
                        static_cast<long long>(size));
        from += (i < 0 ? i + size : i) * selfStrides[k];
      }
      std::memcpy(o + r * inner, in + from,
                  static_cast<size_t>(inner) * sizeof(T));
      for (int32_t d = batch - 1; d >= 0 && ++at[d] == out->shape[d]; --d)
        at[d] = 0;
    }
  });
}

} // namespace spmd::rt::cpu

namespace {
/// spmd.local_take along `dim`: out position k reads self position
/// row[k], or `fill` where it is negative; `rowOf(size)` gives this rank's
/// row of `size` positions once the shapes are checked.
template <typename RowFn>
void localTake(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
               int64_t dim, double fill, RowFn rowOf) {
  const DimLayout l = checkLocalTake(kernel, out, self, dim);
  const int64_t size = out->shape[dim], outer = l.outer, inner = l.inner;
  const int64_t *row = rowOf(size);
  const int64_t inRow = self->shape[dim] * inner;
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    const T value = static_cast<T>(fill);
    for (int64_t i = 0; i < outer; ++i)
      for (int64_t k = 0; k < size; ++k) {
        T *dst = o + (i * size + k) * inner;
        int64_t from = row[k];
        if (from < 0 || from >= self->shape[dim])
          std::fill(dst, dst + inner, value);
        else
          std::memcpy(dst, in + i * inRow + from * inner,
                      static_cast<size_t>(inner) * sizeof(T));
      }
  });
}
} // namespace

namespace spmd::rt::cpu {

void spmd_rt_local_take(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim,
                        const int64_t *indices, double fill) {
  localTake("spmd_rt_local_take", out, self, dim, fill,
            [&](int64_t size) { return spmd_rt_rank_row(indices, size); });
}

void spmd_rt_local_take_runs(SpmdBuffer *out, const SpmdBuffer *self,
                             int64_t dim, int64_t runs, int64_t rank_stride,
                             const int64_t *starts, const int64_t *counts,
                             double fill) {
  localTake("spmd_rt_local_take_runs", out, self, dim, fill, [&](int64_t size) {
    return spmd_rt_runs_row(starts, counts, runs, rank_stride, size);
  });
}

/// Keeps (.., i, j) with j - i >= diagonal, zeroes the rest (ATen's triu).
void spmd_rt_triu(SpmdBuffer *out, const SpmdBuffer *self, int64_t diagonal) {
  const char *kernel = "spmd_rt_triu";
  const MatrixStack stack = checkTriu(kernel, out, self);
  const int64_t matrices = stack.matrices, rows = stack.rows, cols = stack.cols;
  withInputAs(kernel, out, self, [&](auto tag, const auto *in) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    for (int64_t m = 0; m < matrices; ++m) {
      for (int64_t i = 0; i < rows; ++i) {
        int64_t row = (m * rows + i) * cols;
        // Columns [0, zeros) lie below the diagonal.
        int64_t zeros = std::clamp<int64_t>(i + diagonal, 0, cols);
        std::fill(o + row, o + row + zeros, T(0));
        std::memcpy(o + row + zeros, in + row + zeros,
                    static_cast<size_t>(cols - zeros) * sizeof(T));
      }
    }
  });
}

void spmd_rt_fill(SpmdBuffer *out, double value) {
  dispatch<kAll>(out->dtype, "spmd_rt_fill", [&](auto tag) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    std::fill(o, o + out->numel, convertElem<T>(value));
  });
}

void spmd_rt_arange(SpmdBuffer *out, double start, double step) {
  dispatch<kNumeric>(out->dtype, "spmd_rt_arange", [&](auto tag) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    for (int64_t i = 0, e = out->numel; i < e; ++i)
      o[i] = static_cast<T>(arangeValue(start, step, i));
  });
}

} // namespace spmd::rt::cpu
