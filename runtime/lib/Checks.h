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
#include <cstddef>
#include <cstdint>
#include <initializer_list>
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

//===----------------------------------------------------------------------===//
// Kernel checks
//===----------------------------------------------------------------------===//

// The host-side checks of the kernels that the CPU and CUDA backends share,
// so both accept the same operands and fail with the same message. Each
// runs the checks in the order given and ends the job (spmd_rt_fatal) at the
// first that fails; `<kernel>` in a message is the `kernel` argument.

/// A tensor viewed as [outer, size, inner] around one of its dims.
struct DimLayout {
  int64_t outer, size, inner;
};
/// `b` as [product of the dims before `dim`, dim's size, product of the
/// dims after it]; `dim` must be a dim of `b`.
DimLayout layoutAround(const SpmdBuffer *b, int64_t dim);

/// Elementwise: fatal unless gelu's `approximate` is 0 (none) or 1 (tanh):
/// `<kernel>: approximate must be 0 (none) or 1 (tanh), got <a>`. Returns
/// it, the index of gelu's variant (KernelList.def).
int64_t checkApproximate(const char *kernel, int64_t approximate);

/// Elementwise: fatal unless div's `rounding_mode` is 0 (trunc) or 1
/// (floor): `<kernel>: rounding_mode must be 0 (trunc) or 1 (floor), got
/// <m>`. Returns it, the index of the variant (KernelList.def).
int64_t checkRoundingMode(const char *kernel, int64_t roundingMode);

/// Elementwise: fatal unless clamp has a bound (`<kernel>: neither min nor
/// max is given`). Returns the index of its variant (KernelList.def): 0 min
/// only, 1 max only, 2 both.
int64_t clampVariant(const char *kernel, int64_t hasMin, int64_t hasMax);

/// permute: fatal unless `n` is the rank of self and out (`<kernel>: <n>
/// dims for self <shape> and out <shape>`), then for each k in turn unless
/// dims[k] is a new dim of [0, n) (`dims is not a permutation of [0, <n>)`)
/// and out dim k has self dim dims[k]'s size (`out <shape> is not self
/// <shape> permuted`).
void checkPermute(const char *kernel, const SpmdBuffer *out,
                  const SpmdBuffer *self, int32_t n, const int64_t *dims);

/// cat: ATen's legacy rule skips 1-D empty inputs whatever out's rank.
inline bool catSkips(const SpmdBuffer *input) {
  return input->rank == 1 && input->numel == 0;
}
/// cat: checkDim(out, dim), then each input not skipped (`catSkips`) must
/// be out's shape outside `dim` (`<kernel>: input <k> of shape <shape> does
/// not fit out <shape> along dim <dim>`), then their sizes along `dim` must
/// add up to out's (`inputs sum to <total> along dim <dim>, out <shape>`).
/// Returns out's layout around `dim`.
DimLayout checkCat(const char *kernel, const SpmdBuffer *out, int32_t n,
                   const SpmdBuffer *const *inputs, int64_t dim);

/// slice: checkDim(self, dim), then out must be self's elements [start,
/// start + out's size) along `dim`, or self without `dim` for a select of
/// element `start` (`<kernel>: out <shape> is not a slice of self <shape>
/// at <start> along dim <dim>`). Returns self's layout around `dim` with
/// `size` the number of elements taken along it.
DimLayout checkSlice(const char *kernel, const SpmdBuffer *out,
                     const SpmdBuffer *self, int64_t dim, int64_t start,
                     int64_t step);

/// slice_scatter: out is self's shape, and src a slice of self (checkSlice,
/// same rank). Returns self's layout around `dim` with `size` src's length
/// along it.
DimLayout checkSliceScatter(const char *kernel, const SpmdBuffer *out,
                            const SpmdBuffer *self, const SpmdBuffer *src,
                            int64_t dim, int64_t start, int64_t step);

/// constant_pad_nd: `n` even, at most twice self's rank, and out self's
/// shape with dim rank-1-k grown by pad[2k] + pad[2k+1] (`<kernel>: out
/// <shape> is not self <shape> padded by <n> amounts`).
void checkConstantPad(const char *kernel, const SpmdBuffer *out,
                      const SpmdBuffer *self, int32_t n, const int64_t *pad);

/// cumsum: checkDim(self, dim) and out self's shape. Returns self's layout
/// around `dim`.
DimLayout checkCumsum(const char *kernel, const SpmdBuffer *out,
                      const SpmdBuffer *self, int64_t dim);

