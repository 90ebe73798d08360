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
/// padding. -1 when no window fits.
inline int64_t windowOutputSize(int64_t size, int64_t k, int64_t stride,
                                int64_t pad, int64_t dilation, bool ceilMode) {
  int64_t span = size + 2 * pad - dilation * (k - 1) - 1;
  if (span < 0)
    return -1;
  int64_t out = (span + (ceilMode ? stride - 1 : 0)) / stride + 1;
  if (ceilMode && (out - 1) * stride >= size + pad)
    --out;
  return out;
}

} // namespace spmd::rt

#endif // SPMD_RUNTIME_WINDOW_H
