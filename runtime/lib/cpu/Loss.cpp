//===- Loss.cpp - nll_loss_forward and nll_loss_backward ------------------===//
//
// ATen 1.13's nll_loss_out_frame / nll_loss_backward_out_frame: self is
// [N, C] (or [C]) log-probabilities, target [N] (or []) class indices,
// weight an optional [C]; reduction 0 none, 1 mean, 2 sum. The _rows
// variants hold a piece of the classes (loss_parallel).
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <algorithm>
#include <limits>

using namespace spmd::rt;

namespace {

/// Calls `fn(i, c)` for each sample i whose target is not ignore_index and
/// lies in the held classes, c its index among them; fatal when a target
/// is outside [0, total).
template <typename Fn>
void forEachTarget(const char *kernel, const SpmdBuffer *target,
                   const NllShape &s, NllClasses held, int64_t ignoreIndex,
                   Fn &&fn) {
  dispatch<kInt>(
      target->dtype, kernel,
      [&](auto tag) {
        using I = decltype(tag);
        const I *t = dataOf<I>(target);
        for (int64_t i = 0; i < s.batch; ++i) {
          const int64_t c = t[i];
          if (c == ignoreIndex)
            continue;
          if (c < 0 || c >= held.total)
            spmd_rt_fatal("%s: target %lld of sample %lld is out of bounds "
                          "[0, %lld)",
                          kernel, static_cast<long long>(c),
                          static_cast<long long>(i),
                          static_cast<long long>(held.total));
          if (c >= held.begin && c < held.begin + held.count)
            fn(i, c - held.begin);
        }
      },
      "target");
}

/// Per sample -self[i, t] * weight[t] (0 where t == ignore_index). mean
/// divides the sum by total_weight, the sum of the weights of the
/// non-ignored targets (their count without weight; NaN result when 0).
/// total_weight is 0 for reduction none over a batch, as in ATen.
void nllLossForward(const char *kernel, SpmdBuffer *output,
                    SpmdBuffer *total_weight, const SpmdBuffer *self,
                    const SpmdBuffer *target, const SpmdBuffer *weight,
                    int64_t reduction, int64_t ignore_index,
                    const int64_t *rows) {
  const NllShape s = checkNllLoss(kernel, output, total_weight, self, target,
                                  weight, reduction);
  const NllClasses held = nllClasses(kernel, s, rows);
  dispatch<kFloat>(output->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    checkTotalWeightDType(kernel, output, total_weight);
    std::vector<T> xS, wS;
    const T *x = dataAs<T>(self, xS, kernel);
    const T *w = weight ? dataAs<T>(weight, wS, kernel) : nullptr;
    T *o = dataOf<T>(output);
    T *tw = dataOf<T>(total_weight);
    *tw = T(0);
    if (s.perSample) {
      std::fill(o, o + s.batch, T(0));
      forEachTarget(kernel, target, s, held, ignore_index,
                    [&](int64_t i, int64_t c) {
                      o[i] = -x[i * s.classes + c] * (w ? w[c] : T(1));
                    });
      return;
    }
    if (s.batch == 0) {
      // ATen: mean over nothing is NaN, the other reductions 0.
      *o = reduction == kReductionMean ? std::numeric_limits<T>::quiet_NaN()
                                       : T(0);
      return;
    }
    // Double sums (ATen uses a float cascade sum: same to rounding).
    double loss = 0, weightSum = 0;
    forEachTarget(kernel, target, s, held, ignore_index,
                  [&](int64_t i, int64_t c) {
                    const double wc = w ? w[c] : 1.0;
                    loss -= static_cast<double>(x[i * s.classes + c]) * wc;
                    weightSum += wc;
                  });
    const T total = static_cast<T>(weightSum);
    T result = static_cast<T>(loss);
    if (reduction == kReductionMean)
      result /= total;
    *o = result;
    *tw = total;
  });
}

/// The gradient of self: zero but at (i, target[i]) of non-ignored samples,
/// where it is -weight[t] * grad (grad / total_weight for mean).
void nllLossBackward(const char *kernel, SpmdBuffer *out,
                     const SpmdBuffer *grad_output, const SpmdBuffer *self,
                     const SpmdBuffer *target, const SpmdBuffer *weight,
                     const SpmdBuffer *total_weight, int64_t reduction,
                     int64_t ignore_index, const int64_t *rows) {
  const NllShape s = checkNllLossBackward(
      kernel, out, grad_output, self, target, weight, total_weight, reduction);
  const NllClasses held = nllClasses(kernel, s, rows);
  dispatch<kFloat>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::vector<T> gS, wS, twS;
    const T *g = dataAs<T>(grad_output, gS, kernel);
    const T *w = weight ? dataAs<T>(weight, wS, kernel) : nullptr;
    T *o = dataOf<T>(out);
    std::fill(o, o + out->numel, T(0));
    if (s.perSample) {
      forEachTarget(kernel, target, s, held, ignore_index,
                    [&](int64_t i, int64_t c) {
                      o[i * s.classes + c] = -(w ? w[c] : T(1)) * g[i];
                    });
      return;
    }
    const T tw = *dataAs<T>(total_weight, twS, kernel);
    const T grad = -(reduction == kReductionMean ? g[0] / tw : g[0]);
    forEachTarget(kernel, target, s, held, ignore_index,
                  [&](int64_t i, int64_t c) {
                    o[i * s.classes + c] = w ? w[c] * grad : grad;
                  });
  });
}

} // namespace

namespace spmd::rt::cpu {

SPMD_RT_NLL_LOSS_KERNELS(nllLossForward, nllLossBackward)

} // namespace spmd::rt::cpu
