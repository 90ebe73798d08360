//===- SPMD.h - spmd dialect ------------------------------------*- C++ -*-===//
//
// The spmd dialect: device meshes, DTensor placements and layouts,
// redistribute (global view) and the local collectives.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_DIALECT_SPMD_SPMD_H
#define SPMD_DIALECT_SPMD_SPMD_H

#include "spmd/Layout/LayoutMath.h"
#include "spmd/Layout/ShardingRules.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "spmd/Dialect/SPMD/SPMDDialect.h.inc"
#include "spmd/Dialect/SPMD/SPMDEnums.h.inc"

#include "spmd/Dialect/SPMD/SPMDAttrInterfaces.h.inc"

#define GET_ATTRDEF_CLASSES
#include "spmd/Dialect/SPMD/SPMDAttrs.h.inc"

#include "spmd/Dialect/SPMD/SPMDOpInterfaces.h.inc"

namespace spmd {
class MeshOp;
namespace detail {
/// Shared SymbolUserOpInterface check of the collectives: the mesh exists,
/// `mesh_dims` are in range, and the shapes fit the group size.
llvm::LogicalResult verifyCollectiveGroup(CollectiveOpInterface op,
                                          mlir::SymbolTableCollection &tables);
} // namespace detail

/// Looks up the spmd.mesh named `mesh` from `from`; emits "'@name' does not
/// reference a valid spmd.mesh" at `from` and returns null when missing.
MeshOp lookupMesh(mlir::Operation *from, mlir::FlatSymbolRefAttr mesh,
                  mlir::SymbolTableCollection *symbolTable = nullptr);

/// Converts between the dialect's and the layout library's reduce kinds.
layout::ReduceKind toLayoutReduceKind(ReduceKind kind);
ReduceKind fromLayoutReduceKind(layout::ReduceKind kind);

/// The attribute form of one placement.
PlacementAttrInterface getPlacementAttr(mlir::MLIRContext *ctx,
                                        const layout::Placement &placement);
} // namespace spmd

#define GET_OP_CLASSES
#include "spmd/Dialect/SPMD/SPMDOps.h.inc"

namespace spmd {
/// The one `spmd.mesh` of `module`; emits "<pass> needs exactly one
/// spmd.mesh, found N" at the module and returns null otherwise (the
/// passes and the runtime work on one mesh per program).
MeshOp getOnlyMesh(mlir::ModuleOp module, llvm::StringRef pass);

/// Checks what the sharding passes take as input: every function body is
/// one block ("must have a single block: <pass> works on captured
/// straight-line training steps", at the function) and every ranked tensor
/// its arguments and ops carry is within layout::checkTensorShape()'s
/// limits ("<pass>: tensor<...> is too large: <reason>", at the op or the
/// argument). Emits the first failure and fails; succeeds otherwise.
llvm::LogicalResult verifyPartitionable(mlir::ModuleOp module,
                                        llvm::StringRef pass);

/// Which phase of the training step an op belongs to, from its `spmd.phase`
/// attribute (SPMDDialect.td; the verifier admits "forward", "loss",
/// "backward" and "optimizer"), or "" when it has none.
llvm::StringRef getPhase(mlir::Operation *op);

/// The FQN of the module that ran `op`, from its `spmd.module` attribute
/// (SPMDDialect.td); "" for the root module or an op without one.
llvm::StringRef getModuleFqn(mlir::Operation *op);

/// Gives `to` the `spmd.module` and `spmd.phase` attributes of `from`, those
/// it has: an op a pass creates for another belongs to that op's module and
/// phase.
void copyProvenance(mlir::Operation *from, mlir::Operation *to);

/// A builder listener that gives every op inserted through its builder the
/// provenance (copyProvenance()) of `source`, the op they are built for.
class ProvenanceListener : public mlir::OpBuilder::Listener {
public:
  explicit ProvenanceListener(mlir::Operation *source) : source(source) {}
  void notifyOperationInserted(mlir::Operation *op,
                               mlir::OpBuilder::InsertPoint) override {
    copyProvenance(source, op);
  }

private:
  mlir::Operation *source;
};

/// The layouts a global-view layout change fixes (spmd.redistribute,
/// spmd.keep_local): its operand must be `first`, its result is `second`.
std::optional<std::pair<LayoutAttr, LayoutAttr>>
getFixedLayoutChange(mlir::Operation *op);

/// `#spmd.layout<@mesh, [placements...]>`.
LayoutAttr getLayoutAttr(mlir::FlatSymbolRefAttr mesh,
                         llvm::ArrayRef<layout::Placement> placements);
} // namespace spmd

#endif // SPMD_DIALECT_SPMD_SPMD_H
