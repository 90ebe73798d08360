//===- Pointwise.h - pointwise formulas of both backends --------*- C++ -*-===//
//
// Each pointwise kernel of KernelList.def (its SPMD_RT_POINTWISE entries)
// computes out = Op(inputs...) element by element, with its formula written
// once here as a functor template `Op<T, Math>` that both backends
// instantiate: the CPU's `elementwise` loops (cpu/Kernels.h) and the CUDA
// strided engine (cuda/Elementwise.cu). T is the type the op computes in
// (out's dtype; float for bf16 on CUDA, ATen's opmath_type), and Math is the
// backend's tanh, erf, exp, sqrt, rsqrt and pow (the CPU's vectorisable
// ones, the device's), so each backend keeps its own numerics. The formulas
// follow ATen's CPU and CUDA kernels and their order of operations.
//
// An Op is built once per kernel call from the entry's scalars, converted
// to out's dtype (in a constructor where the op folds them, so a kernel
// does per element exactly what ATen does), and called on each element.
// SPMD_RT_DEFINE_POINTWISE defines a backend's entry points from the table.
//
// Private to the runtime: plain C++17, no dependencies.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_POINTWISE_H
#define SPMD_RUNTIME_POINTWISE_H

#include "Checks.h"
#include "Math.h"
#include "spmd/Runtime/Runtime.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <type_traits>

namespace spmd::rt {

//===----------------------------------------------------------------------===//
// Binary and ternary arithmetic
//===----------------------------------------------------------------------===//

/// ATen's add.Tensor: self + alpha * other.
template <typename T, typename Math> struct AddTensor {
  T alpha;
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    return self + alpha * other;
  }
};

/// ATen's sub.Tensor: self - alpha * other.
template <typename T, typename Math> struct SubTensor {
  T alpha;
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    return self - alpha * other;
  }
};

template <typename T, typename Math> struct MulTensor {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    return self * other;
  }
};

/// True division: out is floating; integer inputs are converted first.
template <typename T, typename Math> struct DivTensor {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    return self / other;
  }
};

/// ATen's div with rounding_mode "trunc": integers divide in C++ (toward
/// zero), floats truncate the quotient. An integer division by zero gives
/// 0 (ATen raises).
template <typename T, typename Math> struct DivTrunc {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    if constexpr (std::is_integral_v<T>)
      return other == T(0) ? T(0) : static_cast<T>(self / other);
    else
      return std::trunc(self / other);
  }
};

/// ATen's div with rounding_mode "floor" (div_floor_integer and
/// div_floor_floating): Python's `//`, the float quotient computed from
/// fmod so that it is exact where the true quotient is an integer.
template <typename T, typename Math> struct DivFloor {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    if constexpr (std::is_integral_v<T>) {
      if (other == T(0))
        return T(0);
      T quotient = static_cast<T>(self / other);
      if (self % other != T(0) && ((self < T(0)) != (other < T(0))))
        --quotient;
      return quotient;
    } else {
      if (other == T(0))
        return self / other;
      T mod = std::fmod(self, other);
      T quotient = (self - mod) / other;
      if (mod != T(0) && (other < T(0)) != (mod < T(0)))
        quotient -= T(1);
      if (quotient == T(0))
        return std::copysign(T(0), self / other);
      T floored = std::floor(quotient);
      if (quotient - floored > T(0.5))
        floored += T(1);
      return floored;
    }
  }
};

/// ATen's fmod: C's % on integers (0 for a zero divisor, where ATen
/// raises), std::fmod on floats: the remainder has self's sign.
template <typename T, typename Math> struct FmodTensor {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    if constexpr (std::is_integral_v<T>)
      return other == T(0) ? T(0) : static_cast<T>(self % other);
    else
      return std::fmod(self, other);
  }
};

/// ATen's remainder (Python's %): fmod moved by `other` where its sign
/// differs from other's (an integer fmod by zero is 0, so stays 0).
template <typename T, typename Math> struct RemainderTensor {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    T mod = FmodTensor<T, Math>()(self, other);
    if (mod != T(0) && (mod < T(0)) != (other < T(0)))
      mod += other;
    return mod;
  }
};