/// gather: checkDim(self, dim), out index's shape, and index of self's rank
/// and no larger outside `dim` (`<kernel>: index <shape> does not fit self
/// <shape> outside dim <dim>`).
void checkGather(const char *kernel, const SpmdBuffer *out,
                 const SpmdBuffer *self, int64_t dim, const SpmdBuffer *index);

/// scatter: checkDim(self, dim), out self's shape and dtype, src self's
/// dtype, and index of self's rank, no larger than src anywhere nor than
/// self outside `dim` (`<kernel>: index <shape> does not fit ...`).
void checkScatter(const char *kernel, const SpmdBuffer *out,
                  const SpmdBuffer *self, int64_t dim, const SpmdBuffer *index,
                  const SpmdBuffer *src);

/// topk: checkDim(self, dim), 0 <= k <= self's size along `dim`, values of
/// self's dtype and indices (i64) both self's shape with k at `dim`.
/// Returns self's layout around `dim`.
DimLayout checkTopk(const char *kernel, const SpmdBuffer *values,
                    const SpmdBuffer *indices, const SpmdBuffer *self,
                    int64_t k, int64_t dim);

/// index: 1 <= n <= self's rank, out the indices' broadcast shape followed
/// by self's dims after the n indexed ones, each index broadcasting to that
/// shape (`<kernel>: out <shape> is not self <shape> indexed by <n>
/// broadcast indices`).
void checkIndex(const char *kernel, const SpmdBuffer *out,
                const SpmdBuffer *self, int32_t n,
                const SpmdBuffer *const *indices);

/// The geometry of a convolution or a pooling, spatial dims promoted to 3
/// (leading size-1 dims with a window of 1): [N, C, D, H, W] in, [N, O,
/// OD, OH, OW] out, per-dim kernel, stride, padding and dilation.
struct WindowGeometry {
  int64_t n = 1, channels = 1, outChannels = 1, groups = 1;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, pad[3] = {0, 0, 0}, dilation[3] = {1, 1, 1};
  int64_t inPlane() const { return in[0] * in[1] * in[2]; }
  int64_t outPlane() const { return out[0] * out[1] * out[2]; }
  int64_t window() const { return k[0] * k[1] * k[2]; }
};

/// convolution: input [N, C, *S] with 1 to 3 spatial dims, weight [O, C /
/// groups, *K], bias NULL or [O], one stride (>= 1), padding (>= 0) and
/// dilation (>= 1) per spatial dim, out [N, O, *P] with ATen's output size,
/// one float dtype (`<kernel>: ...` naming the mismatch).
WindowGeometry checkConvolution(const char *kernel, const SpmdBuffer *out,
                                const SpmdBuffer *input,
                                const SpmdBuffer *weight,
                                const SpmdBuffer *bias, int32_t nStride,
                                const int64_t *stride, int32_t nPadding,
                                const int64_t *padding, int32_t nDilation,
                                const int64_t *dilation, int64_t groups);

/// A pooling of self's last two dims: self [*B, H, W] (rank 3 or 4), two
/// entries per window list (stride empty: kernel_size), `pooled` [*B, OH,
/// OW] with ATen's pooled size (ceil_mode included), of self's dtype.
WindowGeometry checkPool2d(const char *kernel, const SpmdBuffer *pooled,
                           const SpmdBuffer *self, int32_t nKernelSize,
                           const int64_t *kernelSize, int32_t nStride,
                           const int64_t *stride, int32_t nPadding,
                           const int64_t *padding, int32_t nDilation,
                           const int64_t *dilation, int64_t ceilMode);

/// max_pool2d_with_indices: checkPool2d, and indices of output's shape, i64.
WindowGeometry checkMaxPool2d(const char *kernel, const SpmdBuffer *output,
                              const SpmdBuffer *indices, const SpmdBuffer *self,
                              int32_t nKernelSize, const int64_t *kernelSize,
                              int32_t nStride, const int64_t *stride,
                              int32_t nPadding, const int64_t *padding,
                              int32_t nDilation, const int64_t *dilation,
                              int64_t ceilMode);

