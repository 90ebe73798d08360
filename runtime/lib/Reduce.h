//===- Reduce.h - reductions over dims of both backends ---------*- C++ -*-===//
//
// Each reduction kernel of KernelList.def (its SPMD_RT_REDUCTION entries)
// folds self over a list of dims, `out = finish(fold(op, identity, x...))`,
// with its reducer written once here as a functor template `R<T, Acc>` that
// both backends instantiate: the CPU's loops (cpu/Reduction.cpp) and the
// CUDA kernels (cuda/Reduction.cu). T is out's element type and Acc the type
// the backend accumulates in (double for floats, float for bf16 on CUDA,
// int64 for integers), so both reduce in the same precision.
//
// A reducer's identity is also what a rank with an empty shard of a reduced
// dim contributes to the Partial(op) result (the lowest value for a max), so
// the Partial is reduced across ranks exactly.
//
// Private to the runtime: plain C++17, no dependencies.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_RUNTIME_REDUCE_H
#define SPMD_RUNTIME_REDUCE_H

#include "Math.h"

#include <cstdint>
#include <limits>
#include <type_traits>

namespace spmd::rt {

/// ATen's sum: `+` from 0.
template <typename T, typename Acc> struct SumReducer {
  /// The CPU runs sums with its vectorised cascade (ATen's order).
  static constexpr bool kIsSum = true;
  SPMD_RT_HOST_DEVICE static Acc identity() { return Acc(0); }
  SPMD_RT_HOST_DEVICE Acc operator()(Acc a, Acc b) const { return a + b; }
  /// `count` is the number of elements folded into each output.
  SPMD_RT_HOST_DEVICE static Acc finish(Acc a, int64_t) { return a; }
};

/// ATen's mean: the sum over the count; 0/0 (NaN) over no elements, as
/// torch.mean of an empty dim.
template <typename T, typename Acc> struct MeanReducer : SumReducer<T, Acc> {
  SPMD_RT_HOST_DEVICE static Acc finish(Acc a, int64_t count) {
    return a / static_cast<Acc>(count);
  }
};

/// ATen's amax: NaN propagates (a NaN wins every comparison), as in ATen's
/// max_propagate_nan; over no elements -inf, or T's lowest integer.
template <typename T, typename Acc> struct MaxReducer {
  static constexpr bool kIsSum = false;
  SPMD_RT_HOST_DEVICE static Acc identity() {
    if constexpr (std::is_floating_point_v<Acc>)
      return -std::numeric_limits<Acc>::infinity();
    else
      return static_cast<Acc>(std::numeric_limits<T>::lowest());
  }
  SPMD_RT_HOST_DEVICE Acc operator()(Acc a, Acc b) const {
    return (a > b) || (a != a) ? a : b;
  }
  SPMD_RT_HOST_DEVICE static Acc finish(Acc a, int64_t) { return a; }
};

/// ATen's any: whether some element is nonzero (inputs converted to i1);
/// false over no elements. Over shards, the Partial(max) of the ranks'.
template <typename T, typename Acc> struct AnyReducer {
  static constexpr bool kIsSum = false;
  SPMD_RT_HOST_DEVICE static Acc identity() { return Acc(0); }
  SPMD_RT_HOST_DEVICE Acc operator()(Acc a, Acc b) const {
    return (a != Acc(0)) || (b != Acc(0)) ? Acc(1) : Acc(0);
  }
  SPMD_RT_HOST_DEVICE static Acc finish(Acc a, int64_t) { return a; }
};

/// An SPMD_RT_REDUCTION entry of KernelList.def as a backend's entry point,
/// run by the backend's `reduce<Set, Reducer>`. Include KernelList.def in the
/// backend's namespace with this as SPMD_RT_REDUCTION and SPMD_RT_KERNEL
/// empty.
#define SPMD_RT_DEFINE_REDUCTION(name, params, args, dtypes, Reducer)          \
  void spmd_rt_##name params {                                                 \
    reduce<dtypes, Reducer>("spmd_rt_" #name, out, self, n, dims);             \
  }

} // namespace spmd::rt

#endif // SPMD_RUNTIME_REDUCE_H
