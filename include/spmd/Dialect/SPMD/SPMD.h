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
#include "llvm/ADT/StringMap.h"

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
/// spmd.mesh, found N" at the module and returns null otherwise
/// (propagation and partitioning work on one mesh; views for collectives
/// come after them, see MeshRefinement).
MeshOp getOnlyMesh(mlir::ModuleOp module, llvm::StringRef pass);

/// The meshes of a program as views of one job's ranks (DeviceMesh views,
/// such as FSDP2's post-forward mesh `mesh.view(-1, N)`): every mesh numbers
/// the same ranks row-major, so each is a coarsening of one refined mesh,
/// each of its dims the product of a run of consecutive refined dims. A
/// collective over mesh dims D of any mesh is the collective over the
/// refined dims of D, in order: the same group, the same positions. The
/// first mesh is the program's (what argument and result layouts name);
/// the others serve collectives only. One mesh is its own refinement.
struct MeshRefinement {
  /// The refined mesh's shape (the runtime's mesh).
  llvm::SmallVector<int64_t> shape;
  /// Per mesh (by symbol name), per mesh dim: the refined dims it spans
  /// (none for a dim of size 1 of a view).
  llvm::StringMap<llvm::SmallVector<llvm::SmallVector<int64_t, 2>>> spans;
  /// The refined dims of mesh dims `meshDims` of the mesh named `mesh`.
  llvm::SmallVector<int64_t> refine(llvm::StringRef mesh,
                                    llvm::ArrayRef<int64_t> meshDims) const;
};

/// Refines the meshes of `module` (MeshRefinement); none gives a 1-D mesh
/// of one rank. Errors, at the offending mesh, prefixed with `pass`: a mesh
/// with another number of ranks than the first ("... has N ranks, the
/// program's mesh @m has M") and meshes without a common refinement
/// ("... cuts the ranks at K, which does not divide or is not divisible by
/// K'": [2, 3] and [3, 2] of 6 ranks).
llvm::FailureOr<MeshRefinement> refineMeshes(mlir::ModuleOp module,
                                             llvm::StringRef pass);

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