/// The planes of a pooling whose window is not given (the adaptive poolings,
/// max pooling's backward): self [*B, H, W] (rank 3 or 4), `pooled` [*B,
/// OH, OW] with OH, OW >= 1, of self's dtype; the geometry's planes, in and
/// out.
WindowGeometry checkPooledPlanes(const char *kernel, const SpmdBuffer *pooled,
                                 const SpmdBuffer *self);

/// local_take and local_take_runs: checkDim(self, dim), then out must be
/// self's shape outside `dim` (`<kernel>: out <shape> and self <shape>
/// differ outside dim <dim>`). Returns self's layout around `dim`.
DimLayout checkLocalTake(const char *kernel, const SpmdBuffer *out,
                         const SpmdBuffer *self, int64_t dim);

/// A stack of `matrices` matrices of [rows, cols]: a tensor's last two dims.
struct MatrixStack {
  int64_t matrices, rows, cols;
};
/// triu: self must have at least 2 dims (`<kernel>: self must have at least
/// 2 dims, got <shape>`), then checkSameShape(out, self). Returns self as a
/// stack of matrices.
MatrixStack checkTriu(const char *kernel, const SpmdBuffer *out,
                      const SpmdBuffer *self);

/// A reduction over dims (SPMD_RT_REDUCTION): the dims of self to reduce
/// and how many elements each output folds (`count`), or `copy` when out is
/// to be a copy of self (no dims and out not a one-element 0-D tensor).
struct ReducedDims {
  bool copy;
  bool reduce[SPMD_MAX_RANK];
  int64_t count;
};
/// A reduction (ATen's sum, sum.dim_IntList, mean.dim, amax): with n == 0,
/// a copy when out is not 0-D with one element (nothing is checked), else
/// every dim. Otherwise checkDim each of `dims` in turn and fails on a
/// repeat (`<kernel>: dim <d> is listed twice`). Then out must be self with
/// the reduced dims removed, or kept as 1 (`out <shape> is not self <shape>
/// reduced over <count> dims`).
ReducedDims checkReduction(const char *kernel, const SpmdBuffer *out,
                           const SpmdBuffer *self, int32_t n,
                           const int64_t *dims);

/// matmul: fatal unless out is 2-D (mm) or 3-D (bmm) (`<kernel>: rank-<r>
/// out; expected 2 (mm) or 3 (bmm)`); returns out's rank.
int32_t checkMatmulRank(const char *kernel, const SpmdBuffer *out);

/// softmax, log_softmax and their backwards: each of the `n` inputs must be
/// out's shape (checkSameShape "out", "input"), then `dim` must be a dim of
/// out (checkDim; ATen treats a 0-D out as one element along dim 0).
/// Returns out's layout around `dim` ({1, 1, 1} for a 0-D out).
DimLayout checkSoftmax(const char *kernel, const SpmdBuffer *out,
                       const SpmdBuffer *const *ins, size_t n, int64_t dim);

/// A layer norm's input viewed as m rows of n elements, n the product of
/// the trailing `normalized_rank` dims.
struct NormRows {
  int64_t m, n;
};
/// native_layer_norm: normalized_rank must lie in [0, input's rank]
/// (`<kernel>: normalized_rank <r> is out of range for input <shape>`);
/// then checkSameShape(output, input); mean, then rstd, must be input's
/// shape with the normalized dims set to 1 (`<name> <shape> does not match
/// input <shape> with the last <r> dims set to 1`); weight, then bias (when
/// given), the normalized dims (`<name> <shape> does not match the last <r>
/// dims of input <shape>`). Returns the row view.
NormRows checkLayerNorm(const char *kernel, const SpmdBuffer *output,
                        const SpmdBuffer *mean, const SpmdBuffer *rstd,
                        const SpmdBuffer *input, const SpmdBuffer *weight,
                        const SpmdBuffer *bias, int64_t normalizedRank);
/// native_layer_norm_backward, with checkLayerNorm's messages: the
/// normalized_rank, checkSameShape(grad_out, input), mean, rstd, then when
/// given checkSameShape(grad_input, input), weight, grad_weight and
/// grad_bias. Returns the row view.
NormRows
checkLayerNormBackward(const char *kernel, const SpmdBuffer *gradInput,
                       const SpmdBuffer *gradWeight, const SpmdBuffer *gradBias,
                       const SpmdBuffer *gradOut, const SpmdBuffer *input,
                       const SpmdBuffer *mean, const SpmdBuffer *rstd,
                       const SpmdBuffer *weight, int64_t normalizedRank);

