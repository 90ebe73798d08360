//===- Math.h - element math shared by the CPU and CUDA kernels -*- C++ -*-===//
//
// Scalar math that the CPU kernels (runtime/lib/cpu/) and the CUDA kernels
// (runtime/lib/cuda/) run alike, so that both compute the same values with
// the same code. Every function is inline and, under nvcc, `__host__
// __device__` (like Philox.h), so it runs in host loops and in kernels.
//
// Private to the runtime: plain C++17, no dependencies.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_MATH_H
#define SPMD_RUNTIME_MATH_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define SPMD_RT_HOST_DEVICE __host__ __device__
#else
#define SPMD_RT_HOST_DEVICE
#endif

namespace spmd::rt {

/// A bf16 value (its 16 bits) widened to float: exact. Host code only: the
/// CUDA kernels use __nv_bfloat16's intrinsics.
inline float bf16ToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

/// `value` rounded to bf16 (nearest even, as c10::BFloat16 and
/// __float2bfloat16 do); a NaN stays a quiet NaN.
inline uint16_t floatToBf16(float value) {
  if (std::isnan(value))
    return 0x7fc0;
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

/// ATen's integer power (powi): exact, with 1/x rules for negative exponents;
/// products wrap like ATen's (unsigned arithmetic: no undefined overflow).
template <typename T> SPMD_RT_HOST_DEVICE inline T intPow(T base, T exp) {
  if (exp < 0) {
    if (base == 1)
      return 1;
    if (base == -1)
      return (exp % 2) ? -1 : 1;
    return 0;
  }
  using U = std::make_unsigned_t<T>;
  U result = 1, factor = static_cast<U>(base);
  for (; exp; exp /= 2) {
    if (exp & 1)
      result *= factor;
    factor *= factor;
  }
  return static_cast<T>(result);
}

/// Whether `x` is NaN; false for integers.
template <typename T> SPMD_RT_HOST_DEVICE inline bool isNan(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return x != x;
  else
    return false;
}

/// The scale of the elements native_dropout keeps with probability
/// `keepProbability`: 1 / keepProbability, 0 when it is 0 (p == 1).
SPMD_RT_HOST_DEVICE inline double dropoutScale(double keepProbability) {
  return keepProbability == 0.0 ? 0.0 : 1.0 / keepProbability;
}

/// The numbers the random kernels make of an element's uniform draw u in
/// [0, 1), in double, which each backend rounds to out's dtype.
/// bernoulli.p: 1 with probability p (u < p).
struct BernoulliDraw {
  double p;
  SPMD_RT_HOST_DEVICE double operator()(float u) const {
    return static_cast<double>(u) < p ? 1.0 : 0.0;
  }
};

/// uniform: from + (to - from) * u (ATen's uniform_real_distribution).
struct UniformDraw {
  double from, to;
  SPMD_RT_HOST_DEVICE double operator()(float u) const {
    return from + (to - from) * static_cast<double>(u);
  }
};

/// exponential of rate lambd: -log1p(-u) / lambd, the inverse of its CDF.
struct ExponentialDraw {
  double lambd;
  SPMD_RT_HOST_DEVICE double operator()(float u) const {
    return -std::log1p(-static_cast<double>(u)) / lambd;
  }
};

/// Element i of arange(start, end, step): ATen computes it in double as
/// start + i * step.
SPMD_RT_HOST_DEVICE inline double arangeValue(double start, double step,
                                              int64_t i) {
  return start + static_cast<double>(i) * step;
}

} // namespace spmd::rt

#endif // SPMD_RUNTIME_MATH_H
