//===- Softmax.cpp - softmax, log_softmax and their backwards -------------===//
//
// A tensor is viewed as [outer, size, inner] around `dim`. Each kernel is a
// few passes over one outer block: folds over `dim` (into one accumulator
// per inner lane) and maps that use them. With inner == 1 (the last dim) a
// pass runs along one contiguous row; otherwise it runs along the lanes,
// which are contiguous too, so both vectorise.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace spmd::rt;

namespace {

/// acc[l] = fold of `op` over d of the terms `term(lanes, d * inner + l)`
/// (see foldRow) for the lanes of one block; acc must hold op's identity.
template <typename Acc, typename Term, typename Op>
SPMD_RT_HOT void foldDim(const DimLayout &l, Acc *acc, const Term &term,
                         const Op &op) {
  if (l.inner == 1) {
    acc[0] = foldRow<Acc>(l.size, acc[0], term, op);
    return;
  }
  const simd::One<Acc> one;
  for (int64_t d = 0; d < l.size; ++d) {
    const int64_t base = d * l.inner;
    for (int64_t j = 0; j < l.inner; ++j)
      acc[j] = op(acc[j], term(one, base + j));
  }
}

/// out[d, l] = op(acc[l], p[d, l]...) for one block.
template <typename T, typename Acc, typename Op, typename... P>
SPMD_RT_HOT void mapDim(const DimLayout &l, T *out, const Acc *acc,
                        const Op &op, const P *...p) {
  if (l.inner == 1) {
    const Acc a = acc[0];
    for (int64_t d = 0; d < l.size; ++d)
      out[d] = op(a, p[d]...);
    return;
  }
  for (int64_t d = 0; d < l.size; ++d) {
    const int64_t base = d * l.inner;
    for (int64_t j = 0; j < l.inner; ++j)
      out[base + j] = op(acc[j], p[base + j]...);
  }
}

/// Checks the operands of a softmax-family kernel (all shaped like out,
/// `dim` in range), then runs `body(T{}, layout, out, ins...)` with the
/// inputs as out's float type.
template <size_t N, typename Body>
void softmaxKernel(const char *kernel, SpmdBuffer *out,
                   const std::array<const SpmdBuffer *, N> &ins, int64_t dim,
                   Body &&body) {
  const DimLayout l = checkSoftmax(kernel, out, ins.data(), N, dim);
  dispatch<kFloat>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> storage[N];
    std::array<const T *, N> in;
    for (size_t k = 0; k < N; ++k)
      in[k] = dataAs<T>(ins[k], storage[k], kernel);
    if (l.size == 0)
      return;
    body(tag, l, dataOf<T>(out), in);
  });
}

/// The fold term of `p`'s elements.
template <typename T> auto elements(const T *p) {
  return [p](auto lanes, int64_t i) { return lanes.load(p, i); };
}

/// The softmax-family backward along `dim`: per row, s = sum of
/// term(grad, output) over the dim, then out = combine(s, grad, output).
template <typename Term, typename Combine>
void softmaxBackward(const char *kernel, SpmdBuffer *out,
                     const SpmdBuffer *grad_output, const SpmdBuffer *output,
                     int64_t dim, Term term, Combine combine) {
  softmaxKernel<2>(
      kernel, out, {grad_output, output}, dim,
      [&](auto tag, const DimLayout &l, auto *o, const auto &in) {
        using T = decltype(tag);
        std::vector<T> acc(static_cast<size_t>(l.inner));
        const int64_t block = l.size * l.inner;
        for (int64_t b = 0; b < l.outer; ++b) {
          const T *g = in[0] + b * block;
          const T *y = in[1] + b * block;
          std::fill(acc.begin(), acc.end(), T(0));
          foldDim(l, acc.data(), term(g, y), AddOp());
          mapDim(
              l, o + b * block, acc.data(),
              [&](T s, T gv, T yv) -> T { return combine(s, gv, yv); }, g, y);
        }
      });
}

} // namespace

