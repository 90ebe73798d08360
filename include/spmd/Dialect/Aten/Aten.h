//===- Aten.h - aten dialect ------------------------------------*- C++ -*-===//
//
// The aten dialect: PyTorch ATen operators on builtin ranked tensors.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_DIALECT_ATEN_ATEN_H
#define SPMD_DIALECT_ATEN_ATEN_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Layout/ShardingRules.h"

#include <optional>

#include "spmd/Dialect/Aten/AtenDialect.h.inc"
#include "spmd/Dialect/Aten/AtenInterfaces.h.inc"

namespace spmd {
/// The runtime's compute kernels, one per entry of its KernelList.def
/// (`spmd_rt_<name>`): an op names its kernel by an enumerator, so a kernel
/// that does not exist does not compile.
enum class RuntimeKernel {
#define SPMD_RT_KERNEL(name, params, args) name,
#include "spmd/Runtime/KernelList.def"
};
} // namespace spmd

namespace spmd::aten {
/// One argument of an op's runtime kernel after its result buffers
/// (`getKernelArguments()`, generated from the op list): a group of the
/// op's operands (buffers; an absent optional operand is a null pointer, a
/// variadic group its count and an array of buffers), a number (an
/// IntegerAttr, FloatAttr or BoolAttr, converted to the C type of the
/// kernel's parameter), or an integer list (its count and an array).
struct KernelArgument {
  enum class Kind { Operands, Number, Integers };
  Kind kind;
  unsigned begin = 0, length = 0;
  bool variadic = false;
  mlir::Attribute number;
  llvm::SmallVector<int64_t> integers;

  static KernelArgument operands(std::pair<unsigned, unsigned> group,
                                 bool variadic) {
    return {Kind::Operands, group.first, group.second, variadic, {}, {}};
  }
  static KernelArgument value(mlir::Attribute number) {
    return {Kind::Number, 0, 0, false, number, {}};
  }
  static KernelArgument list(llvm::SmallVector<int64_t> integers) {
    return {Kind::Integers, 0, 0, false, {}, std::move(integers)};
  }
};

namespace OpTrait {
/// Marker traits of op classes (AtenOps.td): passes test for the class
/// with `op->hasTrait<...>()`, never with a list of ops.
#define SPMD_ATEN_TRAIT(name)                                                  \
  template <typename ConcreteType>                                             \
  class name : public mlir::OpTrait::TraitBase<ConcreteType, name> {};
SPMD_ATEN_TRAIT(Pointwise)
SPMD_ATEN_TRAIT(SameElementsView)
SPMD_ATEN_TRAIT(Rearrangement)
SPMD_ATEN_TRAIT(Random)
SPMD_ATEN_TRAIT(ResultSizeAttr)
SPMD_ATEN_TRAIT(Split)
SPMD_ATEN_TRAIT(MatrixProduct)
#undef SPMD_ATEN_TRAIT
} // namespace OpTrait

/// Sharding rules shared by op families (AtenSharding.cpp), in einsum form
/// (spmd/Layout/ShardingRules.h).
namespace rules {
/// Elementwise with broadcasting: the result's dims labelled, each operand
/// right-aligned to them ('1' where it broadcasts from size 1); `linear`:
/// the operand groups the op is jointly linear in, for a Partial(`reduce`)
/// pass-through.
layout::EinsumRule
pointwise(mlir::Operation *op, std::vector<std::vector<int>> linear,
          layout::ReduceKind reduce = layout::ReduceKind::Sum);
/// Factories (full_like, ones_like, ...): pointwise, and a `self` whose
/// values are never read may also be Partial of any kind, the result
/// Replicate (autograd's ones_like of a Partial loss needs no all_reduce).
layout::EinsumRule factory(mlir::Operation *op);
/// `rule` with the label of result dim `dim` (may be negative) kept whole.
layout::EinsumRule keepWhole(layout::EinsumRule rule, int64_t dim);
/// DTensor's view rule from operand 0's shape to result 0's.
layout::EinsumRule view(mlir::Operation *op);
/// Result dim i is operand dim perm[i].
layout::EinsumRule permute(llvm::ArrayRef<int64_t> perm);
/// `[.., n, k] x [.., k, m]`, with an addend first when `withSelf`.
layout::EinsumRule matmul(mlir::Operation *op, bool batched, bool withSelf);
/// select.int: operand 0's dims with `dim` (normalized) dropped from the
/// result and kept whole; linear in operand 0.
layout::EinsumRule select(mlir::Operation *op, int64_t dim);
/// A split of `self` into `pieces` along `dim` (may be negative).
layout::EinsumRule split(mlir::Value self, mlir::ValueRange pieces,
                         int64_t dim);
/// A reduction over `dims` of operand 0 (kept as size 1 when `keepdim`)
/// that leaves `reduce` pending where a reduced dim is sharded (DTensor's
/// reduction rule: Partial(sum) for sum, Partial(avg) for mean,
/// Partial(max) for amax); a Partial(reduce) operand passes through.
layout::EinsumRule reduction(mlir::Operation *op, llvm::ArrayRef<int64_t> dims,
                             bool keepdim, layout::ReduceKind reduce);
/// Scaled-dot-product attention (the family Aten_AttentionOp), forward or
/// `backward`: batch and heads label every operand and result alike (an
/// `attnMask` dim broadcast from size 1 is '1'), the sequences and head
/// sizes stay whole, no operand is linear.
layout::EinsumRule attention(mlir::Operation *op, mlir::Value attnMask,
                             bool backward);
} // namespace rules
} // namespace spmd::aten

