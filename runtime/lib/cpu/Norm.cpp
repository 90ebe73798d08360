//===- Norm.cpp - native_layer_norm and its backward ----------------------===//
//
// The input is viewed as [M, N] rows, N the product of the trailing
// `normalized_rank` dims. Row statistics accumulate in double; the per
// element math is ATen's LayerNormKernel in the input's float type.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <cmath>

using namespace spmd::rt;

namespace {

/// `b`'s data as T, or `fallback` repeated n times when `b` is NULL (an
/// absent weight is 1, an absent bias 0: one loop serves all cases).
template <typename T>
const T *optionalData(const SpmdBuffer *b, std::vector<T> &storage, int64_t n,
                      T fallback, const char *kernel) {
  if (b)
    return dataAs<T>(b, storage, kernel);
  storage.assign(static_cast<size_t>(n), fallback);
  return storage.data();
}

/// One row of the forward: mean, then the biased variance around it (two
/// passes, sums accumulated in double, so the float results match ATen's
/// Welford moments to rounding), then y = (x * rstd - rstd * mean) * gamma
/// + beta in T.
template <typename T>
SPMD_RT_HOT void layerNormRow(const T *x, T *y, const T *gamma, const T *beta,
                              int64_t n, double eps, T &meanOut, T &rstdOut) {
  const double mu =
      sumRow<double, T>(
          n, [x](auto lanes, int64_t j) { return lanes.load(x, j); }) /
      double(n);
  const T mean = static_cast<T>(mu);
  // Deviations from the mean rounded to T, as in ATen's float moments.
  const double var = sumRow<double, T>(n,
                                       [x, mean](auto lanes, int64_t j) {
                                         auto dev = lanes.load(x, j) - mean;
                                         return dev * dev;
                                       }) /
                     double(n);
  const T rstd = static_cast<T>(1.0 / std::sqrt(var + eps));
  const T shift = -rstd * mean;
  for (int64_t j = 0; j < n; ++j)
    y[j] = (x[j] * rstd + shift) * gamma[j] + beta[j];
  meanOut = mean;
  rstdOut = rstd;
}

/// dgamma[j] += dy[j] * (a * x[j] + b) with a = rstd, b = -rstd * mean.
template <typename T>
SPMD_RT_HOT void accumulateWeightGrad(T *dgamma, const T *dy, const T *x, T a,
                                      T b, int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    dgamma[j] += dy[j] * (a * x[j] + b);
}

/// One row of the input gradient (ATen's formula, see below).
template <typename T>
SPMD_RT_HOT void layerNormBackwardRow(T *dx, const T *dy, const T *x,
                                      const T *gamma, T mean, T a, T scale,
                                      int64_t n) {
  const T ds = static_cast<T>(sumRow<double, T>(n, [=](auto lanes, int64_t j) {
    return lanes.load(dy, j) * lanes.load(x, j) * lanes.load(gamma, j);
  }));
  const T db = static_cast<T>(sumRow<double, T>(n, [=](auto lanes, int64_t j) {
    return lanes.load(dy, j) * lanes.load(gamma, j);
  }));
  const T b = (db * mean - ds) * a * a * a * scale;
  const T c = -b * mean - db * a * scale;
  for (int64_t j = 0; j < n; ++j)
    dx[j] = a * dy[j] * gamma[j] + b * x[j] + c;
}

} // namespace

namespace spmd::rt::cpu {

/// ATen's LayerNormKernel: biased variance, rstd = 1 / sqrt(var + eps),
/// y = (x * rstd - rstd * mean) * weight + bias.
void spmd_rt_native_layer_norm(SpmdBuffer *output, SpmdBuffer *mean,
                               SpmdBuffer *rstd, const SpmdBuffer *input,
                               const SpmdBuffer *weight, const SpmdBuffer *bias,
                               int64_t normalized_rank, double eps) {
  const char *kernel = "spmd_rt_native_layer_norm";
  const NormRows rows = checkLayerNorm(kernel, output, mean, rstd, input,
                                       weight, bias, normalized_rank);
  dispatch<kFloat>(output->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    checkLayerNormStatDTypes(kernel, output, mean, rstd);
    std::vector<T> xStorage, gammaStorage, betaStorage;
    const T *x = dataAs<T>(input, xStorage, kernel);
    const T *gamma =
        optionalData<T>(weight, gammaStorage, rows.n, T(1), kernel);
    const T *beta = optionalData<T>(bias, betaStorage, rows.n, T(0), kernel);
    T *y = dataOf<T>(output);
    T *meanOut = dataOf<T>(mean);
    T *rstdOut = dataOf<T>(rstd);
    for (int64_t i = 0; i < rows.m; ++i)
      layerNormRow(x + i * rows.n, y + i * rows.n, gamma, beta, rows.n, eps,
                   meanOut[i], rstdOut[i]);
  });
}

