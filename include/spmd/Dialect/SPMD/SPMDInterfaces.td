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

#endif // SPMD_DIALECT_SPMD_SPMDINTERFACES_TD
