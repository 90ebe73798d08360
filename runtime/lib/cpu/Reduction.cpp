//===- Reduction.cpp - sum over dims --------------------------------------===//

#include "Kernels.h"

using namespace spmd::rt;

namespace {

/// Accumulator type of a sum: double for floats (rows add up float partial
/// sums of blocks in it: ATen's float cascade sum to rounding), int64 for
/// integers.
template <typename T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

/// Sum of n elements `p[i * stride]`.
template <typename Acc, typename T>
Acc rowSum(const T *p, int64_t n, int64_t stride) {
  // Integers sum as Acc (int64) throughout: an int32 partial sum could
  // overflow.
  using Partial = std::conditional_t<std::is_floating_point_v<T>, T, Acc>;
  if (stride == 1)
    return sumRow<Acc, Partial>(
        n, [p](auto lanes, int64_t i) { return lanes.load(p, i); });
  Acc a = 0;
  for (int64_t i = 0; i < n; ++i)
    a += p[i * stride];
  return a;
}

} // namespace

namespace spmd::rt::cpu {

/// ATen's sum / sum.dim_IntList: out is self with the listed dims reduced,
/// removed (rank - n) or kept as 1 (keepdim); n == 0 reduces everything
/// when out is 0-D, else it is an empty list of dims (a copy).
void spmd_rt_sum(SpmdBuffer *out, const SpmdBuffer *self, int32_t n,
                 const int64_t *dims) {
  const char *kernel = "spmd_rt_sum";
  const SumDims sum = checkSum(kernel, out, self, n, dims);
  if (sum.copy)
    return cpu::spmd_rt_copy(out, self);
  const int32_t rank = self->rank;
  const bool *reduce = sum.reduce;
  dispatch<kNumeric>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using Acc = SumAcc<T>;
    std::vector<T> storage;
    const T *in = dataAs<T>(self, storage, kernel);
    std::vector<Acc> acc(static_cast<size_t>(out->numel), Acc(0));
    // Walk self in order; the accumulator stays put along reduced dims.
    StridedSpace<2> s;
    s.rank = rank;
    int64_t stride = 1;
    for (int32_t d = rank - 1; d >= 0; --d) {
      s.shape[d] = self->shape[d];
      s.strides[0][d] = reduce[d] ? 0 : stride;
      if (!reduce[d])
        stride *= self->shape[d];
    }
    contiguousStrides(rank, self->shape, s.strides[1]);
    s.coalesce();
    Acc *a = acc.data();
    forEachRow(s, [&](const int64_t *off, int64_t count, const int64_t *step) {
      Acc *dst = a + off[0];
      const T *src = in + off[1];
      if (step[0] == 0) {
        *dst += rowSum<Acc>(src, count, step[1]);
      } else if (step[0] == 1 && step[1] == 1) {
        addRow(dst, src, count);
      } else {
        for (int64_t i = 0; i < count; ++i)
          dst[i * step[0]] += src[i * step[1]];
      }
    });
    T *o = dataOf<T>(out);
    for (int64_t i = 0, e = out->numel; i < e; ++i)
      o[i] = static_cast<T>(a[i]);
  });
}

} // namespace spmd::rt::cpu
