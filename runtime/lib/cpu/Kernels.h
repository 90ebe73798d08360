//===- Kernels.h - shared machinery of the CPU kernels ----------*- C++ -*-===//
//
// What every kernel of runtime/lib/cpu/ builds on: dtype dispatch and
// conversion, shape checks, and the strided iteration that implements
// numpy/ATen broadcasting (one engine for elementwise ops, expand, permute,
// reductions and the random kernels).
//
// Private to the runtime: plain C++17, no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_CPU_KERNELS_H
#define SPMD_RUNTIME_CPU_KERNELS_H

#include "../Backends.h"
#include "../Checks.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spmd::rt {

/// Marks a hot loop: GCC compiles it twice, for x86-64-v3 (AVX2, FMA) and
/// for the baseline the build targets, and picks one at load time (function
/// multiversioning), so kernels use AVX2 wherever the CPU has it. Defining
/// SPMD_RT_HOT empty on the command line builds the baseline only.
#ifndef SPMD_RT_HOT
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11 &&              \
    defined(__x86_64__) && defined(__linux__)
#define SPMD_RT_HOT __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SPMD_RT_HOT
#endif
#endif

//===----------------------------------------------------------------------===//
// Vectorisable math
//===----------------------------------------------------------------------===//

// libm calls keep loops scalar; these float versions are branch-free, so a
// loop calling them vectorises. They match ATen's vectorised CPU kernels to
// float rounding; f64 goes through libm.
namespace math {

inline uint32_t floatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}
inline float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
/// cond ? a : b as a bit blend: with -ftrapping-math GCC does not
/// if-convert chained float selects, and a branch stops vectorisation.
inline float select(bool cond, float a, float b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return bitsToFloat((floatToBits(a) & mask) | (floatToBits(b) & ~mask));
}
inline double select(bool cond, double a, double b) {
  const uint64_t mask = 0u - static_cast<uint64_t>(cond);
  uint64_t x, y;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  x = (x & mask) | (y & ~mask);
  std::memcpy(&a, &x, sizeof a);
  return a;
}

/// Cephes expf (~1 ulp, like ATen's Sleef exp): n = round(x / ln 2), a
/// degree-6 polynomial of the remainder, times 2^n. 0 below the normal
/// range, inf above, NaN propagates.
inline float exp(float x) {
  const float kHi = 88.72283935546875f, kLo = -87.33654475f;
  float c = select(x < kLo, kLo, x);
  c = select(c > kHi, kHi, c);
  // Round to nearest by adding 1.5 * 2^23 (needs no SSE4.1 round).
  const float kShift = 12582912.0f;
  const float n = (c * 1.44269504088896341f + kShift) - kShift;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  // y * 2^(n - 1) * 2 keeps n = 128 in the normal exponent range. (A NaN n
  // is not converted to int, which is undefined; y is NaN anyway.)
  const int32_t exponent = static_cast<int32_t>(select(n != n, 0.0f, n));
  const uint32_t biased = static_cast<uint32_t>(exponent + 126);
  const float scaled = y * bitsToFloat(biased << 23) * 2.0f;
  return select(x > kHi, std::numeric_limits<float>::infinity(),
                select(x < kLo, 0.0f, scaled));
}
inline double exp(double x) { return std::exp(x); }

/// ATen's vectorised float erf (Vectorized<float>::erf, Abramowitz-Stegun
/// 7.1.26): sign(x) * (1 - t * P(t) * exp(-x^2)), t = 1 / (1 + 0.3275911|x|);
/// absolute error below 1.5e-7.
/// `expNegSquare` is exp(-x^2), for callers that need it too.
inline float erf(float x, float expNegSquare) {
  const float t = 1.0f / (0.3275911f * std::fabs(x) + 1.0f);
  float p = 1.061405429f * t + -1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t + -0.284496736f;
  p = p * t + 0.254829592f;
  return std::copysign(1.0f - p * t * expNegSquare, x);
}
inline float erf(float x) { return erf(x, math::exp(-(x * x))); }
inline double erf(double x, double) { return std::erf(x); }
inline double erf(double x) { return std::erf(x); }

/// Cephes tanhf (~2e-7 relative): an odd polynomial below |x| = 0.625,
/// 1 - 2 / (exp(2|x|) + 1) above.
inline float tanh(float x) {
  const float a = std::fabs(x);
  const float z = x * x;
  float p = -5.70498872745e-3f;
  p = p * z + 2.06390887954e-2f;
  p = p * z + -5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z + -3.33332819422e-1f;
  const float small = p * z * x + x;
  const float large = 1.0f - 2.0f / (math::exp(2.0f * a) + 1.0f);
  return select(a < 0.625f, small, std::copysign(large, x));
}
inline double tanh(double x) { return std::tanh(x); }

} // namespace math