namespace spmd::aten {
/// ATen type promotion of two element types (c10::promoteTypes): bool <
/// integers < floating point; within a category the wider type wins; bf16
/// with f16 gives f32.
mlir::Type promoteTypes(mlir::Type a, mlir::Type b);

/// ATen's result type of an elementwise op over `types` (at::result_type):
/// tensors with dims decide within a category; 0-D tensors only lift the
/// category (a 0-D float makes an integer result floating point).
mlir::Type resultElementType(mlir::TypeRange types);

/// ATen's maybe_wrap_dim for a dim already checked to be in range: a
/// negative `dim` counts from the end (a 0-D tensor takes 0 and -1).
inline int64_t normalizeDim(int64_t dim, int64_t rank) {
  return dim < 0 ? dim + (rank > 0 ? rank : 1) : dim;
}

/// Ops whose result holds the same elements as their operand in the same
/// order (the SameElementsView trait): the lowering makes them views sharing
/// the operand's memory.
inline bool isSameElementsView(mlir::Operation *op) {
  return op->hasTrait<OpTrait::SameElementsView>();
}

/// Whether the runtime kernel leaves `result` uncomputed: one of its op's
/// optional results (ATen's `output_mask`; the op list's
/// `optional_results`) that has no use. The lowering passes NULL for it,
/// and the peak-memory prediction counts no buffer.
bool isUncomputedResult(mlir::OpResult result);

/// Calls `fn` with each random op (the Random trait) under `root` and the
/// id it draws with (Philox's op key): its `spmd.random_id` where it has
/// one, else, in walk order, the numbers after the largest of those (0, 1,
/// ... when none has one). --spmd-remat sets the attribute so that a
/// recomputed op draws what its original does.
inline void
forEachRandomId(mlir::Operation *root,
                llvm::function_ref<void(mlir::Operation *, int64_t)> fn) {
  int64_t next = 0;
  root->walk([&](mlir::Operation *op) {
    if (auto id = op->getAttrOfType<mlir::IntegerAttr>("spmd.random_id"))
      next = std::max(next, id.getInt() + 1);
  });
  root->walk([&](mlir::Operation *op) {
    if (!op->hasTrait<OpTrait::Random>())
      return;
    auto id = op->getAttrOfType<mlir::IntegerAttr>("spmd.random_id");
    fn(op, id ? id.getInt() : next++);
  });
}

/// Ops that only rearrange or broadcast their first operand (the
/// Rearrangement trait). FSDP recomputes them from a fresh gather in
/// backward; TP follows a parameter through them to the op that uses it.
inline bool isRearrangement(mlir::Operation *op) {
  return op->hasTrait<OpTrait::Rearrangement>();
}

/// Whether `aten._to_copy` from element type `from` to `to` widens a float
/// exactly (bf16 or f16 to f32 or f64, f32 to f64): its sharding rule lets
/// a Partial(sum) through, and mixed precision casts gradients so.
inline bool isWideningFloatCast(mlir::Type from, mlir::Type to) {
  return ((from.isBF16() || from.isF16()) && (to.isF32() || to.isF64())) ||
         (from.isF32() && to.isF64());
}

/// The numeric value of an ATen Scalar attribute (IntegerAttr or FloatAttr).
double getScalarValue(mlir::Attribute scalar);

namespace detail {
using EmitErrorFn = llvm::function_ref<mlir::InFlightDiagnostic()>;
using InferFn = llvm::function_ref<llvm::LogicalResult(
    EmitErrorFn, llvm::SmallVectorImpl<mlir::Type> &)>;

/// The position of `value` in `values` (a verified string attribute's
/// kernel code).
int64_t indexOf(llvm::StringRef value, llvm::ArrayRef<llvm::StringRef> values);

/// Verifier shared by all aten ops: runs `infer` with the op's emitOpError
/// and checks that the declared result types equal the inferred ones.
llvm::LogicalResult verifyResultTypes(mlir::Operation *op, InferFn infer);

/// Broadcast of all tensor `operands` (numpy rules, right-aligned) with the
/// element type of resultElementType(). With `trueDivide` (div.Tensor) an
/// integer or bool result type becomes f32.
llvm::LogicalResult inferBroadcast(mlir::TypeRange operands,
                                   EmitErrorFn emitError,
                                   llvm::SmallVectorImpl<mlir::Type> &types,
                                   bool trueDivide = false);

/// `type` (a ranked tensor) with an integer or bool element type replaced by
/// the default float dtype (f32), as in true division and ATen's unary float
/// ops; float tensors are returned unchanged.
mlir::Type liftToFloat(mlir::Type type);

/// `tensor` combined elementwise with the Scalar attribute `scalar`: the
/// tensor's shape; an integer/bool tensor with a float scalar becomes f32, a
/// bool tensor with an integer scalar becomes i64 (wrapped-number rule).
mlir::Type promoteWithScalar(mlir::Type tensor, mlir::Attribute scalar);

/// Reshape of `self` to `size` (at most one -1, inferred); element counts
/// must match.
llvm::LogicalResult inferReshape(mlir::Type self, llvm::ArrayRef<int64_t> size,
                                 EmitErrorFn emitError,
                                 llvm::SmallVectorImpl<mlir::Type> &types);

/// A reduction of `self` over `dims` (every dim when absent or empty; each
/// in range and listed once, else "dim <d> appears multiple times"), the
/// reduced dims removed or kept as size 1 (`keepdim`). The element type is
/// `dtype` when given, else i64 for integer and bool inputs when `promotes`
/// (ATen's sum), else self's.
llvm::LogicalResult
inferReduction(mlir::Type self, std::optional<llvm::ArrayRef<int64_t>> dims,
               bool keepdim, std::optional<mlir::Type> dtype, bool promotes,
               EmitErrorFn emitError, llvm::SmallVectorImpl<mlir::Type> &types);

/// select.int: `self` without dim `dim`; `index` must be in [-size, size)
/// ("index <i> out of range for dim <d> of size <n>").
llvm::LogicalResult inferSelect(mlir::Type self, int64_t dim, int64_t index,
                                EmitErrorFn emitError,
                                llvm::SmallVectorImpl<mlir::Type> &types);

/// `dims` normalized against `rank`: every dim when absent or empty.
llvm::SmallVector<int64_t>
reducedDims(int64_t rank, std::optional<llvm::ArrayRef<int64_t>> dims);

/// Softmax/log-softmax: same type as `self`; `dim` must be in range.
/// half_to_float is only valid for f16 (and gives f32).
llvm::LogicalResult
inferNormalizedOverDim(mlir::Type self, int64_t dim, bool halfToFloat,
                       EmitErrorFn emitError,
                       llvm::SmallVectorImpl<mlir::Type> &types);

/// Softmax/log-softmax backward: grad_output and output have one shape; the
/// result has that shape and grad_output's element type, except that an f32
/// gradient with `inputDtype` f16 gives f16 (ATen's meta function).
llvm::LogicalResult
inferSoftmaxBackward(mlir::Type gradOutput, mlir::Type output, int64_t dim,
                     mlir::Type inputDtype, EmitErrorFn emitError,
                     llvm::SmallVectorImpl<mlir::Type> &types);

/// The factor of attention's scores: `scale`, or ATen's default
/// 1 / sqrt(E) for a query `[.., E]` (sdp::calculate_scale).
double attentionScale(std::optional<llvm::APFloat> scale, mlir::Type query);
} // namespace detail
} // namespace spmd::aten

#define GET_OP_CLASSES
#include "spmd/Dialect/Aten/AtenOps.h.inc"

#endif // SPMD_DIALECT_ATEN_ATEN_H
