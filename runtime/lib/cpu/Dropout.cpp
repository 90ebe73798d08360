//===- Dropout.cpp - dropout and the other random kernels -----------------===//
//
// Draws come from spmd_rt_uniform(op_id, global row-major index) (Random.cpp),
// so an element gets the same number whatever the mesh and whichever rank
// holds it: a local buffer knows where it lies in the global tensor through
// global_shape and global_offset.
//
//===----------------------------------------------------------------------===//

#include "../Math.h"
#include "Kernels.h"

#include <algorithm>

using namespace spmd::rt;

namespace {

/// Calls `fn(i, u)` for each element i of the local buffer `local` with
/// the uniform draw u of its global element.
template <typename Fn>
void forEachDraw(const char *kernel, const SpmdBuffer *local, int64_t opId,
                 const int64_t *globalShape, const int64_t *globalOffset,
                 Fn &&fn) {
  StridedSpace<2> s;
  s.rank = local->rank;
  contiguousStrides(local->rank, local->shape, s.strides[0]);
  const int64_t base =
      checkGlobalOffset(kernel, local, globalShape, globalOffset, s.strides[1]);
  for (int32_t d = 0; d < local->rank; ++d)
    s.shape[d] = local->shape[d];
  s.coalesce();
  const auto id = static_cast<uint64_t>(opId);
  forEachRow(s, [&](const int64_t *off, int64_t n, const int64_t *step) {
    const int64_t global = base + off[1];
    for (int64_t j = 0; j < n; ++j)
      fn(off[0] + j * step[0],
         spmd_rt_uniform(id, static_cast<uint64_t>(global + j * step[1])));
  });
}

/// out[i] = numberOf(u) of element i's draw u, converted to out's dtype
/// (within `Set`).
template <unsigned Set, typename Draw>
void fillDraws(const char *kernel, SpmdBuffer *out, int64_t opId,
               const int64_t *globalShape, const int64_t *globalOffset,
               Draw numberOf) {
  dispatch<Set>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    T *o = dataOf<T>(out);
    forEachDraw(
        kernel, out, opId, globalShape, globalOffset,
        [&](int64_t i, float u) { o[i] = convertElem<T>(numberOf(u)); });
  });
}

} // namespace

namespace spmd::rt::cpu {

/// out[i] = 1 with probability p: u < p.
void spmd_rt_bernoulli_p(SpmdBuffer *out, double p, int64_t op_id,
                         const int64_t *global_shape,
                         const int64_t *global_offset) {
  fillDraws<kAll>("spmd_rt_bernoulli_p", out, op_id, global_shape,
                  global_offset, BernoulliDraw{p});
}

/// out[i] = from + (to - from) * u.
void spmd_rt_uniform_range(SpmdBuffer *out, double from, double to,
                           int64_t op_id, const int64_t *global_shape,
                           const int64_t *global_offset) {
  fillDraws<kFloat>("spmd_rt_uniform_range", out, op_id, global_shape,
                    global_offset, UniformDraw{from, to});
}

/// out[i] = -log1p(-u) / lambd.
void spmd_rt_exponential(SpmdBuffer *out, double lambd, int64_t op_id,
                         const int64_t *global_shape,
                         const int64_t *global_offset) {
  fillDraws<kFloat>("spmd_rt_exponential", out, op_id, global_shape,
                    global_offset, ExponentialDraw{lambd});
}

/// ATen's native_dropout_cpu: with train, keep = bernoulli(1 - p),
/// output = input * keep * scale with scale = 1 / (1 - p) (0 when p == 1);
/// without, output = input and the mask is all ones.
void spmd_rt_native_dropout(SpmdBuffer *output, SpmdBuffer *mask,
                            const SpmdBuffer *input, double p, int64_t train,
                            int64_t op_id, const int64_t *global_shape,
                            const int64_t *global_offset) {
  const char *kernel = "spmd_rt_native_dropout";
  checkNativeDropout(kernel, output, mask, input);
  Bool8 *m = dataOf<Bool8>(mask);
  if (!train) {
    cpu::spmd_rt_copy(output, input);
    std::fill(m, m + mask->numel, Bool8(1));
    return;
  }
  const double keepProbability = 1.0 - p;
  const double scale = dropoutScale(keepProbability);
  dispatch<kFloat>(output->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> storage;
    const T *x = dataAs<T>(input, storage, kernel);
    T *o = dataOf<T>(output);
    const T s = static_cast<T>(scale);
    forEachDraw(kernel, output, op_id, global_shape, global_offset,
                [&](int64_t i, float u) {
                  const bool keep = u < keepProbability;
                  m[i] = keep;
                  o[i] = x[i] * T(keep) * s;
                });
  });
}

} // namespace spmd::rt::cpu