/// native_layer_norm, once output's dtype is known to be supported: fatal
/// unless mean and rstd have it (`<kernel>: mean and rstd must be <dtype>
/// like output`).
void checkLayerNormStatDTypes(const char *kernel, const SpmdBuffer *output,
                              const SpmdBuffer *mean, const SpmdBuffer *rstd);
/// native_layer_norm_backward: the gradient whose dtype all share, the first
/// of grad_input, grad_weight and grad_bias given (NULL when none is).
const SpmdBuffer *layerNormGradTyped(const SpmdBuffer *gradInput,
                                     const SpmdBuffer *gradWeight,
                                     const SpmdBuffer *gradBias);
/// native_layer_norm_backward, once layerNormGradTyped's dtype is known to
/// be supported: fatal unless every gradient given has it (`<kernel>: the
/// gradients must share one dtype`).
void checkLayerNormGradDTypes(const char *kernel, const SpmdBuffer *gradInput,
                              const SpmdBuffer *gradWeight,
                              const SpmdBuffer *gradBias);

/// Scaled-dot-product attention's dims: query [B, H, L, E], key and value
/// [B, H, S, E], and the element strides of attn_mask broadcast to
/// [B, H, L, S] (0 along a broadcast dim; all 0 without a mask).
struct AttentionShape {
  int64_t batch, heads, l, s, e;
  std::array<int64_t, 4> maskStrides;
};
/// The attention kernels' operands: query, key and value 4-D (`<name> must
/// have rank 4, got shape <shape>`) with one batch size, number of heads and
/// head size, key and value one length (`query <shape>, key <shape> and
/// value <shape> do not match`); attn_mask, when given, 2-D or 4-D and
/// broadcasting to [B, H, L, S] (`attn_mask <shape> does not broadcast to
/// the scores [B, H, L, S] of query <shape> and key <shape>`); out shaped
/// like query (checkSameShape) and logsumexp [B, H, L] (`logsumexp <shape>
/// must be query's shape <shape> without its last dim`); key, value,
/// attn_mask and out of query's dtype (checkSameDTypes), logsumexp too but
/// f32 for a bf16 query, as ATen (`logsumexp must be <dtype> for a <dtype>
/// query`).
AttentionShape checkAttention(const char *kernel, const SpmdBuffer *query,
                              const SpmdBuffer *key, const SpmdBuffer *value,
                              const SpmdBuffer *mask, const SpmdBuffer *out,
                              const SpmdBuffer *logsumexp);
/// attention_backward: checkAttention, then grad_out and grad_query shaped
/// like query, grad_key like key and grad_value like value
/// (checkSameShape), all four of query's dtype (checkSameDTypes).
AttentionShape
checkAttentionBackward(const char *kernel, const SpmdBuffer *grad_query,
                       const SpmdBuffer *grad_key, const SpmdBuffer *grad_value,
                       const SpmdBuffer *grad_out, const SpmdBuffer *query,
                       const SpmdBuffer *key, const SpmdBuffer *value,
                       const SpmdBuffer *out, const SpmdBuffer *logsumexp,
                       const SpmdBuffer *mask);
/// Fatal unless each non-NULL `buffers[i]` has `ref`'s dtype (`<kernel>:
/// <names[i]> must be <dtype> like <refName>`).
void checkSameDTypes(const char *kernel, const char *refName,
                     const SpmdBuffer *ref,
                     std::initializer_list<const char *> names,
                     std::initializer_list<const SpmdBuffer *> buffers);

/// nll_loss's reduction argument.
enum NllReduction : int64_t {
  kReductionNone = 0,
  kReductionMean = 1,
  kReductionSum = 2,
};
/// The layout of nll_loss's self: [batch, classes] (or [classes], batch 1).
struct NllShape {
  int64_t batch, classes;
  /// reduction none over a batch: one loss per sample, no total weight.
  bool perSample;
};
/// nll_loss_forward: the reduction must be 0, 1 or 2 (`<kernel>: reduction
/// must be 0 (none), 1 (mean) or 2 (sum), got <r>`); self [N, C] or [C]
/// (`self must be [N, C] or [C], got <shape>`); target [N] or []
/// (`target <shape> does not match self <shape>`); weight, when given, of
/// C elements (`weight <shape> does not have <C> elements (the classes)`);
/// total_weight one element (`total_weight must hold a single element, got
/// <shape>`); output [N] for reduction none over a batch (`output <shape>
/// must be [<N>] for reduction none`), else 0-D (`output <shape> must be
/// 0-D`). Returns self's layout.
NllShape checkNllLoss(const char *kernel, const SpmdBuffer *output,
                      const SpmdBuffer *totalWeight, const SpmdBuffer *self,
                      const SpmdBuffer *target, const SpmdBuffer *weight,
                      int64_t reduction);