/// ATen's order of operations: self + (value * t1) * t2.
template <typename T, typename Math> struct Addcmul {
  T value;
  SPMD_RT_HOST_DEVICE T operator()(T self, T t1, T t2) const {
    return self + value * t1 * t2;
  }
};

/// self + (value * t1) / t2; ATen rejects integer addcdiv, so floats only.
template <typename T, typename Math> struct Addcdiv {
  T value;
  SPMD_RT_HOST_DEVICE T operator()(T self, T t1, T t2) const {
    return self + value * t1 / t2;
  }
};

/// ATen's threshold kernel with value 0: self <= threshold ? 0 : grad.
template <typename T, typename Math> struct ThresholdBackward {
  /// Unlike the opmath ops, ATen's threshold kernel takes the threshold in
  /// scalar_t: for bf16 it is rounded to bf16 (then compared in float).
  static constexpr bool kScalarsInStorageType = true;
  T threshold;
  SPMD_RT_HOST_DEVICE T operator()(T grad, T self) const {
    return self <= threshold ? T(0) : grad;
  }
};

/// ATen's maximum: NaN where either is NaN (returned as it is, as ATen's
/// CUDA kernel), else the larger (self when they compare equal, as
/// std::max); for bools (0 or 1) self || other.
template <typename T, typename Math> struct Maximum {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    if (isNan(self))
      return self;
    if (isNan(other))
      return other;
    return self < other ? other : self;
  }
};

/// ATen's minimum: the smaller of self and other, NaN where either is NaN.
template <typename T, typename Math> struct Minimum {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    if (isNan(self))
      return self;
    if (isNan(other))
      return other;
    return other < self ? other : self;
  }
};

/// ATen's bitwise_and and bitwise_or: bitwise on integers, logical on
/// bools (T is then Bool8, whose values are 0 and 1).
template <typename T, typename Math> struct BitwiseAnd {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    if constexpr (std::is_integral_v<T>)
      return self & other;
    else
      return self != T(0) && other != T(0) ? T(1) : T(0);
  }
};
template <typename T, typename Math> struct BitwiseOr {
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    if constexpr (std::is_integral_v<T>)
      return self | other;
    else
      return self != T(0) || other != T(0) ? T(1) : T(0);
  }
};

//===----------------------------------------------------------------------===//
// Tensor-scalar
//===----------------------------------------------------------------------===//

/// ATen's add.Scalar: self + alpha * other, both scalars in out's dtype and
/// multiplied once.
template <typename T, typename Math> struct AddScalar {
  T addend;
  SPMD_RT_HOST_DEVICE AddScalar(T other, T alpha) : addend(alpha * other) {}
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return self + addend; }
};

/// ATen's sub.Scalar: self - alpha * other.
template <typename T, typename Math> struct SubScalar {
  T subtrahend;
  SPMD_RT_HOST_DEVICE SubScalar(T other, T alpha) : subtrahend(alpha * other) {}
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return self - subtrahend; }
};

template <typename T, typename Math> struct MulScalar {
  T other;
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return self * other; }
};

/// True division (a / b, not a * (1 / b), as ATen's div_true_kernel).
template <typename T, typename Math> struct DivScalar {
  T other;
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return self / other; }
};

/// ATen's rsub.Scalar: other - alpha * self.
template <typename T, typename Math> struct RsubScalar {
  T other, alpha;
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    return other - alpha * self;
  }
};

/// base ** exponent: the backend's pow for floats, exact integer power for
/// ints (ATen's pow_tensor_tensor kernel with a wrapped scalar base).
template <typename T, typename Math> struct PowScalar {
  T base;
  SPMD_RT_HOST_DEVICE T operator()(T exponent) const {
    if constexpr (std::is_floating_point_v<T>)
      return Math::pow(base, exponent);
    else
      return intPow(base, exponent);
  }
};

