//===- Convolution.cpp - convolution, its backward, pooling ---------------===//
//
// Convolutions as GEMMs over an im2col matrix (Caffe's and ATen's slow
// path): per image and group, column (c, kd, kh, kw) x position (od, oh,
// ow) holds the input element that kernel tap meets at that output
// position, 0 in the padding. The forward is weight [O/g, C/g * K] x
// columns; the backward's weight gradient is grad_output x columns^T and
// its input gradient is weight^T x grad_output folded back (col2im). A
// depthwise convolution (a channel per group) sums its taps directly, as its
// GEMMs would be single rows. One and two spatial dims are run as three with
// leading dims of size 1.
//
//===----------------------------------------------------------------------===//

#include "../Pooling.h"
#include "Gemm.h"
#include "Kernels.h"

#include <algorithm>
#include <limits>
#include <vector>

using namespace spmd::rt;

namespace {

/// Calls `fn(column, position, offset, count)` for every run of one group's
/// im2col matrix row `column` whose input elements lie inside the plane:
/// `count` consecutive output positions from `position`, reading the group's
/// [C/g, D, H, W] input from `offset` at steps of the width stride. Runs
/// are whole output rows less their padded ends, so the callers' inner
/// loops have no bounds checks.
template <typename Fn>
void forEachTapRun(const WindowGeometry &g, int64_t channels, Fn &&fn) {
  const int64_t plane = g.inPlane(), width = g.in[2], step = g.stride[2];
  int64_t column = 0;
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t kd = 0; kd < g.k[0]; ++kd)
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw, ++column) {
          // iw = ow * step + shift lies in [0, width) for ow in [lo, hi).
          const int64_t shift = kw * g.dilation[2] - g.pad[2];
          const int64_t lo = shift >= 0 ? 0 : (step - 1 - shift) / step;
          const int64_t hi =
              shift >= width
                  ? 0
                  : std::min(g.out[2], (width - 1 - shift) / step + 1);
          if (lo >= hi)
            continue;
          for (int64_t od = 0; od < g.out[0]; ++od) {
            const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dilation[0];
            if (id < 0 || id >= g.in[0])
              continue;
            for (int64_t oh = 0; oh < g.out[1]; ++oh) {
              const int64_t ih =
                  oh * g.stride[1] - g.pad[1] + kh * g.dilation[1];
              if (ih < 0 || ih >= g.in[1])
                continue;
              fn(column, (od * g.out[1] + oh) * g.out[2] + lo,
                 c * plane + (id * g.in[1] + ih) * width + lo * step + shift,
                 hi - lo);
            }
          }
        }
}

/// Whether the im2col matrix is the input itself: a 1x1 kernel at stride 1
/// without padding.
bool isPointwise(const WindowGeometry &g) {
  for (int d = 0; d < 3; ++d)
    if (g.k[d] != 1 || g.stride[d] != 1 || g.pad[d] != 0)
      return false;
  return true;
}

/// One group's im2col matrix [C/g * K, positions] of `in` [C/g, D, H, W].
template <typename T>
void im2col(const WindowGeometry &g, int64_t channels, const T *in, T *col) {
  const int64_t positions = g.outPlane();
  const int64_t step = g.stride[2];
  std::fill(col, col + channels * g.window() * positions, T(0));
  forEachTapRun(
      g, channels,
      [&](int64_t column, int64_t position, int64_t from, int64_t count) {
        T *to = col + column * positions + position;
        for (int64_t j = 0; j < count; ++j)
          to[j] = in[from + j * step];
      });
}

/// Adds one group's im2col-shaped gradient back into `in` [C/g, D, H, W].
template <typename T>
void col2imAdd(const WindowGeometry &g, int64_t channels, const T *col, T *in) {
  const int64_t positions = g.outPlane();
  const int64_t step = g.stride[2];
  forEachTapRun(
      g, channels,
      [&](int64_t column, int64_t position, int64_t from, int64_t count) {
        const T *src = col + column * positions + position;
        for (int64_t j = 0; j < count; ++j)
          in[from + j * step] += src[j];
      });
}

