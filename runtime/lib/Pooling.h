//===- Pooling.h - pooling windows of both backends ------------*- C++ -*-===//
//
// The window each output position of a pooling reads, computed by one
// function for the CPU kernels (cpu/Convolution.cpp) and the CUDA kernels
// (cuda/Convolution.cu): `__host__ __device__` under nvcc, like Math.h, so
// both backends read the same elements and divide by the same divisor.
//
// Private to the runtime.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_POOLING_H
#define SPMD_RUNTIME_POOLING_H

#include "Checks.h"
#include "Math.h"

#include <cstdint>

namespace spmd::rt {

/// Rows [h0, h1) and columns [w0, w1) of a plane that one output position
/// of a pooling reads, and what an average divides their sum by.
struct PoolWindow {
  int64_t h0, h1, w0, w1;
  double divisor;
  SPMD_RT_HOST_DEVICE bool empty() const { return h0 >= h1 || w0 >= w1; }
  SPMD_RT_HOST_DEVICE bool contains(int64_t h, int64_t w) const {
    return h >= h0 && h < h1 && w >= w0 && w < w1;
  }
};

/// Output (oh, ow)'s window of an average pooling of geometry `g` (planes in
/// g.in[1..2], outputs in g.out[1..2]): ATen's avg_pool2d window (`adaptive`
/// false: the window clipped to the plane, divided by `divisorOverride`
/// when nonzero, else by its size with the padding when `countPad`, else
/// without it), or adaptive_avg_pool2d's [floor(i * n / m), ceil((i + 1) *
/// n / m)) on each axis.
SPMD_RT_HOST_DEVICE inline PoolWindow
avgPoolWindow(const WindowGeometry &g, bool adaptive, bool countPad,
              int64_t divisorOverride, int64_t oh, int64_t ow) {
  const int64_t height = g.in[1], width = g.in[2];
  PoolWindow w;
  if (adaptive) {
    w.h0 = oh * height / g.out[1];
    w.h1 = ((oh + 1) * height + g.out[1] - 1) / g.out[1];
    w.w0 = ow * width / g.out[2];
    w.w1 = ((ow + 1) * width + g.out[2] - 1) / g.out[2];
    w.divisor = double((w.h1 - w.h0) * (w.w1 - w.w0));
    return w;
  }
  w.h0 = oh * g.stride[1] - g.pad[1];
  w.w0 = ow * g.stride[2] - g.pad[2];
  w.h1 = w.h0 + g.k[1] < height + g.pad[1] ? w.h0 + g.k[1] : height + g.pad[1];
  w.w1 = w.w0 + g.k[2] < width + g.pad[2] ? w.w0 + g.k[2] : width + g.pad[2];
  const int64_t padded = (w.h1 - w.h0) * (w.w1 - w.w0);
  w.h0 = w.h0 > 0 ? w.h0 : 0;
  w.w0 = w.w0 > 0 ? w.w0 : 0;
  w.h1 = w.h1 < height ? w.h1 : height;
  w.w1 = w.w1 < width ? w.w1 : width;
  w.divisor = divisorOverride
                  ? double(divisorOverride)
                  : double(countPad ? padded : (w.h1 - w.h0) * (w.w1 - w.w0));
  return w;
}

/// The output positions [first, last) along one axis of an average pooling
/// whose windows may contain input position `i` of that axis (`axis` 1 for
/// rows, 2 for columns): the gradient's sources, each to be tested with
/// avgPoolWindow(...).contains.
SPMD_RT_HOST_DEVICE inline void avgPoolSources(const WindowGeometry &g,
                                               bool adaptive, int axis,
                                               int64_t i, int64_t &first,
                                               int64_t &last) {
  const int64_t n = g.in[axis], m = g.out[axis];
  if (adaptive) {
    // Window o holds i iff floor(o n / m) <= i < ceil((o + 1) n / m).
    first = i * m / n;
    last = ((i + 1) * m + n - 1) / n;
  } else {
    // Window o starts at o * stride - pad and spans k elements.
    const int64_t s = g.stride[axis], reach = i + g.pad[axis] - g.k[axis] + 1;
    first = reach <= 0 ? 0 : (reach + s - 1) / s;
    last = (i + g.pad[axis]) / s + 1;
  }
  last = last < m ? last : m;
}

/// Output (oh, ow)'s taps of a max pooling: rows h0, h0 + dilation, ...
/// below h1, likewise columns, the first tap inside the plane (ATen's
/// max_pool2d).
SPMD_RT_HOST_DEVICE inline PoolWindow maxPoolWindow(const WindowGeometry &g,
                                                    int64_t oh, int64_t ow) {
  const int64_t height = g.in[1], width = g.in[2];
  PoolWindow w;
  w.h0 = oh * g.stride[1] - g.pad[1];
  w.w0 = ow * g.stride[2] - g.pad[2];
  const int64_t hEnd = w.h0 + (g.k[1] - 1) * g.dilation[1] + 1;
  const int64_t wEnd = w.w0 + (g.k[2] - 1) * g.dilation[2] + 1;
  w.h1 = hEnd < height ? hEnd : height;
  w.w1 = wEnd < width ? wEnd : width;
  while (w.h0 < 0)
    w.h0 += g.dilation[1];
  while (w.w0 < 0)
    w.w0 += g.dilation[2];
  w.divisor = 1;
  return w;
}

} // namespace spmd::rt

#endif // SPMD_RUNTIME_POOLING_H