//===----------------------------------------------------------------------===//
// Strided iteration
//===----------------------------------------------------------------------===//

/// An index space walked by `N` operands, each with its own strides (in
/// elements, 0 for a broadcast dim).
template <size_t N> struct StridedSpace {
  int32_t rank = 0;
  int64_t shape[SPMD_MAX_RANK] = {};
  int64_t strides[N][SPMD_MAX_RANK] = {};

  bool empty() const {
    for (int32_t d = 0; d < rank; ++d)
      if (shape[d] == 0)
        return true;
    return false;
  }

  /// Drops size-1 dims and merges neighbours that are contiguous for every
  /// operand, so that the inner loops run as long as possible.
  void coalesce() {
    int32_t r = 0;
    for (int32_t d = 0; d < rank; ++d) {
      if (shape[d] == 1)
        continue;
      bool merge = r > 0;
      for (size_t k = 0; k < N && merge; ++k)
        merge = strides[k][r - 1] == strides[k][d] * shape[d];
      if (merge) {
        shape[r - 1] *= shape[d];
        for (size_t k = 0; k < N; ++k)
          strides[k][r - 1] = strides[k][d];
        continue;
      }
      shape[r] = shape[d];
      for (size_t k = 0; k < N; ++k)
        strides[k][r] = strides[k][d];
      ++r;
    }
    rank = r;
  }

  /// Moves dim `from` to position `to`, shifting the dims in between.
  void moveDim(int32_t from, int32_t to) {
    auto move = [&](int64_t *a) {
      int64_t v = a[from];
      if (from < to)
        for (int32_t d = from; d < to; ++d)
          a[d] = a[d + 1];
      else
        for (int32_t d = from; d > to; --d)
          a[d] = a[d - 1];
      a[to] = v;
    };
    move(shape);
    for (size_t k = 0; k < N; ++k)
      move(strides[k]);
  }
};

/// Calls `fn(offsets)` for every index of the outer `s.rank - innerDims`
/// dims of `s` (row-major), with each operand's element offset. Nothing for
/// an empty space.
template <size_t N, typename Fn>
void forEachOuter(const StridedSpace<N> &s, int32_t innerDims, Fn &&fn) {
  if (s.empty())
    return;
  int32_t outer = s.rank - innerDims;
  int64_t offsets[N] = {};
  int64_t index[SPMD_MAX_RANK] = {};
  while (true) {
    fn(static_cast<const int64_t *>(offsets));
    int32_t d = outer - 1;
    for (; d >= 0; --d) {
      if (++index[d] < s.shape[d]) {
        for (size_t k = 0; k < N; ++k)
          offsets[k] += s.strides[k][d];
        break;
      }
      index[d] = 0;
      for (size_t k = 0; k < N; ++k)
        offsets[k] -= s.strides[k][d] * (s.shape[d] - 1);
    }
    if (d < 0)
      return;
  }
}

/// Calls `fn(offsets, count, innerStrides)` for every row (innermost dim) of
/// `s`; a rank-0 space is one row of one element.
template <size_t N, typename Fn>
void forEachRow(const StridedSpace<N> &s, Fn &&fn) {
  int64_t inner[N] = {};
  if (s.rank == 0) {
    int64_t offsets[N] = {};
    fn(static_cast<const int64_t *>(offsets), int64_t(1),
       static_cast<const int64_t *>(inner));
    return;
  }
  for (size_t k = 0; k < N; ++k)
    inner[k] = s.strides[k][s.rank - 1];
  int64_t count = s.shape[s.rank - 1];
  forEachOuter(s, 1, [&](const int64_t *offsets) {
    fn(offsets, count, static_cast<const int64_t *>(inner));
  });
}

//===----------------------------------------------------------------------===//
// Row reductions
//===----------------------------------------------------------------------===//

