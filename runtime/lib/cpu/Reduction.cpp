//===- Reduction.cpp - reductions over dims -------------------------------===//

#include "../Reduce.h"
#include "Kernels.h"

using namespace spmd::rt;

namespace {

/// Accumulator type of a reduction: double for floats (rows add up float
/// partial sums of blocks in it: ATen's float cascade sum to rounding), int64
/// for integers.
template <typename T>
using ReduceAcc =
    std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

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
namespace {

/// The SPMD_RT_REDUCTION kernels: out is self folded by `Reducer` over the
/// listed dims (checkReduction), walking self in order with the accumulator
/// staying put along reduced dims. Sums take the vectorised cascade.
template <unsigned Set, template <typename, typename> class Reducer>
void reduce(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
            int32_t n, const int64_t *dims) {
  const ReducedDims reduced = checkReduction(kernel, out, self, n, dims);
  if (reduced.copy)
    return cpu::spmd_rt_copy(out, self);
  const int32_t rank = self->rank;
  const bool *reduce = reduced.reduce;
  dispatch<Set>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    using Acc = ReduceAcc<T>;
    using R = Reducer<T, Acc>;
    const R op;
    std::vector<T> storage;
    const T *in = dataAs<T>(self, storage, kernel);
    std::vector<Acc> acc(static_cast<size_t>(out->numel), R::identity());
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
      if constexpr (R::kIsSum) {
        if (step[0] == 0)
          *dst += rowSum<Acc>(src, count, step[1]);
        else if (step[0] == 1 && step[1] == 1)
          addRow(dst, src, count);
        else
          for (int64_t i = 0; i < count; ++i)
            dst[i * step[0]] += src[i * step[1]];
      } else {
        for (int64_t i = 0; i < count; ++i)
          dst[i * step[0]] =
              op(dst[i * step[0]], static_cast<Acc>(src[i * step[1]]));
      }
    });
    T *o = dataOf<T>(out);
    for (int64_t i = 0, e = out->numel; i < e; ++i)
      o[i] = static_cast<T>(R::finish(a[i], reduced.count));
  });
}

} // namespace

#define SPMD_RT_KERNEL(name, params, args)
#define SPMD_RT_REDUCTION SPMD_RT_DEFINE_REDUCTION
#include "spmd/Runtime/KernelList.def"

} // namespace spmd::rt::cpu