/// Whether each group is one input and one output channel (a depthwise
/// convolution, groups = channels): its GEMMs would be a single row, so the
/// kernels sum the taps directly instead of building the im2col matrix
/// (the window's size times the input).
bool isDepthwise(const WindowGeometry &g, int64_t groups) {
  return g.channels == groups && g.outChannels == groups;
}

/// Calls `fn(k, window)` for each output position k of a plane, its
/// window from avgPoolWindow (Pooling.h).
template <typename Fn>
void forEachAvgWindow(const WindowGeometry &g, bool adaptive, bool countPad,
                      int64_t divisorOverride, Fn &&fn) {
  for (int64_t oh = 0, k = 0; oh < g.out[1]; ++oh)
    for (int64_t ow = 0; ow < g.out[2]; ++ow, ++k)
      fn(k, avgPoolWindow(g, adaptive, countPad, divisorOverride, oh, ow));
}

/// Average pooling of every plane: out = window sum / divisor (an empty
/// window gives 0, as ATen).
void avgPool(const char *kernel, SpmdBuffer *out, const SpmdBuffer *self,
             const WindowGeometry &g, bool adaptive, bool countPad,
             int64_t divisorOverride) {
  const int64_t width = g.in[2], inPlane = g.in[1] * width;
  const int64_t outPlane = g.out[1] * g.out[2];
  dispatch<kFloat>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *x = dataOf<T>(self);
    T *o = dataOf<T>(out);
    for (int64_t p = 0; p < g.n; ++p)
      forEachAvgWindow(g, adaptive, countPad, divisorOverride,
                       [&](int64_t k, const PoolWindow &w) {
                         T sum = 0;
                         for (int64_t h = w.h0; h < w.h1; ++h)
                           for (int64_t c = w.w0; c < w.w1; ++c)
                             sum += x[p * inPlane + h * width + c];
                         o[p * outPlane + k] =
                             w.empty() ? T(0)
                                       : static_cast<T>(sum / T(w.divisor));
                       });
  });
}

/// Its gradient: each window's grad_output / divisor added to the window.
void avgPoolBackward(const char *kernel, SpmdBuffer *out,
                     const SpmdBuffer *grad, const WindowGeometry &g,
                     bool adaptive, bool countPad, int64_t divisorOverride) {
  const int64_t width = g.in[2], inPlane = g.in[1] * width;
  const int64_t outPlane = g.out[1] * g.out[2];
  dispatch<kFloat>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *dy = dataOf<T>(grad);
    T *dx = dataOf<T>(out);
    std::fill(dx, dx + out->numel, T(0));
    for (int64_t p = 0; p < g.n; ++p)
      forEachAvgWindow(g, adaptive, countPad, divisorOverride,
                       [&](int64_t k, const PoolWindow &w) {
                         const T share = dy[p * outPlane + k] / T(w.divisor);
                         for (int64_t h = w.h0; h < w.h1; ++h)
                           for (int64_t c = w.w0; c < w.w1; ++c)
                             dx[p * inPlane + h * width + c] += share;
                       });
  });
}

} // namespace