// GCC does not vectorise a float fold without -ffast-math (it would
// reassociate), so row reductions run on explicit 16-byte GCC vectors:
// several independent accumulators, merged at the end (the result differs
// from a sequential fold by rounding only, like ATen's vectorised
// reductions). 16 bytes is the baseline register width, so the vectors
// never change the ABI between the multiversioned clones.
namespace simd {

template <typename T> struct PackOf {
  typedef T type __attribute__((vector_size(16)));
};
/// 16 bytes of T.
template <typename T> using Pack = typename PackOf<T>::type;
template <typename T> constexpr int64_t kPackWidth = 16 / sizeof(T);

/// kPackWidth<Acc> consecutive elements of `p`, converted to Acc.
template <typename Acc, typename T> inline Pack<Acc> loadPack(const T *p) {
  typedef T Raw __attribute__((vector_size(kPackWidth<Acc> * sizeof(T))));
  Raw raw;
  std::memcpy(&raw, p, sizeof raw);
  if constexpr (std::is_same_v<T, Acc>)
    return raw;
  else
    return __builtin_convertvector(raw, Pack<Acc>);
}

/// What a fold's `term(lanes, i)` gets: `lanes.load(p, i)` is element i of
/// p as Acc (One) or the Pack of elements i, i + 1, ... (Packed).
template <typename Acc> struct One {
  template <typename T> Acc load(const T *p, int64_t i) const {
    return static_cast<Acc>(p[i]);
  }
};
template <typename Acc> struct Packed {
  template <typename T> Pack<Acc> load(const T *p, int64_t i) const {
    return loadPack<Acc>(p + i);
  }
};

} // namespace simd

/// Function objects of the folds, for scalars and packs alike. (Function
/// objects, not functions: a function pointer would not be inlined into the
/// multiversioned loops.)
struct AddOp {
  template <typename V> V operator()(V a, V b) const { return a + b; }
};
struct MaxOp {
  /// NaN propagates, as in ATen's vectorised maximum.
  template <typename V> V operator()(V a, V b) const {
    return (a > b) | (a != a) ? a : b;
  }
};

/// Folds `op` over the n terms `term(lanes, i)` (see simd::One, Packed),
/// starting from op's `identity`.
template <typename Acc, typename Term, typename Op>
SPMD_RT_HOT Acc foldRow(int64_t n, Acc identity, const Term &term,
                        const Op &op) {
  using P = simd::Pack<Acc>;
  constexpr int64_t kWidth = simd::kPackWidth<Acc>;
  const simd::Packed<Acc> packed;
  const simd::One<Acc> one;
  P a0 = P{} + identity, a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * kWidth <= n; i += 4 * kWidth) {
    a0 = op(a0, term(packed, i));
    a1 = op(a1, term(packed, i + kWidth));
    a2 = op(a2, term(packed, i + 2 * kWidth));
    a3 = op(a3, term(packed, i + 3 * kWidth));
  }
  for (; i + kWidth <= n; i += kWidth)
    a0 = op(a0, term(packed, i));
  a0 = op(op(a0, a1), op(a2, a3));
  Acc result = identity;
  for (; i < n; ++i)
    result = op(result, term(one, i));
  for (int64_t j = 0; j < kWidth; ++j)
    result = op(result, a0[j]);
  return result;
}

/// Sum in Acc of the n terms `term(lanes, i)`, computed as T: T partial
/// sums over blocks, added up in Acc. A two-level cascade like ATen's: close
/// to Acc's precision (double for float rows) at the speed of T vectors.
template <typename Acc, typename T, typename Term>
Acc sumRow(int64_t n, const Term &term) {
  constexpr int64_t kBlock = 512;
  Acc total = 0;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    auto shifted = [&](auto lanes, int64_t i) {
      return term(lanes, begin + i);
    };
    total += foldRow<T>(std::min(kBlock, n - begin), T(0), shifted, AddOp());
  }
  return total;
}

/// dst[i] += src[i]: a row added into accumulators (reductions over outer
/// dims, bias gradients).
template <typename Acc, typename T>
SPMD_RT_HOT void addRow(Acc *dst, const T *src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] += src[i];
}

//===----------------------------------------------------------------------===//
// Elementwise engine
//===----------------------------------------------------------------------===//

namespace detail {
/// Operand access in an inner loop: contiguous, loop-invariant (stride 0)
/// or strided. Passed by value so the compiler sees no aliasing state.
template <typename T> struct Contiguous {
  const T *p;
  T operator[](int64_t i) const { return p[i]; }
};
template <typename T> struct Invariant {
  T v;
  T operator[](int64_t) const { return v; }
};
template <typename T> struct Strided {
  const T *p;
  int64_t s;
  T operator[](int64_t i) const { return p[i * s]; }
};

template <typename T, typename Op, typename... Args>
SPMD_RT_HOT void mapLoop(T *out, int64_t n, const Op &op, Args... args) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = op(args[i]...);
}

