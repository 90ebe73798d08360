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
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "spmd/Layout/ShardingRules.h"

#include <optional>

#include "spmd/Dialect/Aten/AtenDialect.h.inc"

namespace spmd::aten::detail {
/// The einsum sharding rule of an aten op (ShardingRuleOpInterface's
/// implementation, lib/Dialect/Aten/AtenSharding.cpp).
std::optional<spmd::layout::EinsumRule> shardingRule(mlir::Operation *op);
} // namespace spmd::aten::detail

#include "spmd/Dialect/Aten/AtenInterfaces.h.inc"

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

/// The numeric value of an ATen Scalar attribute (IntegerAttr or FloatAttr).
double getScalarValue(mlir::Attribute scalar);

/// Ops whose result holds the same elements as their operand in the same
/// order (view, _unsafe_view, _reshape_alias, unsqueeze, clone, detach):
/// the lowering makes them views sharing the operand's memory.
bool isSameElementsView(mlir::Operation *op);

/// Ops that only rearrange or broadcast their first operand: the
/// same-elements views and t, transpose, permute, expand. FSDP recomputes
/// them from a fresh gather in backward; TP follows a parameter through
/// them to the op that uses it.
bool isRearrangement(mlir::Operation *op);

namespace detail {
using EmitErrorFn = llvm::function_ref<mlir::InFlightDiagnostic()>;
using InferFn = llvm::function_ref<llvm::LogicalResult(
    EmitErrorFn, llvm::SmallVectorImpl<mlir::Type> &)>;

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
} // namespace detail
} // namespace spmd::aten

#define GET_OP_CLASSES
#include "spmd/Dialect/Aten/AtenOps.h.inc"

namespace spmd::aten {
/// The dims `op` (sum.dim_IntList) reduces, normalized: every dim for an
/// empty list, as ATen reduces them.
llvm::SmallVector<int64_t> reducedDims(SumDimIntListOp op);
} // namespace spmd::aten

#endif // SPMD_DIALECT_ATEN_ATEN_H