namespace spmd::rt::cpu {

/// ATen's vectorised softmax: exp(x - max) / sum(exp(x - max)).
void spmd_rt_softmax(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim) {
  softmaxKernel<1>(
      "spmd_rt_softmax", out, {self}, dim,
      [](auto tag, const DimLayout &l, auto *o, const auto &in) {
        using T = decltype(tag);
        std::vector<T> acc(static_cast<size_t>(l.inner));
        const int64_t block = l.size * l.inner;
        for (int64_t b = 0; b < l.outer; ++b) {
          const T *x = in[0] + b * block;
          T *y = o + b * block;
          std::fill(acc.begin(), acc.end(),
                    -std::numeric_limits<T>::infinity());
          foldDim(l, acc.data(), elements(x), MaxOp());
          mapDim(
              l, y, acc.data(), [](T m, T v) -> T { return math::exp(v - m); },
              x);
          std::fill(acc.begin(), acc.end(), T(0));
          foldDim(l, acc.data(), elements(static_cast<const T *>(y)), AddOp());
          for (T &s : acc)
            s = T(1) / s;
          mapDim(
              l, y, acc.data(), [](T r, T v) -> T { return v * r; },
              static_cast<const T *>(y));
        }
      });
}

/// ATen's vectorised log_softmax: (x - max) - log(sum(exp(x - max))).
void spmd_rt_log_softmax(SpmdBuffer *out, const SpmdBuffer *self, int64_t dim) {
  softmaxKernel<1>(
      "spmd_rt_log_softmax", out, {self}, dim,
      [](auto tag, const DimLayout &l, auto *o, const auto &in) {
        using T = decltype(tag);
        std::vector<T> max(static_cast<size_t>(l.inner));
        std::vector<T> sum(static_cast<size_t>(l.inner));
        const int64_t block = l.size * l.inner;
        for (int64_t b = 0; b < l.outer; ++b) {
          const T *x = in[0] + b * block;
          std::fill(max.begin(), max.end(),
                    -std::numeric_limits<T>::infinity());
          foldDim(l, max.data(), elements(x), MaxOp());
          // (x - max) - log(sum): subtracting max + log(sum) at once would
          // lose the small differences of large logits (ATen keeps this
          // order too). out holds exp(x - max) until the last passes.
          T *y = o + b * block;
          mapDim(
              l, y, max.data(), [](T m, T v) -> T { return math::exp(v - m); },
              x);
          std::fill(sum.begin(), sum.end(), T(0));
          foldDim(l, sum.data(), elements(static_cast<const T *>(y)), AddOp());
          for (T &s : sum)
            s = std::log(s);
          mapDim(
              l, y, max.data(), [](T m, T v) -> T { return v - m; }, x);
          mapDim(
              l, y, sum.data(), [](T c, T v) -> T { return v - c; },
              static_cast<const T *>(y));
        }
      });
}

/// ATen's softmax_backward_data formula: output * (grad - sum(grad * output)).
void spmd_rt_softmax_backward_data(SpmdBuffer *out,
                                   const SpmdBuffer *grad_output,
                                   const SpmdBuffer *output, int64_t dim) {
  softmaxBackward(
      "spmd_rt_softmax_backward_data", out, grad_output, output, dim,
      [](auto *g, auto *y) {
        return [g, y](auto lanes, int64_t i) {
          return lanes.load(g, i) * lanes.load(y, i);
        };
      },
      [](auto s, auto gv, auto yv) { return yv * (gv - s); });
}

/// ATen's log_softmax_backward_data formula: grad - exp(output) * sum(grad).
void spmd_rt_log_softmax_backward_data(SpmdBuffer *out,
                                       const SpmdBuffer *grad_output,
                                       const SpmdBuffer *output, int64_t dim) {
  softmaxBackward(
      "spmd_rt_log_softmax_backward_data", out, grad_output, output, dim,
      [](auto *g, auto *) { return elements(g); },
      [](auto s, auto gv, auto yv) { return gv - math::exp(yv) * s; });
}

} // namespace spmd::rt::cpu