/// ATen's LayerNormBackwardKernel: per row, with g = weight (1 if absent),
///   ds = sum(dy * x * g), db = sum(dy * g), a = rstd,
///   b = (db * mean - ds) * a^3 / N, c = -b * mean - db * a / N,
///   dx = a * dy * g + b * x + c;
/// dweight = sum over rows of dy * (x - mean) * rstd, dbias = sum of dy.
void spmd_rt_native_layer_norm_backward(
    SpmdBuffer *grad_input, SpmdBuffer *grad_weight, SpmdBuffer *grad_bias,
    const SpmdBuffer *grad_out, const SpmdBuffer *input, const SpmdBuffer *mean,
    const SpmdBuffer *rstd, const SpmdBuffer *weight, const SpmdBuffer *bias,
    int64_t normalized_rank) {
  (void)bias; // The bias does not enter any gradient.
  const char *kernel = "spmd_rt_native_layer_norm_backward";
  const NormRows rows = checkLayerNormBackward(kernel, grad_input, grad_weight,
                                               grad_bias, grad_out, input, mean,
                                               rstd, weight, normalized_rank);
  // The first non-NULL result fixes the float type.
  const SpmdBuffer *typed =
      layerNormGradTyped(grad_input, grad_weight, grad_bias);
  if (!typed)
    return;
  dispatch<kFloat>(typed->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    checkLayerNormGradDTypes(kernel, grad_input, grad_weight, grad_bias);
    std::vector<T> dyS, xS, meanS, rstdS, gammaS;
    const T *dy = dataAs<T>(grad_out, dyS, kernel);
    const T *x = dataAs<T>(input, xS, kernel);
    const T *meanV = dataAs<T>(mean, meanS, kernel);
    const T *rstdV = dataAs<T>(rstd, rstdS, kernel);
    const T *gamma = optionalData<T>(weight, gammaS, rows.n, T(1), kernel);
    const int64_t n = rows.n;
    const T scale = T(1) / static_cast<T>(n);
    // dweight and dbias sum over rows: T partial sums over blocks of rows,
    // added up in double (a two-level cascade, as sumRow).
    constexpr int64_t kRowBlock = 64;
    std::vector<T> dgammaPart(grad_weight ? n : 0, T(0));
    std::vector<T> dbetaPart(grad_bias ? n : 0, T(0));
    std::vector<double> dgamma(dgammaPart.size(), 0.0);
    std::vector<double> dbeta(dbetaPart.size(), 0.0);
    auto flush = [](std::vector<double> &total, std::vector<T> &part) {
      addRow(total.data(), part.data(), static_cast<int64_t>(part.size()));
      std::fill(part.begin(), part.end(), T(0));
    };
    for (int64_t i = 0; i < rows.m; ++i) {
      const T *dyr = dy + i * n;
      const T *xr = x + i * n;
      const T a = rstdV[i];
      if (grad_weight)
        accumulateWeightGrad(dgammaPart.data(), dyr, xr, a, -a * meanV[i], n);
      if (grad_bias)
        addRow(dbetaPart.data(), dyr, n);
      if (grad_input)
        layerNormBackwardRow(dataOf<T>(grad_input) + i * n, dyr, xr, gamma,
                             meanV[i], a, scale, n);
      if ((i + 1) % kRowBlock == 0 || i + 1 == rows.m) {
        flush(dgamma, dgammaPart);
        flush(dbeta, dbetaPart);
      }
    }
    if (grad_weight)
      for (int64_t j = 0; j < n; ++j)
        dataOf<T>(grad_weight)[j] = static_cast<T>(dgamma[j]);
    if (grad_bias)
      for (int64_t j = 0; j < n; ++j)
        dataOf<T>(grad_bias)[j] = static_cast<T>(dbeta[j]);
  });
}

} // namespace spmd::rt::cpu
