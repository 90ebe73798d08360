//===- Elementwise.cpp - broadcasting arithmetic, unary ops, gelu ---------===//
//
// Each kernel computes in out's dtype (the promoted dtype the aten dialect
// inferred); inputs of another dtype are converted first, scalars are
// converted to out's dtype, as ATen's TensorIterator does.
//
//===----------------------------------------------------------------------===//

#include "../Math.h"
#include "Kernels.h"

#include <cmath>

using namespace spmd::rt;

namespace spmd::rt::cpu {

void spmd_rt_add_tensor(SpmdBuffer *out, const SpmdBuffer *self,
                        const SpmdBuffer *other, double alpha) {
  elementwise<kNumeric, 2>("spmd_rt_add_tensor", out, {self, other},
                           [&](auto tag) {
                             using T = decltype(tag);
                             T a = convertElem<T>(alpha);
                             return [a](T x, T y) -> T { return x + a * y; };
                           });
}

void spmd_rt_sub_tensor(SpmdBuffer *out, const SpmdBuffer *self,
                        const SpmdBuffer *other, double alpha) {
  elementwise<kNumeric, 2>("spmd_rt_sub_tensor", out, {self, other},
                           [&](auto tag) {
                             using T = decltype(tag);
                             T a = convertElem<T>(alpha);
                             return [a](T x, T y) -> T { return x - a * y; };
                           });
}

void spmd_rt_mul_tensor(SpmdBuffer *out, const SpmdBuffer *self,
                        const SpmdBuffer *other) {
  elementwise<kNumeric, 2>("spmd_rt_mul_tensor", out, {self, other},
                           [](auto tag) {
                             using T = decltype(tag);
                             return [](T x, T y) -> T { return x * y; };
                           });
}

/// True division: out is floating; integer inputs are converted first.
void spmd_rt_div_tensor(SpmdBuffer *out, const SpmdBuffer *self,
                        const SpmdBuffer *other) {
  elementwise<kFloat, 2>("spmd_rt_div_tensor", out, {self, other},
                         [](auto tag) {
                           using T = decltype(tag);
                           return [](T x, T y) -> T { return x / y; };
                         });
}

/// ATen's order of operations: self + (value * t1) * t2.
void spmd_rt_addcmul(SpmdBuffer *out, const SpmdBuffer *self,
                     const SpmdBuffer *t1, const SpmdBuffer *t2, double value) {
  elementwise<kNumeric, 3>(
      "spmd_rt_addcmul", out, {self, t1, t2}, [&](auto tag) {
        using T = decltype(tag);
        T v = convertElem<T>(value);
        return [v](T s, T a, T b) -> T { return s + v * a * b; };
      });
}

/// self + (value * t1) / t2; ATen rejects integer addcdiv, so floats only.
void spmd_rt_addcdiv(SpmdBuffer *out, const SpmdBuffer *self,
                     const SpmdBuffer *t1, const SpmdBuffer *t2, double value) {
  elementwise<kFloat, 3>("spmd_rt_addcdiv", out, {self, t1, t2}, [&](auto tag) {
    using T = decltype(tag);
    T v = convertElem<T>(value);
    return [v](T s, T a, T b) -> T { return s + v * a / b; };
  });
}

/// ATen's threshold kernel with value 0: self <= threshold ? 0 : grad.
void spmd_rt_threshold_backward(SpmdBuffer *out, const SpmdBuffer *grad_output,
                                const SpmdBuffer *self, double threshold) {
  elementwise<kNumeric, 2>(
      "spmd_rt_threshold_backward", out, {grad_output, self}, [&](auto tag) {
        using T = decltype(tag);
        T t = convertElem<T>(threshold);
        return [t](T g, T x) -> T { return x <= t ? T(0) : g; };
      });
}

void spmd_rt_add_scalar(SpmdBuffer *out, const SpmdBuffer *self, double other,
                        double alpha) {
  elementwise<kNumeric, 1>("spmd_rt_add_scalar", out, {self}, [&](auto tag) {
    using T = decltype(tag);
    // ATen: self + alpha * other, both scalars in out's dtype.
    T b = convertElem<T>(alpha) * convertElem<T>(other);
    return [b](T x) -> T { return x + b; };
  });
}

void spmd_rt_mul_scalar(SpmdBuffer *out, const SpmdBuffer *self, double other) {
  elementwise<kNumeric, 1>("spmd_rt_mul_scalar", out, {self}, [&](auto tag) {
    using T = decltype(tag);
    T b = convertElem<T>(other);
    return [b](T x) -> T { return x * b; };
  });
}

/// True division (a / b, not a * (1 / b), as ATen's div_true_kernel).
void spmd_rt_div_scalar(SpmdBuffer *out, const SpmdBuffer *self, double other) {
  elementwise<kFloat, 1>("spmd_rt_div_scalar", out, {self}, [&](auto tag) {
    using T = decltype(tag);
    T b = convertElem<T>(other);
    return [b](T x) -> T { return x / b; };
  });
}

/// other - alpha * self.
void spmd_rt_rsub_scalar(SpmdBuffer *out, const SpmdBuffer *self, double other,
                         double alpha) {
  elementwise<kNumeric, 1>("spmd_rt_rsub_scalar", out, {self}, [&](auto tag) {
    using T = decltype(tag);
    T b = convertElem<T>(other);
    T a = convertElem<T>(alpha);
    return [a, b](T x) -> T { return b - a * x; };
  });
}

/// base ** exponent: std::pow for floats, exact integer power for ints
/// (ATen's pow_tensor_tensor kernel with a wrapped scalar base).
void spmd_rt_pow_scalar(SpmdBuffer *out, double base,
                        const SpmdBuffer *exponent) {
  elementwise<kNumeric, 1>("spmd_rt_pow_scalar", out, {exponent},
                           [&](auto tag) {
                             using T = decltype(tag);
                             T b = convertElem<T>(base);
                             return [b](T e) -> T {
                               if constexpr (std::is_floating_point_v<T>)
                                 return std::pow(b, e);
                               else
                                 return intPow(b, e);
                             };
                           });
}

void spmd_rt_neg(SpmdBuffer *out, const SpmdBuffer *self) {
  elementwise<kNumeric, 1>("spmd_rt_neg", out, {self}, [](auto tag) {
    using T = decltype(tag);
    return [](T x) -> T { return -x; };
  });
}

void spmd_rt_reciprocal(SpmdBuffer *out, const SpmdBuffer *self) {
  elementwise<kFloat, 1>("spmd_rt_reciprocal", out, {self}, [](auto tag) {
    using T = decltype(tag);
    return [](T x) -> T { return T(1) / x; };
  });
}

void spmd_rt_sqrt(SpmdBuffer *out, const SpmdBuffer *self) {
  elementwise<kFloat, 1>("spmd_rt_sqrt", out, {self}, [](auto tag) {
    using T = decltype(tag);
    return [](T x) -> T { return std::sqrt(x); };
  });
}

/// ATen's clamp_min(self, 0): NaN propagates, -0 stays -0.
void spmd_rt_relu(SpmdBuffer *out, const SpmdBuffer *self) {
  elementwise<kNumeric, 1>("spmd_rt_relu", out, {self}, [](auto tag) {
    using T = decltype(tag);
    return [](T x) -> T { return x < T(0) ? T(0) : x; };
  });
}

/// ATen's GeluKernel: approximate 0 is x/2 * (1 + erf(x / sqrt 2)); 1 is
/// x/2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))).
void spmd_rt_gelu(SpmdBuffer *out, const SpmdBuffer *self,
                  int64_t approximate) {
  const char *kernel = "spmd_rt_gelu";
  checkApproximate(kernel, approximate);
  // One loop per variant: no per-element test of `approximate`.
  if (approximate == 1) {
    elementwise<kFloat, 1>(kernel, out, {self}, [](auto tag) {
      using T = decltype(tag);
      return [](T x) -> T {
        const T inner = T(kGeluBeta) * (x + T(kGeluKappa) * x * x * x);
        return T(0.5) * x * (T(1) + math::tanh(inner));
      };
    });
    return;
  }
  elementwise<kFloat, 1>(kernel, out, {self}, [](auto tag) {
    using T = decltype(tag);
    return [](T x) -> T {
      return x * T(0.5) * (T(1) + math::erf(x * T(M_SQRT1_2)));
    };
  });
}

/// ATen's GeluBackwardKernel formulas for both variants.
void spmd_rt_gelu_backward(SpmdBuffer *out, const SpmdBuffer *grad_output,
                           const SpmdBuffer *self, int64_t approximate) {
  const char *kernel = "spmd_rt_gelu_backward";
  checkApproximate(kernel, approximate);
  if (approximate == 1) {
    elementwise<kFloat, 2>(kernel, out, {grad_output, self}, [](auto tag) {
      using T = decltype(tag);
      return [](T dy, T x) -> T {
        return geluTanhBackward(dy, x, [](T v) { return math::tanh(v); });
      };
    });
    return;
  }
  elementwise<kFloat, 2>(kernel, out, {grad_output, self}, [](auto tag) {
    using T = decltype(tag);
    return [](T dy, T x) -> T {
      const T kAlpha = T(M_2_SQRTPI * M_SQRT1_2 * 0.5);
      // exp(-x^2 / 2) serves the pdf and erf(x / sqrt 2) alike.
      const T gauss = math::exp(x * x * T(-0.5));
      const T cdf = T(0.5) * (T(1) + math::erf(x * T(M_SQRT1_2), gauss));
      const T pdf = kAlpha * gauss;
      return dy * (cdf + x * pdf);
    };
  });
}

} // namespace spmd::rt::cpu
