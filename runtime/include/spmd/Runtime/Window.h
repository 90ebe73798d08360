//===- Window.h - output size of a convolution or pooling window -*- C++
//-*-===//
//
// One formula for the dialect's shape inference and the runtime's checks.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_WINDOW_H
#define SPMD_RUNTIME_WINDOW_H

#include <cstdint>

namespace spmd::rt {

/// The number of positions of a window of `k` elements (taps `dilation`
/// apart) sliding by `stride` over `size` elements padded by `pad` on each
/// side: ATen's pooling_output_shape, where a convolution is ceil_mode
/// false and ceil_mode drops a last window that would start in the right
/// padding. Below 1 when no window fits.
inline int64_t windowOutputSize(int64_t size, int64_t k, int64_t stride,
                                int64_t pad, int64_t dilation, bool ceilMode) {
  int64_t span =
      size + 2 * pad - dilation * (k - 1) - 1 + (ceilMode ? stride - 1 : 0);
  // Divided rounding toward negative infinity (ATen's div_rtn): a window
  // wider than the padded input leaves no output, except that ceil_mode
  // rounds a partial one up (EfficientNet's pooler: a 1x1 input, a 320x320
  // window).
  int64_t out =
      (span >= 0 ? span / stride : -((stride - 1 - span) / stride)) + 1;
  if (ceilMode && (out - 1) * stride >= size + pad)
    --out;
  return out;
}

} // namespace spmd::rt

#endif // SPMD_RUNTIME_WINDOW_H
