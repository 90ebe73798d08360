//===- Checks.h - dtypes, dtype dispatch and shape checks -------*- C++ -*-===//
//
// What the CPU kernels (runtime/lib/cpu/) and the CUDA kernels
// (runtime/lib/cuda/) share on the host side: the C++ type of each SpmdDType,
// `dispatch` (one instantiation per dtype), and the shape checks that end the
// job with a message naming the kernel (implemented in cpu/Common.cpp).
//
// Private to the runtime: plain C++17, no LLVM/MLIR, no CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_CHECKS_H
#define SPMD_RUNTIME_CHECKS_H

#include "spmd/Runtime/Runtime.h"

#include <array>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace spmd::rt {

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

/// Storage of SPMD_I1: one byte holding 0 or 1.
using Bool8 = uint8_t;

template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> {
  static constexpr int32_t value = SPMD_F32;
};
template <> struct DTypeOf<double> {
  static constexpr int32_t value = SPMD_F64;
};
template <> struct DTypeOf<int64_t> {
  static constexpr int32_t value = SPMD_I64;
};
template <> struct DTypeOf<int32_t> {
  static constexpr int32_t value = SPMD_I32;
};
template <> struct DTypeOf<Bool8> { static constexpr int32_t value = SPMD_I1; };

/// The dtype sets a kernel accepts for its result (`dispatch`).
enum DTypeSet : unsigned {
  kFloat = 1, // f32, f64
  kInt = 2,   // i64, i32
  kBool = 4,  // i1
  kNumeric = kFloat | kInt,
  kAll = kNumeric | kBool,
  // bf16: the CUDA kernels only (cuda/Cuda.h dispatchDevice); `dispatch`
  // ignores this bit, so a CPU kernel given bf16 reports it unsupported.
  kBFloat16 = 8,
};


/// Ends the job: `<kernel>: unsupported dtype <dtype>`.
[[noreturn]] void fatalDType(const char *kernel, int32_t dtype,
                             const char *what = "");

/// Calls `fn(T{})` with the C++ type of `dtype` when it is in `Set`, so a
/// kernel body is instantiated once per dtype and its loops never switch on
/// the dtype per element; any other dtype is fatal.
template <unsigned Set, typename Fn>
void dispatch(int32_t dtype, const char *kernel, Fn &&fn,
              const char *what = "") {
  switch (dtype) {
  case SPMD_F32:
    if constexpr ((Set & kFloat) != 0)
      return fn(float{});
    break;
  case SPMD_F64:
    if constexpr ((Set & kFloat) != 0)
      return fn(double{});
    break;
  case SPMD_I64:
    if constexpr ((Set & kInt) != 0)
      return fn(int64_t{});
    break;
  case SPMD_I32:
    if constexpr ((Set & kInt) != 0)
      return fn(int32_t{});
    break;
  case SPMD_I1:
    if constexpr ((Set & kBool) != 0)
      return fn(Bool8{});
    break;
  default:
    break;
  }
  fatalDType(kernel, dtype, what);
}

/// ATen's conversion of a value to `To` (to bool: nonzero).
template <typename To, typename From> inline To convertElem(From v) {
  if constexpr (std::is_same_v<To, Bool8>)
    return v != From(0);
  else
    return static_cast<To>(v);
}

/// Writes the `b->numel` elements of `b` converted to `T` into `dst`.
template <typename T>
void convertTo(T *dst, const SpmdBuffer *b, const char *kernel) {
  dispatch<kAll>(b->dtype, kernel, [&](auto tag) {
    using S = decltype(tag);
    const S *src = static_cast<const S *>(b->data);
    for (int64_t i = 0, e = b->numel; i < e; ++i)
      dst[i] = convertElem<T>(src[i]);
  });
}

/// The elements of `b` as `T`: `b`'s own data when it holds `T`, else a
/// converted copy kept in `storage` (the slower path for mixed dtypes).
template <typename T>
const T *dataAs(const SpmdBuffer *b, std::vector<T> &storage,
                const char *kernel) {
  if (b->dtype == DTypeOf<T>::value)
    return static_cast<const T *>(b->data);
  storage.resize(static_cast<size_t>(b->numel));
  convertTo(storage.data(), b, kernel);
  return storage.data();
}

template <typename T> inline T *dataOf(SpmdBuffer *b) {
  return static_cast<T *>(b->data);
}
template <typename T> inline const T *dataOf(const SpmdBuffer *b) {
  return static_cast<const T *>(b->data);
}

//===----------------------------------------------------------------------===//
// Shape checks
//===----------------------------------------------------------------------===//

/// "[2, 3]".
std::string shapeStr(const SpmdBuffer *b);
bool sameShape(const SpmdBuffer *a, const SpmdBuffer *b);
/// Fatal unless `b` has rank `rank`.
void checkRank(const char *kernel, const char *name, const SpmdBuffer *b,
               int32_t rank);
/// Fatal unless `a` and `b` have the same shape.
void checkSameShape(const char *kernel, const char *nameA, const SpmdBuffer *a,
                    const char *nameB, const SpmdBuffer *b);
/// Fatal unless `a` and `b` hold the same number of elements.
void checkSameNumel(const char *kernel, const char *nameA, const SpmdBuffer *a,
                    const char *nameB, const SpmdBuffer *b);
/// Fatal unless `0 <= dim < b->rank`.
void checkDim(const char *kernel, const SpmdBuffer *b, int64_t dim);
/// Checks [batch..., n, k] x [batch..., k, m] -> out [batch..., n, m] for
/// `rank`-D operands (2: mm, 3: bmm), either operand stored transposed in
/// its last two dims, and returns {batch, n, k, m}.
std::array<int64_t, 4> checkMatmul(const char *kernel, const SpmdBuffer *out,
                                   const SpmdBuffer *a, const SpmdBuffer *b,
                                   int32_t rank, bool transA, bool transB);
/// Product of shape[begin, end).
int64_t product(const int64_t *shape, int64_t begin, int64_t end);

/// Row-major strides (in elements) of `shape`.
void contiguousStrides(int32_t rank, const int64_t *shape, int64_t *strides);
/// Strides of `in` read as a tensor of `shape` (rank `rank`) under
/// numpy/ATen broadcasting: dims right-aligned, stride 0 where `in` has size
/// 1 or lacks the dim. Fatal when `in` does not broadcast to `shape`.
void broadcastStrides(const char *kernel, const SpmdBuffer *in, int32_t rank,
                      const int64_t *shape, int64_t *strides);

} // namespace spmd::rt

#endif // SPMD_RUNTIME_CHECKS_H
