//===- SPMDAttrs.td - placements and layouts ---------------*- tablegen -*-===//

#ifndef SPMD_DIALECT_SPMD_SPMDATTRS_TD
#define SPMD_DIALECT_SPMD_SPMDATTRS_TD

include "spmd/Dialect/SPMD/SPMDDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def SPMD_ReduceKind : I32EnumAttr<"ReduceKind",
    "reduction applied to a Partial value or by a reducing collective", [
      I32EnumAttrCase<"Sum", 0, "sum">,
      I32EnumAttrCase<"Avg", 1, "avg">,
      I32EnumAttrCase<"Max", 2, "max">,
      I32EnumAttrCase<"Min", 3, "min">
    ]> {
  let cppNamespace = "::spmd";
}

def SPMD_PlacementAttrInterface : AttrInterface<"PlacementAttrInterface"> {
  let cppNamespace = "::spmd";
  let description = [{
    A DTensor placement: how a tensor is distributed along one mesh dim.
  }];
  let methods = [
    InterfaceMethod<"Returns the placement in the layout-math representation.",
      "::spmd::layout::Placement", "getPlacement">,
  ];
}

class SPMD_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<SPMD_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def SPMD_ShardAttr : SPMD_Attr<"Shard", "shard",
    [DeclareAttrInterfaceMethods<SPMD_PlacementAttrInterface>]> {
  let summary = "DTensor Shard(dim): torch.chunk of one tensor dim";
  let description = [{
    The tensor dim `dim` is split over the ranks of the mesh dim by the
    `torch.chunk` rule: chunk = ceil(L / n) elements; rank r holds
    `[r * chunk, min(L, (r + 1) * chunk))`, so trailing ranks may hold fewer
    elements or none (L = 10, n = 4 gives 3, 3, 3, 1). When several mesh dims
    shard the same tensor dim they nest left to right.

    Example: `#spmd.shard<0>`
  }];
  let parameters = (ins "int64_t":$dim);
  let assemblyFormat = "`<` $dim `>`";
  let genVerifyDecl = 1;
}

def SPMD_StridedShardAttr : SPMD_Attr<"StridedShard", "strided_shard",
    [DeclareAttrInterfaceMethods<SPMD_PlacementAttrInterface>]> {
  let summary = "DTensor _StridedShard(dim, split_factor)";
  let description = [{
    The tensor dim `dim` is first cut into `split_factor` pieces (torch.chunk
    rule), each piece is chunked over the ranks of the mesh dim, and rank i
    holds the concatenation of every piece's i-th chunk. `split_factor = 1`
    is `Shard(dim)`. Used for FSDP over a TP-sharded dim (the parent-mesh
    composition) and for packed projections (q|k|v stacked, split factor 3).

    Example: `#spmd.strided_shard<0, 3>`
  }];
  let parameters = (ins "int64_t":$dim, "int64_t":$split_factor);
  let assemblyFormat = "`<` $dim `,` $split_factor `>`";
  let genVerifyDecl = 1;
}

def SPMD_ReplicateAttr : SPMD_Attr<"Replicate", "replicate",
    [DeclareAttrInterfaceMethods<SPMD_PlacementAttrInterface>]> {
  let summary = "DTensor Replicate(): every rank holds the whole tensor";
  let description = "Example: `#spmd.replicate`";
}

def SPMD_PartialAttr : SPMD_Attr<"Partial", "partial",
    [DeclareAttrInterfaceMethods<SPMD_PlacementAttrInterface>]> {
  let summary = "DTensor Partial(reduce_op): a value still to be reduced";
  let description = [{
    Every rank holds a full-shaped contribution; the logical value is the
    reduction (`sum`, `avg`, `max` or `min`) over the ranks of the mesh dim.

    Example: `#spmd.partial<sum>`
  }];
  let parameters = (ins EnumParameter<SPMD_ReduceKind>:$reduce);
  let assemblyFormat = "`<` $reduce `>`";
}

def SPMD_LayoutAttr : SPMD_Attr<"Layout", "layout"> {
  let summary = "A device mesh plus one placement per mesh dim";
  let description = [{
    The layout of a tensor in DTensor terms. `mesh` names an `spmd.mesh`;
    `placements[i]` is the placement along mesh dim i. Inside the brackets
    placements are written without the `#spmd.` prefix.

    Example: `#spmd.layout<@mesh, [strided_shard<0, 2>, shard<0>]>`

    Checked where the layout meets a tensor and a mesh (ops, function
    arguments): the number of placements must equal the mesh rank and every
    sharded tensor dim must be smaller than the tensor rank.
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    ArrayRefParameter<"::spmd::PlacementAttrInterface", "placements">:$placements
  );
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The placements in the layout-math representation.
    ::std::vector<::spmd::layout::Placement> getLayoutPlacements() const;

    /// Checks this layout against the mesh it names (looked up from `from`)
    /// and a tensor of type `type`: the mesh must exist, the placement count
    /// must equal the mesh rank and shard dims must be in range. Emits the
    /// diagnostic through `emitError` and fails otherwise.
    ::llvm::LogicalResult verifyFor(
        ::mlir::Operation *from, ::mlir::ShapedType type,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
        ::mlir::SymbolTableCollection *symbolTable = nullptr) const;
  }];
}

#endif // SPMD_DIALECT_SPMD_SPMDATTRS_TD