namespace spmd::rt::cpu {

void spmd_rt_convolution(SpmdBuffer *out, const SpmdBuffer *input,
                         const SpmdBuffer *weight, const SpmdBuffer *bias,
                         int32_t n_stride, const int64_t *stride,
                         int32_t n_padding, const int64_t *padding,
                         int32_t n_dilation, const int64_t *dilation,
                         int64_t groups) {
  const char *kernel = "spmd_rt_convolution";
  const WindowGeometry g =
      checkConvolution(kernel, out, input, weight, bias, n_stride, stride,
                       n_padding, padding, n_dilation, dilation, groups);
  const int64_t cg = g.channels / groups, og = g.outChannels / groups;
  const int64_t rows = cg * g.window(), positions = g.outPlane();
  const bool depthwise = isDepthwise(g, groups);
  const bool pointwise = !depthwise && isPointwise(g);
  const int64_t step = g.stride[2];
  dispatch<kFloat>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *x = dataOf<T>(input);
    const T *w = dataOf<T>(weight);
    T *o = dataOf<T>(out);
    std::vector<T> col(pointwise || depthwise ? 0 : rows * positions);
    for (int64_t i = 0; i < g.n; ++i)
      for (int64_t grp = 0; grp < groups; ++grp) {
        const T *in = x + (i * g.channels + grp * cg) * g.inPlane();
        if (depthwise) {
          T *row = o + (i * g.outChannels + grp) * positions;
          const T *taps = w + grp * rows;
          std::fill(row, row + positions, T(0));
          forEachTapRun(
              g, 1,
              [&](int64_t k, int64_t position, int64_t from, int64_t count) {
                const T tap = taps[k];
                for (int64_t j = 0; j < count; ++j)
                  row[position + j] += tap * in[from + j * step];
              });
          continue;
        }
        if (!pointwise)
          im2col(g, cg, in, col.data());
        gemm<T>(og, positions, rows, T(1), w + grp * og * rows, false,
                pointwise ? in : col.data(), false, T(0),
                o + (i * g.outChannels + grp * og) * positions);
      }
    if (bias) {
      const T *b = dataOf<T>(bias);
      for (int64_t i = 0; i < g.n; ++i)
        for (int64_t c = 0; c < g.outChannels; ++c) {
          T *row = o + (i * g.outChannels + c) * positions;
          for (int64_t p = 0; p < positions; ++p)
            row[p] += b[c];
        }
    }
  });
}

void spmd_rt_convolution_backward(SpmdBuffer *grad_input,
                                  SpmdBuffer *grad_weight,
                                  const SpmdBuffer *grad_output,
                                  const SpmdBuffer *input,
                                  const SpmdBuffer *weight, int32_t n_stride,
                                  const int64_t *stride, int32_t n_padding,
                                  const int64_t *padding, int32_t n_dilation,
                                  const int64_t *dilation, int64_t groups) {
  const char *kernel = "spmd_rt_convolution_backward";
  const WindowGeometry g = checkConvolution(
      kernel, grad_output, input, weight, nullptr, n_stride, stride, n_padding,
      padding, n_dilation, dilation, groups);
  if (grad_input)
    checkSameShape(kernel, "grad_input", grad_input, "input", input);
  if (grad_weight)
    checkSameShape(kernel, "grad_weight", grad_weight, "weight", weight);
  checkSameDTypes(kernel, "input", input, {"grad_input", "grad_weight"},
                  {grad_input, grad_weight});
  const int64_t cg = g.channels / groups, og = g.outChannels / groups;
  const int64_t rows = cg * g.window(), positions = g.outPlane();
  const bool depthwise = isDepthwise(g, groups);
  const bool pointwise = !depthwise && isPointwise(g);
  const int64_t step = g.stride[2];
  dispatch<kFloat>(input->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *x = dataOf<T>(input);
    const T *w = dataOf<T>(weight);
    const T *go = dataOf<T>(grad_output);
    T *gi = grad_input ? dataOf<T>(grad_input) : nullptr;
    T *gw = grad_weight ? dataOf<T>(grad_weight) : nullptr;
    std::vector<T> col(pointwise || depthwise ? 0 : rows * positions);
    if (gi && !pointwise)
      std::fill(gi, gi + grad_input->numel, T(0));
    if (gw && depthwise)
      std::fill(gw, gw + grad_weight->numel, T(0));
    for (int64_t i = 0; i < g.n; ++i)
      for (int64_t grp = 0; grp < groups; ++grp) {
        const size_t inAt = (i * g.channels + grp * cg) * g.inPlane();
        const T *dy = go + (i * g.outChannels + grp * og) * positions;
        const T *wg = w + grp * og * rows;
        // Depthwise: each tap's products, summed into the weight gradient
        // and scattered into the input gradient directly.
        if (depthwise) {
          const T *in = x + inAt;
          T *gin = gi ? gi + inAt : nullptr;
          T *gtaps = gw ? gw + grp * rows : nullptr;
          forEachTapRun(
              g, 1,
              [&](int64_t k, int64_t position, int64_t from, int64_t count) {
                const T *d = dy + position;
                if (gtaps) {
                  T sum = 0;
                  for (int64_t j = 0; j < count; ++j)
                    sum += d[j] * in[from + j * step];
                  gtaps[k] += sum;
                }
                if (gin) {
                  const T tap = wg[k];
                  for (int64_t j = 0; j < count; ++j)
                    gin[from + j * step] += tap * d[j];
                }
              });
          continue;
        }
        // The weight gradient [O/g, rows] sums dy x columns^T over images.
        if (gw) {
          const T *columns = x + inAt;
          if (!pointwise) {
            im2col(g, cg, x + inAt, col.data());
            columns = col.data();
          }
          gemm<T>(og, rows, positions, T(1), dy, false, columns, true,
                  i == 0 ? T(0) : T(1), gw + grp * og * rows);
        }
        // The input gradient: weight^T x dy, folded back.
        if (!gi)
          continue;
        if (pointwise) {
          gemm<T>(rows, positions, og, T(1), wg, true, dy, false, T(0),
                  gi + inAt);
        } else {
          gemm<T>(rows, positions, og, T(1), wg, true, dy, false, T(0),
                  col.data());
          col2imAdd(g, cg, col.data(), gi + inAt);
        }
      }
    if (gw && g.n == 0)
      std::fill(gw, gw + grad_weight->numel, T(0));
  });
}