/// ATen's pow.Tensor_Scalar: self ** exponent. Integers: exact (powi, as
/// ATen's CPU kernel; the dialect rejects negative exponents). Floats: the
/// exponents ATen's kernels compute otherwise than with pow (the impl's
/// fill and copy for 0 and 1, the sqrt, rsqrt and reciprocal kernels for
/// 0.5, -0.5 and -1, and the products for 2, 3 and -2), else the backend's
/// pow. ATen's CUDA kernel takes the exponent in scalar_t (bf16 rounds it).
template <typename T, typename Math> struct PowTensorScalar {
  static constexpr bool kScalarsInStorageType = true;
  T exponent;
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    if constexpr (!std::is_floating_point_v<T>) {
      return intPow(self, exponent);
    } else {
      if (exponent == T(0))
        return T(1);
      if (exponent == T(1))
        return self;
      if (exponent == T(2))
        return self * self;
      if (exponent == T(3))
        return self * self * self;
      if (exponent == T(0.5))
        return Math::sqrt(self);
      if (exponent == T(-0.5))
        return Math::rsqrt(self);
      if (exponent == T(-1))
        return T(1) / self;
      if (exponent == T(-2))
        return T(1) / (self * self);
      return Math::pow(self, exponent);
    }
  }
};

/// ATen's pow.Tensor_Tensor: std::pow of floats, integer powers of
/// integers.
template <typename T, typename Math> struct PowTensorTensor {
  SPMD_RT_HOST_DEVICE T operator()(T self, T exponent) const {
    if constexpr (!std::is_floating_point_v<T>)
      return intPow(self, exponent);
    else
      return Math::pow(self, exponent);
  }
};

/// ATen's clamp with the bounds `kMin` and `kMax` given (its clamp_min,
/// clamp_max and clamp kernels): the bounds in self's dtype (scalar_t), min
/// applied first so that max wins where min > max; NaN in self or in a
/// given bound gives NaN.
template <typename T, typename Math, bool kMin, bool kMax> struct ClampOf {
  static constexpr bool kScalarsInStorageType = true;
  T min, max;
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    if constexpr (kMin)
      self = self < min || isNan(min) ? min : self;
    if constexpr (kMax)
      self = max < self || isNan(max) ? max : self;
    return self;
  }
};
template <typename T, typename Math>
using ClampMin = ClampOf<T, Math, true, false>;
template <typename T, typename Math>
using ClampMax = ClampOf<T, Math, false, true>;
template <typename T, typename Math> using Clamp = ClampOf<T, Math, true, true>;

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

template <typename T, typename Math> struct Neg {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return -self; }
};

/// ATen's abs: -0 gives +0 (as fabs), NaN stays NaN.
template <typename T, typename Math> struct Abs {
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    return self < T(0) ? -self : self == T(0) ? T(0) : self;
  }
};

template <typename T, typename Math> struct Reciprocal {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return T(1) / self; }
};

template <typename T, typename Math> struct Sqrt {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return Math::sqrt(self); }
};

/// ATen's clamp_min(self, 0): NaN propagates, -0 stays -0.
template <typename T, typename Math> struct Rsqrt {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return Math::rsqrt(self); }
};

template <typename T, typename Math> struct Exp {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return Math::exp(self); }
};

template <typename T, typename Math> struct Log {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return Math::log(self); }
};

template <typename T, typename Math> struct Log1p {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return std::log1p(self); }
};

template <typename T, typename Math> struct Expm1 {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return std::expm1(self); }
};

/// ATen's floor, ceil, trunc and round (nearbyint: halves to even) leave
/// integers as they are.
template <typename T, typename Math> struct Floor {
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    if constexpr (std::is_integral_v<T>)
      return self;
    else
      return std::floor(self);
  }
};

template <typename T, typename Math> struct Ceil {
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    if constexpr (std::is_integral_v<T>)
      return self;
    else
      return std::ceil(self);
  }
};

