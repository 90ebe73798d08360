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

    Each op of a captured training step carries its provenance in two
    discardable attributes, which `spmd-capture` writes and the passes read
    (never the op's location, which passes such as `canonicalize` and `cse`
    may fuse or drop):

    * `spmd.module`: a string, the fully qualified name of the `nn.Module`
      whose forward ran the op (in the backward: whose forward recorded the
      autograd node that ran it; in the optimizer: that owns the parameter it
      updates); `""` for the top level (the model's own ops, the loss).
    * `spmd.phase`: a string, the part of the training step the op belongs
      to: `"forward"`, `"loss"`, `"backward"` or `"optimizer"`.

    One more is a requirement that `spmd-capture` writes on the ops of a
    computation that needs whole values, and `--spmd-propagate` honours:

    * `spmd.replicated`: a unit attribute. The op runs with every operand
      and result Replicate on every mesh dim: its sharded operands are
      gathered first. torch.optim.Muon's Newton-Schulz iteration carries it:
      sharded, its bf16 matrix products would contract over the shards and
      round each rank's partial product before the sum, which single-device
      bf16 does not (distributed Muon gathers the update the same way).

    An op a pass creates for another (a redistribution before its user, the
    collectives that carry it out, a gradient bucket) copies these from the
    op it serves, so that the later passes and `--spmd-report` still see its
    phase. An op without them has no known module or phase.
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let hasRegionArgAttrVerify = 1;
  let hasRegionResultAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Name of the function argument/result attribute holding a LayoutAttr.
    static constexpr ::llvm::StringLiteral getLayoutAttrName() {
      return ::llvm::StringLiteral("spmd.layout");
    }
    /// Name of the op attribute holding the FQN of the module that ran it.
    static constexpr ::llvm::StringLiteral getModuleAttrName() {
      return ::llvm::StringLiteral("spmd.module");
    }
    /// Name of the op attribute holding its phase of the training step.
    static constexpr ::llvm::StringLiteral getPhaseAttrName() {
      return ::llvm::StringLiteral("spmd.phase");
    }
    /// Name of the unit op attribute requiring every operand and result
    /// Replicate (the op computes on whole values).
    static constexpr ::llvm::StringLiteral getReplicatedAttrName() {
      return ::llvm::StringLiteral("spmd.replicated");
    }
  }];
}

class SPMD_Op<string mnemonic, list<Trait> traits = []>
    : Op<SPMD_Dialect, mnemonic, traits>;

#endif // SPMD_DIALECT_SPMD_SPMDDIALECT_TD
