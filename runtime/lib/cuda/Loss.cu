//===- Loss.cu - nll_loss_forward and nll_loss_backward on the GPU --------===//
//
// cpu/Loss.cpp on the device (ATen 1.13's nll_loss_out_frame /
// nll_loss_backward_out_frame): self is [N, C] (or [C]) log-probabilities,
// target [N] (or []) class indices, weight an optional [C]; reduction 0
// none, 1 mean, 2 sum. The _rows variants hold a piece of the classes
// (loss_parallel): self's columns are global classes [begin, begin + count)
// of `total`, and a sample whose target lies elsewhere contributes nothing.
//
// A thread per sample. The reduced forward sums in double (in float for bf16,
// ATen's CUDA acc type), per block and then over the blocks' partial sums in
// a fixed order (deterministic). bf16 values are computed in
// float and rounded to bf16 once on store. A target outside [0, C) other than
// ignore_index is recorded in the device error slot and its sample skipped;
// the host reports it at the next synchronisation (the CPU fails at once).
//
//===----------------------------------------------------------------------===//

#include "Cuda.h"

#include <limits>

using namespace spmd::rt;

namespace spmd::rt::cuda {
namespace {

/// Calls `fn(I{})` with the C++ type of target's dtype (as the CPU, which
/// reads targets as i64 or i32).
template <typename Fn>
void dispatchTarget(const char *kernel, const SpmdBuffer *target, Fn &&fn) {
  dispatch<kInt>(target->dtype, kernel, fn, "target");
}

/// What the kernels need to read sample i's target.
template <typename I> struct Targets {
  const I *data;
  /// self's row length, and the global classes its columns hold.
  int64_t classes;
  NllClasses held;
  int64_t ignoreIndex;
  DeviceError *error;
  int kernel;

  /// Target i's column in self, or -1 when it is ignore_index, held by
  /// another rank, or out of bounds (recorded).
  __device__ int64_t operator[](int64_t i) const {
    const int64_t c = data[i];
    if (c == ignoreIndex)
      return -1;
    if (c < 0 || c >= held.total) {
      raiseError(error, DeviceErrorKind::NllTarget, kernel, c, held.total, i);
      return -1;
    }
    return c >= held.begin && c < held.begin + held.count ? c - held.begin : -1;
  }
};

template <typename I>
Targets<I> targetsOf(const char *kernel, const SpmdBuffer *target,
                     const NllShape &s, int64_t ignoreIndex,
                     const int64_t *rows) {
  return {dataOf<I>(target), s.classes,         nllClasses(kernel, s, rows),
          ignoreIndex,       deviceErrorSlot(), kernelId(kernel)};
}

/// weight[c] in OpMathT<T>, 1 without weight.
template <typename T>
__device__ OpMathT<T> weightAt(const T *__restrict__ w, int64_t c) {
  return w ? toOpMath(w[c]) : OpMathT<T>(1);
}

/// reduction none over a batch: out[i] = -x[i, t] * weight[t], 0 for ignored
/// (and invalid) targets.
template <typename T, typename I>
__global__ void nllPerSample(T *out, const T *__restrict__ x,
                             const T *__restrict__ w, Targets<I> targets,
                             int64_t batch) {
  using A = OpMathT<T>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < batch;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = targets[i];
    out[i] = toStorage<T>(
        c < 0 ? A(0) : -toOpMath(x[i * targets.classes + c]) * weightAt(w, c));
  }
}

/// The reduced forward's first pass: block k writes its samples' loss
/// (-sum of x[i, t] * weight[t]) and weight sums, in AccT<T>, to
/// partial[2k], [2k + 1].
template <typename T, typename I>
__global__ void __launch_bounds__(kBlock)
    nllPartialSums(AccT<T> *partial, const T *__restrict__ x,
                   const T *__restrict__ w, Targets<I> targets, int64_t batch) {
  using Acc = AccT<T>;
  Acc loss = 0, weightSum = 0;
  for (int64_t i = blockIdx.x * int64_t(kBlock) + threadIdx.x; i < batch;
       i += int64_t(gridDim.x) * kBlock) {
    const int64_t c = targets[i];
    if (c < 0)
      continue;
    const Acc wc = static_cast<Acc>(weightAt(w, c));
    loss -= static_cast<Acc>(toOpMath(x[i * targets.classes + c])) * wc;
    weightSum += wc;
  }
  loss = groupReduce<kBlock>(loss);
  weightSum = groupReduce<kBlock>(weightSum);
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = loss;
    partial[2 * blockIdx.x + 1] = weightSum;
  }
}

