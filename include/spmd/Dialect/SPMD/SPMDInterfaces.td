//===- SPMDInterfaces.td - spmd op interfaces --------------*- tablegen -*-===//

#ifndef SPMD_DIALECT_SPMD_SPMDINTERFACES_TD
#define SPMD_DIALECT_SPMD_SPMDINTERFACES_TD

include "mlir/IR/OpBase.td"

def SPMD_CollectiveOpInterface : OpInterface<"CollectiveOpInterface"> {
  let cppNamespace = "::spmd";
  let description = [{
    A local collective of the per-rank program: it communicates among the
    ranks that share all mesh coordinates except those of `mesh_dims` (the
    group), whose size is the product of those mesh dims' sizes.
  }];
  let methods = [
    InterfaceMethod<"The mesh the collective runs on.",
      "::mlir::FlatSymbolRefAttr", "getMeshAttr">,
    InterfaceMethod<"The mesh dims that form the communication group.",
      "::llvm::ArrayRef<int64_t>", "getMeshDims">,
    InterfaceMethod<[{
        Checks the operand and result shapes against the group size
        (number of ranks in the group). Emits an op error on mismatch.
      }],
      "::llvm::LogicalResult", "verifyGroupShapes", (ins "int64_t":$groupSize)>,
  ];
}

def SPMD_ShardingRuleOpInterface : OpInterface<"ShardingRuleOpInterface"> {
  let cppNamespace = "::spmd";
  let description = [{
    How an op of any dialect may be sharded on one mesh dim, as an einsum
    rule (spmd/Layout/ShardingRules.h; DTensor's `einop` rule, declared
    dialect-agnostic as Shardy's `ShardingRuleOpInterface`): its strategies
    are the placements of the operands and the results that compute the
    unsharded op's results. Propagation (`--spmd-propagate`) reads it and
    nothing else of an op's semantics. The aten dialect implements it per op
    family (pointwise with broadcasting, views, matrix products, reductions,
    normalization, ...) and per op where a family does not say enough.
  }];
  let methods = [
    InterfaceMethod<[{
        The op's rule, computed from its operand and result types and
        attributes; std::nullopt when the op, as configured, has none (it is
        then replicated).
      }], "::std::optional<::spmd::layout::EinsumRule>", "getShardingRule">
  ];
}

#endif // SPMD_DIALECT_SPMD_SPMDINTERFACES_TD