template <typename T, typename Math> struct Trunc {
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    if constexpr (std::is_integral_v<T>)
      return self;
    else
      return std::trunc(self);
  }
};

template <typename T, typename Math> struct Round {
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    if constexpr (std::is_integral_v<T>)
      return self;
    else
      return std::nearbyint(self);
  }
};

/// ATen's CPU sign: (0 < self) - (self < 0), so NaN and -0 give 0.
template <typename T, typename Math> struct Sign {
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    return T(T(0) < self) - T(self < T(0));
  }
};

template <typename T, typename Math> struct Cos {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return Math::cos(self); }
};

template <typename T, typename Math> struct Sin {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return Math::sin(self); }
};

/// 1 / (1 + exp(-x)), as ATen's CPU and CUDA sigmoid kernels.
template <typename T, typename Math> struct Sigmoid {
  SPMD_RT_HOST_DEVICE T operator()(T x) const {
    return T(1) / (T(1) + Math::exp(-x));
  }
};

/// ATen's sigmoid_backward: grad_output * (1 - output) * output.
template <typename T, typename Math> struct SigmoidBackward {
  SPMD_RT_HOST_DEVICE T operator()(T dy, T y) const {
    return dy * (T(1) - y) * y;
  }
};

template <typename T, typename Math> struct Relu {
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    return self < T(0) ? T(0) : self;
  }
};

template <typename T, typename Math> struct Tanh {
  SPMD_RT_HOST_DEVICE T operator()(T self) const { return Math::tanh(self); }
};

template <typename T, typename Math> struct TanhBackward {
  SPMD_RT_HOST_DEVICE T operator()(T grad, T output) const {
    return grad * (T(1) - output * output);
  }
};

//===----------------------------------------------------------------------===//
// gelu (ATen's GeluKernel and GeluBackwardKernel), one functor per variant
//===----------------------------------------------------------------------===//

/// Constants of gelu's tanh approximation: sqrt(2 / pi) and 0.044715.
constexpr double kGeluBeta = M_SQRT2 * M_2_SQRTPI * 0.5;
constexpr double kGeluKappa = 0.044715;

/// approximate = "none": x/2 * (1 + erf(x / sqrt 2)).
template <typename T, typename Math> struct GeluErf {
  SPMD_RT_HOST_DEVICE T operator()(T x) const {
    return x * T(0.5) * (T(1) + Math::erf(x * T(M_SQRT1_2)));
  }
};

/// approximate = "tanh": x/2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))).
template <typename T, typename Math> struct GeluTanh {
  SPMD_RT_HOST_DEVICE T operator()(T x) const {
    const T inner = T(kGeluBeta) * (x + T(kGeluKappa) * x * x * x);
    return T(0.5) * x * (T(1) + Math::tanh(inner));
  }
};

/// dy times the derivative of GeluErf: cdf(x) + x * pdf(x).
template <typename T, typename Math> struct GeluErfBackward {
  SPMD_RT_HOST_DEVICE T operator()(T dy, T x) const {
    const T kAlpha = T(M_2_SQRTPI * M_SQRT1_2 * 0.5);
    // exp(-x^2 / 2) serves the pdf and erf(x / sqrt 2) alike.
    const T gauss = Math::exp(x * x * T(-0.5));
    const T cdf = T(0.5) * (T(1) + Math::erf(x * T(M_SQRT1_2), gauss));
    const T pdf = kAlpha * gauss;
    return dy * (cdf + x * pdf);
  }
};

/// dy times the derivative of GeluTanh.
template <typename T, typename Math> struct GeluTanhBackward {
  SPMD_RT_HOST_DEVICE T operator()(T dy, T x) const {
    const T kBeta = T(kGeluBeta), kKappa = T(kGeluKappa);
    const T xSq = x * x;
    const T inner = kBeta * (x + kKappa * xSq * x);
    const T tanhInner = Math::tanh(inner);
    const T left = T(0.5) * x;
    const T right = T(1) + tanhInner;
    const T leftDerivative = T(0.5) * right;
    const T tanhDerivative = T(1) - tanhInner * tanhInner;
    const T innerDerivative = kBeta * (T(1) + T(3) * kKappa * xSq);
    const T rightDerivative = left * tanhDerivative * innerDerivative;
    return dy * (leftDerivative + rightDerivative);
  }
};