/// nll_loss_forward, once output's dtype is known to be supported: fatal
/// unless total_weight has it (`<kernel>: total_weight must be <dtype> like
/// output`).
void checkTotalWeightDType(const char *kernel, const SpmdBuffer *output,
                           const SpmdBuffer *totalWeight);
/// nll_loss_backward, with checkNllLoss's messages: the reduction, self,
/// target and weight; checkSameShape(out, self); total_weight; grad_output
/// [N] for reduction none over a batch (`grad_output <shape> must be [<N>]
/// for reduction none`), else one element (`grad_output must hold a single
/// element, got <shape>`). Returns self's layout.
NllShape checkNllLossBackward(const char *kernel, const SpmdBuffer *out,
                              const SpmdBuffer *gradOutput,
                              const SpmdBuffer *self, const SpmdBuffer *target,
                              const SpmdBuffer *weight,
                              const SpmdBuffer *totalWeight, int64_t reduction);

/// The classes a rank holds (loss_parallel): global classes [begin, begin +
/// count) of `total`, from the _rows kernels' {begin, count, total}, or all
/// of self's classes when `rows` is NULL. Fatal unless they fit in self's
/// classes (`<kernel>: classes [<b>, <e>) of <total> held in a self of <C>
/// classes`).
struct NllClasses {
  int64_t begin, count, total;
};
NllClasses nllClasses(const char *kernel, const NllShape &s,
                      const int64_t *rows);

/// The rows of an embedding table a rank holds: global rows [begin, begin +
/// count) of a table of `vocab` rows (the whole table when unsharded).
struct EmbeddingRows {
  int64_t begin, count, vocab;
};
/// The rows `held` ({begin, count, vocab}: the _rows kernels' argument), or
/// with `held` NULL the whole of `table` (none when it is not 2-D: the
/// checks then report its rank).
EmbeddingRows embeddingRows(const SpmdBuffer *table, const int64_t *held);
/// embedding: checkRank(weight, 2), the held rows must fit in weight
/// (`<kernel>: <count> rows held in a weight of <rows> rows`), and out must
/// be indices' shape + [D], D weight's columns (`out <shape> is not indices
/// <shape> + [<D>]`). Returns D.
int64_t checkEmbedding(const char *kernel, const SpmdBuffer *out,
                       const SpmdBuffer *weight, const SpmdBuffer *indices,
                       EmbeddingRows rows);
/// embedding_dense_backward: checkRank(out, 2), the held rows must fit in
/// out (`<kernel>: <count> rows held in an out of <rows> rows`), and
/// grad_output must be indices' shape + [D], D out's columns (`grad_output
/// <shape> is not indices <shape> + [<D>]`). Returns D.
int64_t checkEmbeddingBackward(const char *kernel, const SpmdBuffer *out,
                               const SpmdBuffer *gradOutput,
                               const SpmdBuffer *indices, EmbeddingRows rows);

/// native_dropout: checkSameShape(output, input), checkSameShape(mask,
/// input), and mask must be i1 (fatalDType "mask (expected i1)").
void checkNativeDropout(const char *kernel, const SpmdBuffer *output,
                        const SpmdBuffer *mask, const SpmdBuffer *input);
/// The random kernels: the local buffer `local` lies at `globalOffset` in a
/// global tensor of `globalShape` (local->rank dims each). It may run past
/// the end of a dim: the padding of an uneven shard (the partitioner pads
/// every piece to the largest), whose draws are never read. Fatal at the
/// first dim d whose offset is outside [0, size] (`<kernel>: local <shape>
/// at offset <o> of dim <d> is outside the global size <n>`). Writes the
/// global tensor's row-major strides to `globalStrides` and returns the
/// global index of local element 0.
int64_t checkGlobalOffset(const char *kernel, const SpmdBuffer *local,
                          const int64_t *globalShape,
                          const int64_t *globalOffset, int64_t *globalStrides);

} // namespace spmd::rt

#endif // SPMD_RUNTIME_CHECKS_H
