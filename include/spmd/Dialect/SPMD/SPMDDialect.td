//===- SPMDDialect.td - spmd dialect definition ------------*- tablegen -*-===//

#ifndef SPMD_DIALECT_SPMD_SPMDDIALECT_TD
#define SPMD_DIALECT_SPMD_SPMDDIALECT_TD

include "mlir/IR/OpBase.td"

def SPMD_Dialect : Dialect {
  let name = "spmd";
  let cppNamespace = "::spmd";
  let summary = "Device meshes, DTensor placements and collectives";
  let description = [{
    The `spmd` dialect carries the distribution of a program over a device
    mesh, with the semantics of PyTorch DTensor:

    * `spmd.mesh` declares an N-D device mesh (a symbol).
    * Placement attributes (`#spmd.shard`, `#spmd.strided_shard`,
      `#spmd.replicate`, `#spmd.partial`) say how a tensor is laid out along
      one mesh dim; `#spmd.layout` combines a mesh with one placement per mesh
      dim. Uneven shards follow the `torch.chunk` rule.
    * `spmd.redistribute` changes a value's layout in the *global* view (the
      program still has single-device shapes).
    * `spmd.all_reduce`, `spmd.all_gather`, `spmd.reduce_scatter`,
      `spmd.all_to_all` and `spmd.broadcast` are the *local* collectives of
      the per-rank program, each over a group of mesh dims.

    Function arguments and results may carry a `spmd.layout` attribute that
    records what each rank holds of them.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Name of the function argument/result attribute holding a LayoutAttr.
    static constexpr ::llvm::StringLiteral getLayoutAttrName() {
      return ::llvm::StringLiteral("spmd.layout");
    }
  }];
}

class SPMD_Op<string mnemonic, list<Trait> traits = []>
    : Op<SPMD_Dialect, mnemonic, traits>;

#endif // SPMD_DIALECT_SPMD_SPMDDIALECT_TD