//===----------------------------------------------------------------------===//
// silu (ATen's silu_kernel and silu_backward_kernel)
//===----------------------------------------------------------------------===//

/// x * sigmoid(x), computed as ATen's CPU kernel: x / (1 + exp(-x)).
template <typename T, typename Math> struct Silu {
  SPMD_RT_HOST_DEVICE T operator()(T x) const {
    return x / (T(1) + Math::exp(-x));
  }
};

/// dy times the derivative of Silu: s * (1 + x * (1 - s)) with
/// s = sigmoid(x) = 1 / (1 + exp(-x)).
template <typename T, typename Math> struct SiluBackward {
  SPMD_RT_HOST_DEVICE T operator()(T dy, T x) const {
    const T s = T(1) / (T(1) + Math::exp(-x));
    return dy * s * (T(1) + x * (T(1) - s));
  }
};

/// ATen's lerp.Scalar: self + weight * (end - self), computed from the end
/// nearer to the weight (ATen's lerp, exact at weight 0 and 1).
template <typename T, typename Math> struct LerpScalar {
  T weight;
  SPMD_RT_HOST_DEVICE T operator()(T self, T end) const {
    const T diff = end - self;
    return weight < T(0.5) ? self + weight * diff
                           : end - diff * (T(1) - weight);
  }
};

/// ATen's where.self: `condition ? self : other`, the condition given as T
/// (0 or 1, converted from i1).
template <typename T, typename Math> struct WhereSelf {
  SPMD_RT_HOST_DEVICE T operator()(T condition, T self, T other) const {
    return condition != T(0) ? self : other;
  }
};

//===----------------------------------------------------------------------===//
// Truth values
//===----------------------------------------------------------------------===//

// Ops with `kGivesBool` compute in their first input's dtype (f64 where it
// is an integer and a scalar is not integral: ATen's promotion) and return
// 1 or 0 there; out, of dtype i1, holds whether that is nonzero.

/// ATen's eq.Scalar.
template <typename T, typename Math> struct EqScalar {
  static constexpr bool kGivesBool = true;
  T other;
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    return self == other ? T(1) : T(0);
  }
};

/// ATen's comparisons of self with a Scalar (ne, lt, le, gt, ge .Scalar)
/// and of two tensors (eq, ne, lt, le, gt, ge .Tensor), by predicate.
struct Ne {
  template <typename T> SPMD_RT_HOST_DEVICE static bool test(T a, T b) {
    return a != b;
  }
};
struct Lt {
  template <typename T> SPMD_RT_HOST_DEVICE static bool test(T a, T b) {
    return a < b;
  }
};
struct Le {
  template <typename T> SPMD_RT_HOST_DEVICE static bool test(T a, T b) {
    return a <= b;
  }
};
struct Gt {
  template <typename T> SPMD_RT_HOST_DEVICE static bool test(T a, T b) {
    return a > b;
  }
};
struct Ge {
  template <typename T> SPMD_RT_HOST_DEVICE static bool test(T a, T b) {
    return a >= b;
  }
};
struct Eq {
  template <typename T> SPMD_RT_HOST_DEVICE static bool test(T a, T b) {
    return a == b;
  }
};
template <typename T, typename Math, typename Pred> struct CompareScalar {
  static constexpr bool kGivesBool = true;
  T other;
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    return Pred::test(self, other) ? T(1) : T(0);
  }
};
template <typename T, typename Math, typename Pred> struct CompareTensor {
  static constexpr bool kGivesBool = true;
  SPMD_RT_HOST_DEVICE T operator()(T self, T other) const {
    return Pred::test(self, other) ? T(1) : T(0);
  }
};
template <typename T, typename M> using NeScalar = CompareScalar<T, M, Ne>;
template <typename T, typename M> using LtScalar = CompareScalar<T, M, Lt>;
template <typename T, typename M> using LeScalar = CompareScalar<T, M, Le>;
template <typename T, typename M> using GtScalar = CompareScalar<T, M, Gt>;
template <typename T, typename M> using GeScalar = CompareScalar<T, M, Ge>;
template <typename T, typename M> using EqTensor = CompareTensor<T, M, Eq>;
template <typename T, typename M> using NeTensor = CompareTensor<T, M, Ne>;
template <typename T, typename M> using LtTensor = CompareTensor<T, M, Lt>;
template <typename T, typename M> using LeTensor = CompareTensor<T, M, Le>;
template <typename T, typename M> using GtTensor = CompareTensor<T, M, Gt>;
template <typename T, typename M> using GeTensor = CompareTensor<T, M, Ge>;