void spmd_rt_max_pool2d_with_indices(
    SpmdBuffer *output, SpmdBuffer *indices, const SpmdBuffer *self,
    int32_t n_kernel_size, const int64_t *kernel_size, int32_t n_stride,
    const int64_t *stride, int32_t n_padding, const int64_t *padding,
    int32_t n_dilation, const int64_t *dilation, int64_t ceil_mode) {
  const char *kernel = "spmd_rt_max_pool2d_with_indices";
  const WindowGeometry g = checkMaxPool2d(
      kernel, output, indices, self, n_kernel_size, kernel_size, n_stride,
      stride, n_padding, padding, n_dilation, dilation, ceil_mode);
  const int64_t height = g.in[1], width = g.in[2];
  dispatch<kNumeric>(self->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *x = dataOf<T>(self);
    T *o = dataOf<T>(output);
    int64_t *idx = dataOf<int64_t>(indices);
    const T lowest = std::numeric_limits<T>::has_infinity
                         ? -std::numeric_limits<T>::infinity()
                         : std::numeric_limits<T>::lowest();
    for (int64_t p = 0; p < g.n; ++p) {
      const T *plane = x + p * height * width;
      for (int64_t oh = 0; oh < g.out[1]; ++oh)
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          // ATen's max_pool2d: the first in-plane tap, then any larger
          // element or NaN.
          const PoolWindow w = maxPoolWindow(g, oh, ow);
          T best = lowest;
          int64_t at = w.h0 * width + w.w0;
          for (int64_t h = w.h0; h < w.h1; h += g.dilation[1])
            for (int64_t c = w.w0; c < w.w1; c += g.dilation[2]) {
              const T v = plane[h * width + c];
              if (v > best || v != v) {
                best = v;
                at = h * width + c;
              }
            }
          const int64_t k = (p * g.out[1] + oh) * g.out[2] + ow;
          o[k] = best;
          idx[k] = at;
        }
    }
  });
}