/// The inner loop where operand k is loop-invariant iff bit k of `Mask`.
template <unsigned Mask, typename T, typename Op, size_t... I>
inline void mapRowMasked(T *out, const T *const *in, int64_t n, const Op &op,
                         std::index_sequence<I...>) {
  auto operand = [](auto invariant, const T *p) {
    if constexpr (decltype(invariant)::value)
      return Invariant<T>{*p};
    else
      return Contiguous<T>{p};
  };
  mapLoop(out, n, op,
          operand(std::integral_constant<bool, ((Mask >> I) & 1u) != 0>(),
                  in[I])...);
}

template <typename T, typename Op, size_t... I>
inline void mapRowStrided(T *out, int64_t outStep, const T *const *in,
                          const int64_t *steps, int64_t n, const Op &op,
                          std::index_sequence<I...>) {
  auto loop = [&](auto... args) {
    for (int64_t i = 0; i < n; ++i)
      out[i * outStep] = op(args[i]...);
  };
  loop(Strided<T>{in[I], steps[I]}...);
}

template <typename T, typename Op, size_t N, unsigned... M>
inline void mapRowDispatch(unsigned mask, T *out, const T *const *in, int64_t n,
                           const Op &op,
                           std::integer_sequence<unsigned, M...>) {
  (void)((mask == M &&
          (mapRowMasked<M>(out, in, n, op, std::make_index_sequence<N>()),
           true)) ||
         ...);
}
} // namespace detail

/// out[i] = op(in_0[.], ..., in_{N-1}[.]) over the space `s` whose operand 0
/// is `out` (contiguous) and operand k + 1 is input k. Inner loops are
/// specialised for contiguous and loop-invariant inputs.
template <typename T, size_t N, typename Op>
void mapStrided(StridedSpace<N + 1> s, T *out,
                const std::array<const T *, N> &in, const Op &op) {
  s.coalesce();
  forEachRow(s, [&](const int64_t *off, int64_t n, const int64_t *step) {
    const T *row[N];
    unsigned mask = 0;
    bool strided = step[0] != 1 && n > 1;
    for (size_t k = 0; k < N; ++k) {
      row[k] = in[k] + off[k + 1];
      if (step[k + 1] == 0)
        mask |= 1u << k;
      else if (step[k + 1] != 1)
        strided = true;
    }
    if (!strided) {
      detail::mapRowDispatch<T, Op, N>(
          mask, out + off[0], row, n, op,
          std::make_integer_sequence<unsigned, (1u << N)>());
      return;
    }
    // Rare (permutes, transposed broadcasts): general strides.
    detail::mapRowStrided(out + off[0], step[0], row, step + 1, n, op,
                          std::make_index_sequence<N>());
  });
}

/// out = op(inputs...) with the inputs (already of type T, with the shapes of
/// `ins`) broadcast to out's shape; contiguous same-shape operands take one
/// flat loop.
template <typename T, size_t N, typename Op>
void mapBroadcast(const char *kernel, SpmdBuffer *out,
                  const std::array<const SpmdBuffer *, N> &ins,
                  const std::array<const T *, N> &in, const Op &op) {
  bool flat = true;
  for (size_t k = 0; k < N; ++k)
    flat = flat && sameShape(ins[k], out);
  if (flat) {
    detail::mapRowMasked<0u>(dataOf<T>(out), in.data(), out->numel, op,
                             std::make_index_sequence<N>());
    return;
  }
  StridedSpace<N + 1> s;
  s.rank = out->rank;
  for (int32_t d = 0; d < out->rank; ++d)
    s.shape[d] = out->shape[d];
  contiguousStrides(out->rank, out->shape, s.strides[0]);
  for (size_t k = 0; k < N; ++k)
    broadcastStrides(kernel, ins[k], out->rank, out->shape, s.strides[k + 1]);
  mapStrided<T, N>(s, dataOf<T>(out), in, op);
}

/// `mapBroadcast` for inputs of any dtype: those whose dtype is not T are
/// converted first.
template <typename T, size_t N, typename Op>
void mapInputs(const char *kernel, SpmdBuffer *out,
               const std::array<const SpmdBuffer *, N> &ins, const Op &op) {
  std::vector<T> storage[N];
  std::array<const T *, N> in;
  for (size_t k = 0; k < N; ++k)
    in[k] = dataAs<T>(ins[k], storage[k], kernel);
  mapBroadcast<T, N>(kernel, out, ins, in, op);
}

} // namespace spmd::rt

#endif // SPMD_RUNTIME_CPU_KERNELS_H