/// ATen's logical_not: whether self is zero.
template <typename T, typename Math> struct LogicalNot {
  static constexpr bool kGivesBool = true;
  SPMD_RT_HOST_DEVICE T operator()(T self) const {
    return self == T(0) ? T(1) : T(0);
  }
};

//===----------------------------------------------------------------------===//
// Dropout
//===----------------------------------------------------------------------===//

/// ATen's native_dropout_backward: grad_output * mask * scale.
template <typename T, typename Math> struct NativeDropoutBackward {
  T scale;
  SPMD_RT_HOST_DEVICE T operator()(T grad, T mask) const {
    return grad * mask * scale;
  }
};

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

/// Whether `Op` takes its scalars in out's storage type (ATen's scalar_t)
/// rather than the type it computes in (opmath_t): they differ for bf16.
template <typename Op, typename = void>
struct ScalarsInStorageType : std::false_type {};
template <typename Op>
struct ScalarsInStorageType<Op,
                            std::void_t<decltype(Op::kScalarsInStorageType)>>
    : std::bool_constant<Op::kScalarsInStorageType> {};

/// A functor template as a value.
template <template <typename, typename> class Op> struct OpTag {
  template <typename T, typename Math> using Type = Op<T, Math>;
};

/// Calls `fn(OpTag<Op>{})` for the Op at index `variant` of `Ops`, which
/// the entry's `variant` expression checked.
template <template <typename, typename> class... Ops, typename Fn>
void withVariant(int64_t variant, Fn &&fn) {
  int64_t k = 0;
  (void)((k++ == variant && (fn(OpTag<Ops>{}), true)) || ...);
}

/// The inputs of a pointwise entry as the engines take them.
template <typename... Inputs>
std::array<const SpmdBuffer *, sizeof...(Inputs)>
pointwiseInputs(Inputs... inputs) {
  return {inputs...};
}

/// Whether `Op` gives a truth value (its `kGivesBool`).
template <typename Op, typename = void> struct GivesBool : std::false_type {};
template <typename Op>
struct GivesBool<Op, std::void_t<decltype(Op::kGivesBool)>>
    : std::bool_constant<Op::kGivesBool> {};

/// ATen's promotion of two tensor dtypes (promoteTypes): bool < integers <
/// floats, the wider of two of a kind; bf16 with f16 gives f32.
inline int32_t promoteDtypes(int32_t a, int32_t b) {
  auto rank = [](int32_t t) {
    switch (t) {
    case SPMD_I1:
      return 0;
    case SPMD_I32:
      return 1;
    case SPMD_I64:
      return 2;
    case SPMD_F16:
    case SPMD_BF16:
      return 3;
    case SPMD_F32:
      return 4;
    default:
      return 5;
    }
  };
  if (a == b)
    return a;
  if (rank(a) == 3 && rank(b) == 3)
    return SPMD_F32;
  return rank(a) < rank(b) ? b : a;
}