/// The reduced forward's second pass (one block): out = loss, divided by
/// total_weight for mean (in OpMathT<T>: for bf16 the float quotient is
/// rounded once, as ATen's CUDA kernel). With no samples (`empty`) mean is
/// NaN and the other reductions 0, as in ATen.
template <typename T>
__global__ void __launch_bounds__(kBlock)
    nllTotal(T *out, T *totalWeight, const AccT<T> *partial, int64_t blocks,
             bool mean, bool empty) {
  using A = OpMathT<T>;
  AccT<T> loss = 0, weightSum = 0;
  for (int64_t k = threadIdx.x; k < blocks; k += kBlock) {
    loss += partial[2 * k];
    weightSum += partial[2 * k + 1];
  }
  loss = groupReduce<kBlock>(loss);
  weightSum = groupReduce<kBlock>(weightSum);
  if (threadIdx.x != 0)
    return;
  const A total = static_cast<A>(weightSum);
  A result = static_cast<A>(loss);
  if (mean)
    result = empty ? std::numeric_limits<A>::quiet_NaN() : result / total;
  *out = toStorage<T>(result);
  *totalWeight = toStorage<T>(total);
}

/// The gradient at (i, target[i]) of non-ignored samples: -weight[t] *
/// grad[i] (reduction none over a batch, `perSample`), else -weight[t] *
/// grad (grad / total_weight for mean); computed in OpMathT<T>.
template <typename T, typename I>
__global__ void
nllBackward(T *out, const T *__restrict__ grad, const T *__restrict__ w,
            const T *__restrict__ totalWeight, Targets<I> targets,
            int64_t batch, bool perSample, bool mean) {
  using A = OpMathT<T>;
  const A scalarGrad = perSample
                           ? A(0)
                           : -(mean ? toOpMath(grad[0]) / toOpMath(*totalWeight)
                                    : toOpMath(grad[0]));
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < batch;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = targets[i];
    if (c < 0)
      continue;
    out[i * targets.classes + c] = toStorage<T>(
        perSample ? -weightAt(w, c) * toOpMath(grad[i])
                  : (w ? toOpMath(w[c]) * scalarGrad : scalarGrad));
  }
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
  dispatchDevice<kFloat | kBFloat16>(output->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    checkTotalWeightDType(kernel, output, total_weight);
    std::unique_ptr<Scratch> xS, wS;
    const T *x = dataAs<T>(self, xS, kernel);
    const T *w = weight ? dataAs<T>(weight, wS, kernel) : nullptr;
    T *o = dataOf<T>(output);
    T *tw = dataOf<T>(total_weight);
    cudaStream_t stream = computeStream();
    if (s.perSample) {
      check(cudaMemsetAsync(tw, 0, sizeof(T), stream), kernel);
      dispatchTarget(kernel, target, [&](auto targetTag) {
        using I = decltype(targetTag);
        if (s.batch == 0)
          return;
        nllPerSample<T, I><<<gridFor(s.batch), kBlock, 0, stream>>>(
            o, x, w, targetsOf<I>(kernel, target, s, ignore_index, rows),
            s.batch);
        checkLaunch(kernel);
      });
      return;
    }
    const bool mean = reduction == kReductionMean;
    if (s.batch == 0) {
      // The CPU reads no target here, so neither is its dtype checked.
      nllTotal<T><<<1, kBlock, 0, stream>>>(o, tw, nullptr, 0, mean, true);
      checkLaunch(kernel);
      return;
    }
    using Acc = AccT<T>;
    const unsigned blocks = std::min(gridFor(s.batch), 1024u);
    Scratch partial(2 * int64_t(blocks) * int64_t(sizeof(Acc)), kernel);
    dispatchTarget(kernel, target, [&](auto targetTag) {
      using I = decltype(targetTag);
      nllPartialSums<T, I><<<blocks, kBlock, 0, stream>>>(
          partial.as<Acc>(), x, w,
          targetsOf<I>(kernel, target, s, ignore_index, rows), s.batch);
      checkLaunch(kernel);
    });
    nllTotal<T><<<1, kBlock, 0, stream>>>(o, tw, partial.as<Acc>(), blocks,
                                          mean, false);
    checkLaunch(kernel);
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
  dispatchDevice<kFloat | kBFloat16>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    std::unique_ptr<Scratch> gS, wS, twS;
    const T *g = dataAs<T>(grad_output, gS, kernel);
    const T *w = weight ? dataAs<T>(weight, wS, kernel) : nullptr;
    T *o = dataOf<T>(out);
    cudaStream_t stream = computeStream();
    if (out->numel > 0)
      check(cudaMemsetAsync(o, 0, out->numel * sizeof(T), stream), kernel);
    const T *tw = s.perSample ? nullptr : dataAs<T>(total_weight, twS, kernel);
    dispatchTarget(kernel, target, [&](auto targetTag) {
      using I = decltype(targetTag);
      if (s.batch == 0)
        return;
      nllBackward<T, I><<<gridFor(s.batch), kBlock, 0, stream>>>(
          o, g, w, tw, targetsOf<I>(kernel, target, s, ignore_index, rows),
          s.batch, s.perSample, reduction == kReductionMean);
      checkLaunch(kernel);
    });
  });
}

} // namespace

SPMD_RT_NLL_LOSS_KERNELS(nllLossForward, nllLossBackward)

} // namespace spmd::rt::cuda