void spmd_rt_max_pool2d_with_indices_backward(SpmdBuffer *out,
                                              const SpmdBuffer *grad_output,
                                              const SpmdBuffer *indices) {
  const char *kernel = "spmd_rt_max_pool2d_with_indices_backward";
  // out is shaped like the pooled input, grad_output like the pooling.
  const WindowGeometry g = checkPooledPlanes(kernel, grad_output, out);
  checkSameShape(kernel, "indices", indices, "grad_output", grad_output);
  if (indices->dtype != SPMD_I64)
    spmd_rt_fatal("%s: indices must be i64", kernel);
  const int64_t planes = g.n, inPlane = g.inPlane(), outPlane = g.outPlane();
  dispatch<kNumeric>(out->dtype, kernel, [&](auto tag) {
    using T = decltype(tag);
    const T *dy = dataOf<T>(grad_output);
    const int64_t *idx = dataOf<int64_t>(indices);
    T *dx = dataOf<T>(out);
    std::fill(dx, dx + out->numel, T(0));
    for (int64_t p = 0; p < planes; ++p)
      for (int64_t k = 0; k < outPlane; ++k) {
        const int64_t at = idx[p * outPlane + k];
        if (at < 0 || at >= inPlane)
          spmd_rt_fatal("%s: index %lld is outside a plane of %lld elements",
                        kernel, static_cast<long long>(at),
                        static_cast<long long>(inPlane));
        dx[p * inPlane + at] += dy[p * outPlane + k];
      }
  });
}

static constexpr int64_t kNoDilation[] = {1, 1};

void spmd_rt_avg_pool2d(SpmdBuffer *out, const SpmdBuffer *self,
                        int32_t n_kernel_size, const int64_t *kernel_size,
                        int32_t n_stride, const int64_t *stride,
                        int32_t n_padding, const int64_t *padding,
                        int64_t ceil_mode, int64_t count_include_pad,
                        int64_t divisor_override) {
  const char *kernel = "spmd_rt_avg_pool2d";
  const WindowGeometry g =
      checkPool2d(kernel, out, self, n_kernel_size, kernel_size, n_stride,
                  stride, n_padding, padding, 2, kNoDilation, ceil_mode);
  avgPool(kernel, out, self, g, false, count_include_pad, divisor_override);
}

void spmd_rt_avg_pool2d_backward(SpmdBuffer *out, const SpmdBuffer *grad_output,
                                 int32_t n_kernel_size,
                                 const int64_t *kernel_size, int32_t n_stride,
                                 const int64_t *stride, int32_t n_padding,
                                 const int64_t *padding, int64_t ceil_mode,
                                 int64_t count_include_pad,
                                 int64_t divisor_override) {
  const char *kernel = "spmd_rt_avg_pool2d_backward";
  // out is shaped like the pooled input, grad_output like the pooling.
  const WindowGeometry g = checkPool2d(kernel, grad_output, out, n_kernel_size,
                                       kernel_size, n_stride, stride, n_padding,
                                       padding, 2, kNoDilation, ceil_mode);
  avgPoolBackward(kernel, out, grad_output, g, false, count_include_pad,
                  divisor_override);
}

void spmd_rt_adaptive_avg_pool2d(SpmdBuffer *out, const SpmdBuffer *self) {
  const char *kernel = "spmd_rt_adaptive_avg_pool2d";
  avgPool(kernel, out, self, checkPooledPlanes(kernel, out, self), true, false,
          0);
}

void spmd_rt_adaptive_avg_pool2d_backward(SpmdBuffer *out,
                                          const SpmdBuffer *grad_output) {
  const char *kernel = "spmd_rt_adaptive_avg_pool2d_backward";
  avgPoolBackward(kernel, out, grad_output,
                  checkPooledPlanes(kernel, grad_output, out), true, false, 0);
}

} // namespace spmd::rt::cpu