/// The dtype a truth-valued op computes in: its inputs' promoted one, or
/// f64 when that is an integer or bool and a scalar is not integral
/// (eq(x, 0.5) on integers is false everywhere, as in ATen).
template <size_t N, typename... Scalars>
int32_t truthComputeDtype(const std::array<const SpmdBuffer *, N> &ins,
                          const std::tuple<Scalars...> &scalars) {
  int32_t dtype = ins[0]->dtype;
  for (size_t k = 1; k < N; ++k)
    dtype = promoteDtypes(dtype, ins[k]->dtype);
  if (dtype == SPMD_F32 || dtype == SPMD_F64 || dtype == SPMD_BF16 ||
      dtype == SPMD_F16)
    return dtype;
  bool integral = std::apply(
      [](auto... s) {
        return (... &&
                (static_cast<double>(s) == std::trunc(static_cast<double>(s))));
      },
      scalars);
  return integral ? dtype : SPMD_F64;
}

/// Runs variant `variant` of `Ops` over out with a backend's `Engine`:
///   - `Engine::elementwise<Set, N>(kernel, out, ins, makeOp)`, its loops,
///     which dispatch on out's dtype T within Set and maps
///     `makeOp(T{})` over out with the inputs broadcast;
///   - `Engine::Compute<T>`, the type the ops compute in for out's dtype T;
///   - `Engine::Math`, its math;
///   - `Engine::scalar<T, Op>(value)`, a scalar of the entry in Op's type;
///   - `Engine::Temporary(bytes, kernel)`, the backend's memory for a
///     temporary (its `data()`), and `Engine::copy(out, self)`, its
///     converting copy: truth-valued ops compute into a temporary of their
///     compute dtype (out's `Set` is then those dtypes), copied into out.
template <typename Engine, unsigned Set,
          template <typename, typename> class... Ops, size_t N,
          typename... Scalars>
void pointwise(const char *kernel, SpmdBuffer *out,
               const std::array<const SpmdBuffer *, N> &ins, int64_t variant,
               std::tuple<Scalars...> scalars) {
  withVariant<Ops...>(variant, [&](auto tag) {
    using Tag = decltype(tag);
    auto run = [&](SpmdBuffer *result) {
      Engine::template elementwise<Set, N>(kernel, result, ins, [&](auto type) {
        using T = decltype(type);
        using Op =
            typename Tag::template Type<typename Engine::template Compute<T>,
                                        typename Engine::Math>;
        return std::apply(
            [](auto... s) { return Op{Engine::template scalar<T, Op>(s)...}; },
            scalars);
      });
    };
    using Probe = typename Tag::template Type<double, typename Engine::Math>;
    if constexpr (GivesBool<Probe>::value) {
      if (out->dtype != SPMD_I1)
        fatalDType(kernel, out->dtype, " result (expected i1)");
      const int32_t dtype = truthComputeDtype(ins, scalars);
      typename Engine::Temporary storage(
          out->numel * static_cast<int64_t>(spmd_rt_dtype_size(dtype)), kernel);
      SpmdBuffer temporary = *out;
      temporary.dtype = dtype;
      temporary.data = storage.data();
      run(&temporary);
      Engine::copy(out, &temporary);
    } else {
      run(out);
    }
  });
}

/// An SPMD_RT_POINTWISE entry of KernelList.def as a backend's entry point,
/// run by `pointwise` with the backend's `PointwiseEngine`. Include
/// KernelList.def in the backend's namespace with this as SPMD_RT_POINTWISE
/// and SPMD_RT_KERNEL empty.
#define SPMD_RT_DEFINE_POINTWISE(name, params, args, dtypes, inputs, scalars,  \
                                 variant, ...)                                 \
  void spmd_rt_##name params {                                                 \
    const char *kernel = "spmd_rt_" #name;                                     \
    const int64_t index = variant;                                             \
    pointwise<PointwiseEngine, dtypes, __VA_ARGS__>(                           \
        kernel, out, pointwiseInputs inputs, index, std::make_tuple scalars);  \
  }

} // namespace spmd::rt

#endif // SPMD_RUNTIME_POINTWISE_H
