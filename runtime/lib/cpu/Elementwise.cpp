//===- Elementwise.cpp - the pointwise kernels on the CPU -----------------===//
//
// The SPMD_RT_POINTWISE entries of KernelList.def, each its Pointwise.h
// formula run by the broadcasting loops of Kernels.h: computed in out's dtype
// (the promoted dtype the aten dialect inferred); inputs of another dtype are
// converted first, scalars are converted to out's dtype, as ATen's
// TensorIterator does.
//
//===----------------------------------------------------------------------===//

#include "../Pointwise.h"
#include "Kernels.h"

#include <cmath>
#include <vector>

using namespace spmd::rt;

namespace spmd::rt::cpu {

/// How the CPU runs Pointwise.h's formulas: Kernels.h's loops in out's
/// dtype, with scalars converted to it.
struct PointwiseEngine {
  /// The vectorisable float functions of Kernels.h (libm for f64), libm's
  /// sqrt and pow, and rsqrt as ATen's CPU kernel (1 / sqrt).
  struct Math {
    template <typename T> static T tanh(T x) { return math::tanh(x); }
    template <typename T> static T erf(T x) { return math::erf(x); }
    template <typename T> static T erf(T x, T expNegSquare) {
      return math::erf(x, expNegSquare);
    }
    template <typename T> static T exp(T x) { return math::exp(x); }
    template <typename T> static T sqrt(T x) { return std::sqrt(x); }
    template <typename T> static T rsqrt(T x) { return T(1) / std::sqrt(x); }
    template <typename T> static T log(T x) { return std::log(x); }
    template <typename T> static T cos(T x) { return std::cos(x); }
    template <typename T> static T sin(T x) { return std::sin(x); }
    template <typename T> static T pow(T base, T exponent) {
      return std::pow(base, exponent);
    }
  };
  template <typename T> using Compute = T;
  template <typename T, typename Op> static T scalar(double value) {
    return convertElem<T>(value);
  }
  /// Host memory for a temporary of `bytes` bytes.
  struct Temporary {
    std::vector<uint64_t> words;
    Temporary(int64_t bytes, const char *)
        : words((static_cast<size_t>(bytes) + 7) / 8) {}
    void *data() { return words.data(); }
  };
  static void copy(SpmdBuffer *out, const SpmdBuffer *self) {
    cpu::spmd_rt_copy(out, self);
  }
  /// Dispatches on out's dtype (in `Set`), then out = op(ins...) with
  /// broadcasting, where `makeOp(T{})` builds the op for element type T.
  template <unsigned Set, size_t N, typename MakeOp>
  static void elementwise(const char *kernel, SpmdBuffer *out,
                          const std::array<const SpmdBuffer *, N> &ins,
                          MakeOp &&makeOp) {
    dispatch<Set>(out->dtype, kernel, [&](auto tag) {
      using T = decltype(tag);
      mapInputs<T, N>(kernel, out, ins, makeOp(tag));
    });
  }
};

#define SPMD_RT_KERNEL(name, params, args)
#define SPMD_RT_POINTWISE SPMD_RT_DEFINE_POINTWISE
#include "spmd/Runtime/KernelList.def"
} // namespace spmd::rt::cpu
