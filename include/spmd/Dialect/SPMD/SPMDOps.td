//===- SPMDOps.td - spmd dialect operations ----------------*- tablegen -*-===//

#ifndef SPMD_DIALECT_SPMD_SPMDOPS_TD
#define SPMD_DIALECT_SPMD_SPMDOPS_TD

include "spmd/Dialect/SPMD/SPMDAttrs.td"
include "spmd/Dialect/SPMD/SPMDInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

def SPMD_MeshOp : SPMD_Op<"mesh", [Symbol]> {
  let summary = "An N-D device mesh";
  let description = [{
    Declares a device mesh: `shape[i]` ranks along mesh dim i, named
    `names[i]` (e.g. `dp`, `tp`). Ranks are numbered row-major over the mesh
    (last mesh dim fastest), like `torch.distributed.DeviceMesh`.

    Example:
    ```mlir
    spmd.mesh @mesh shape = [2, 2] names = ["dp", "tp"]
    ```

    A program has one mesh, the first: the one its layouts name. Further
    meshes are views of the same ranks for collectives (DeviceMesh views,
    such as FSDP2's post-forward mesh `mesh.view(-1, N)`, which an fsdp
    mode with `reshard-after-forward=N` declares): they number the ranks
    row-major too, so a collective over a view's mesh dims is a collective
    over a group of the program's ranks. Lowering needs every mesh to have
    the first's number of ranks and the meshes to have a common refinement
    (`spmd::refineMeshes`).

    Errors: an empty shape, a dim of size < 1, a name count different from
    the rank, and empty or duplicate names.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, DenseI64ArrayAttr:$shape,
                       StrArrayAttr:$names);
  let assemblyFormat = "$sym_name `shape` `=` $shape `names` `=` $names attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of mesh dims.
    int64_t getRank() { return getShape().size(); }
    /// Total number of ranks (product of the shape).
    int64_t getNumRanks();
    /// Index of the mesh dim called `name`, or -1.
    int64_t getDimIndex(::llvm::StringRef name);
  }];
}

def SPMD_RedistributeOp : SPMD_Op<"redistribute", [
    SameOperandsAndResultType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Change the layout of a value (global view)";
  let description = [{
    In the global (single-device-shaped) program, states that `input`, laid
    out as `from`, is needed laid out as `to`. Both layouts name the same
    mesh. The partitioner lowers it to the cheapest sequence of local
    collectives and slices (DTensor `redistribute`).

    Like the collectives it becomes, it is not pure: `cse` must not merge two
    redistributions of one value, which a mode may place on purpose (fsdp
    gathers a parameter again for each use, freeing it in between).

    Example:
    ```mlir
    %1 = spmd.redistribute %0 : tensor<8x16xf32>
           from #spmd.layout<@mesh, [partial<sum>]>
           to #spmd.layout<@mesh, [replicate]>
    ```

    Errors: the layouts name different meshes, a mesh that does not exist,
    or do not fit the mesh rank or the tensor rank.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, SPMD_LayoutAttr:$from,
                       SPMD_LayoutAttr:$to);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `:` type($result) `from` qualified($from) `to` qualified($to)
    attr-dict
  }];
  let hasVerifier = 1;
}

def SPMD_KeepLocalOp : SPMD_Op<"keep_local", [
    Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Use each rank's own value of a Partial as Replicate (global view)";
  let description = [{
    States that `input`, laid out as `from` (Partial on some mesh dims), is
    used laid out as `to` (the same placements, Replicate where `from` is
    Partial) without reducing it: every rank keeps its own local value, so
    the ranks' values differ afterwards. It costs nothing and the
    partitioner removes it. DDP's ignored parameters (seed 004) update with
    their unsynchronized local gradients this way.

    Example:
    ```mlir
    %1 = spmd.keep_local %0 : tensor<8x16xf32>
           from #spmd.layout<@mesh, [partial<sum>]>
           to #spmd.layout<@mesh, [replicate]>
    ```
    Errors: the layouts name different meshes or a missing mesh, do not fit
    the tensor, or differ anywhere but a Partial of `from` that is
    Replicate in `to`.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, SPMD_LayoutAttr:$from,
                       SPMD_LayoutAttr:$to);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `:` type($result) `from` qualified($from) `to` qualified($to)
    attr-dict
  }];
  let hasVerifier = 1;
}

def SPMD_ShardingConstraintOp : SPMD_Op<"sharding_constraint", [
    Pure, SameOperandsAndResultType,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Require a layout of a value on some mesh dims (global view)";
  let description = [{
    States that `input` must be laid out as `layout` on every mesh dim but
    those listed in `free_mesh_dims`, where propagation picks the placement
    (their placements in `layout` are ignored). The result is the same value
    with that layout; `--spmd-propagate` redistributes the input to it where
    its producer lays it out otherwise (the redistribute takes the
    constraint's `spmd.reason`). A ParallelMode pins module boundaries with
    it: a TP style's input and output layouts (seed 002's
    `desired_input_layouts` / `output_layouts`) on the tp mesh dim, with the
    dp dim free in fsdp-tp. It is GSPMD's / Shardy's sharding constraint
    with open dims. `--spmd-partition` removes it.

    Example:
    ```mlir
    %1 = spmd.sharding_constraint %0 : tensor<8x16xf32>
           to #spmd.layout<@mesh, [replicate, shard<1>]> free [0]
    ```
    Errors: the layout does not fit the tensor or the mesh, a free mesh dim
    is out of range or repeated.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, SPMD_LayoutAttr:$layout,
                       OptionalAttr<DenseI64ArrayAttr>:$free_mesh_dims);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `:` type($result) `to` qualified($layout)
    (`free` $free_mesh_dims^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether mesh dim `m` is left to propagation.
    bool isFree(int64_t m);
  }];
}

class SPMD_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : SPMD_Op<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<SymbolUserOpInterface>,
        DeclareOpInterfaceMethods<SPMD_CollectiveOpInterface,
                                  ["verifyGroupShapes"]>])> {
  let results = (outs AnyStaticShapeTensor:$result);
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult
    $cppClass::verifySymbolUses(::mlir::SymbolTableCollection &symbolTable) {
      return ::spmd::detail::verifyCollectiveGroup(*this, symbolTable);
    }
  }];
}

def SPMD_AllReduceOp : SPMD_CollectiveOp<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "Reduce over the group; every rank gets the result";
  let description = [{
    Elementwise reduction (`reduce`) of `input` over the ranks of the group;
    every rank receives the reduced tensor. Resolves `Partial` to
    `Replicate`.

    Example:
    ```mlir
    %1 = spmd.all_reduce %0 on @mesh mesh_dims = [0] reduce = sum : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       DenseI64ArrayAttr:$mesh_dims, SPMD_ReduceKind:$reduce);
  let assemblyFormat = [{
    $input `on` $mesh `mesh_dims` `=` $mesh_dims `reduce` `=` $reduce attr-dict
    `:` type($result)
  }];
}

def SPMD_AllGatherOp : SPMD_CollectiveOp<"all_gather"> {
  let summary = "Concatenate every rank's piece along gather_dim";
  let description = [{
    Every rank contributes an equally sized `input`; the result is the
    concatenation of the group's pieces along `gather_dim` in group-rank
    order, so `result[gather_dim] = input[gather_dim] * group size` and all
    other dims are equal. Uneven `Shard` pieces are padded to the chunk size
    before and sliced after (docs/semantics.md). Resolves `Shard` to `Replicate`.

    Example:
    ```mlir
    %1 = spmd.all_gather %0 on @mesh mesh_dims = [0] gather_dim = 0
           : tensor<2x8xf32> -> tensor<8x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       DenseI64ArrayAttr:$mesh_dims, I64Attr:$gather_dim);
  let assemblyFormat = [{
    $input `on` $mesh `mesh_dims` `=` $mesh_dims `gather_dim` `=` $gather_dim
    attr-dict `:` type($input) `->` type($result)
  }];
}

def SPMD_ReduceScatterOp : SPMD_CollectiveOp<"reduce_scatter"> {
  let summary = "Reduce over the group, each rank keeps one chunk";
  let description = [{
    Elementwise reduction (`reduce`) over the group, then the result is split
    into group-size equal chunks along `scatter_dim` and group rank i keeps
    chunk i: `input[scatter_dim] = result[scatter_dim] * group size`.
    Resolves `Partial` to `Shard(scatter_dim)`.

    Example:
    ```mlir
    %1 = spmd.reduce_scatter %0 on @mesh mesh_dims = [0] scatter_dim = 0
           reduce = sum : tensor<8x8xf32> -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       DenseI64ArrayAttr:$mesh_dims, I64Attr:$scatter_dim,
                       SPMD_ReduceKind:$reduce);
  let assemblyFormat = [{
    $input `on` $mesh `mesh_dims` `=` $mesh_dims `scatter_dim` `=` $scatter_dim
    `reduce` `=` $reduce attr-dict `:` type($input) `->` type($result)
  }];
}

def SPMD_AllToAllOp : SPMD_CollectiveOp<"all_to_all"> {
  let summary = "Exchange chunks: split along split_dim, concat along concat_dim";
  let description = [{
    Each rank splits `input` into group-size equal chunks along `split_dim`
    and sends chunk j to group rank j; the received chunks are concatenated
    along `concat_dim` in group-rank order. So `result[split_dim] =
    input[split_dim] / group size` and `result[concat_dim] =
    input[concat_dim] * group size` (the same dim: unchanged). Turns
    `Shard(concat_dim)` into `Shard(split_dim)`.

    Example:
    ```mlir
    %1 = spmd.all_to_all %0 on @mesh mesh_dims = [0] split_dim = 1 concat_dim = 0
           : tensor<2x8xf32> -> tensor<8x2xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       DenseI64ArrayAttr:$mesh_dims, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let assemblyFormat = [{
    $input `on` $mesh `mesh_dims` `=` $mesh_dims `split_dim` `=` $split_dim
    `concat_dim` `=` $concat_dim attr-dict `:` type($input) `->` type($result)
  }];
}

def SPMD_BroadcastOp : SPMD_CollectiveOp<"broadcast", [SameOperandsAndResultType]> {
  let summary = "Every rank of the group receives the root's tensor";
  let description = [{
    The rank with group index `root` (row-major over `mesh_dims`) sends its
    `input`; every rank of the group returns it.

    Example:
    ```mlir
    %1 = spmd.broadcast %0 on @mesh mesh_dims = [1] root = 0 : tensor<4xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       DenseI64ArrayAttr:$mesh_dims, I64Attr:$root);
  let assemblyFormat = [{
    $input `on` $mesh `mesh_dims` `=` $mesh_dims `root` `=` $root attr-dict
    `:` type($result)
  }];
}

def SPMD_WaitOp : SPMD_Op<"wait", [SameOperandsAndResultType]> {
  let summary = "Where an asynchronous collective's result is first needed";
  let description = [{
    `result` is `input`, the result of a collective of the same block. A
    collective whose every use is a `spmd.wait` is asynchronous: it starts
    where it stands and completes at its first wait (in block order), so
    the ops in between run while it is in flight; a collective with any
    other use completes where it stands and its waits cost nothing. Until
    the wait the collective's input must stay allocated and its result
    must not be read, which the wait's position gives the lowering
    (`spmd_rt_<collective>_start` ... `spmd_rt_wait`). XLA's
    all-gather-start/done pair, with the value semantics of the start kept:
    removing every wait only makes the collective synchronous.

    `--spmd-overlap-collectives` places the waits. Like the collectives,
    a wait is not pure: `cse` does not merge two, `canonicalize` does not
    move one.

    Example:
    ```mlir
    %1 = spmd.all_gather %0 on @mesh mesh_dims = [0] gather_dim = 0
           : tensor<2x8xf32> -> tensor<8x8xf32>
    %2 = aten.mm %a, %b : ...   // runs while the gather is in flight
    %3 = spmd.wait %1 : tensor<8x8xf32>
    ```
    Errors: an input that is not the result of a collective op in the
    same block.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The collective whose result this waits for.
    ::spmd::CollectiveOpInterface getCollective() {
      return ::mlir::cast<::spmd::CollectiveOpInterface>(
          getInput().getDefiningOp());
    }
    /// Whether `op` is asynchronous: it has uses and every one is a wait.
    static bool isAsync(::spmd::CollectiveOpInterface op);
    /// The wait that completes `op` (its first, in block order), or null
    /// when `op` is not asynchronous.
    static WaitOp getCompletingWait(::spmd::CollectiveOpInterface op);
  }];
}

def SPMD_LocalTakeOp : SPMD_Op<"local_take", [
    Pure, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "Rank-dependent gather along one dim (no communication)";
  let description = [{
    Along `dim`, position i of the result on the rank with linear index r
    (row-major over the mesh) is position `indices[r * N + i]` of `input`,
    where N is the result's size along `dim`; an index of -1 gives `fill`.
    Every other dim is copied. The partitioner emits it for the local parts
    of a redistribution: taking this rank's chunk (Replicate -> Shard),
    dropping the padding of uneven shards after an all_gather and adding it
    before a reduce_scatter or an all_to_all (DESIGN.md §2), reordering
    `_StridedShard` pieces, and zeroing the padding of an uneven shard that
    an op reduces over (the padded representation, docs/partition.md).

    Example (rank 0 keeps rows 0-1, rank 1 rows 2-3, of a 2x2 tensor
    gathered from two padded 2-row pieces where rank 1's piece holds one
    row; the result's second row on rank 1 is padding):
    ```mlir
    %1 = spmd.local_take %0 on @mesh dim = 0 indices = [0, 1, 2, -1] fill = 0.0
           : tensor<4x8xf32> -> tensor<2x8xf32>
    ```
    The compact form gives each rank K runs instead of a table (K = the
    length of `starts` over the number of ranks): rank r's row is its runs
    `starts[r * K + j]`, `counts[r * K + j]` for j = 0..K-1 one after
    another, run j giving `count` positions `start`, `start + 1`, ... or,
    with a start of -1, `count` positions of `fill`; positions after the
    last run are `fill`. One run is a rank's chunk or an unpadding; several
    are a `_StridedShard`'s pieces, or blocks padded for a reduce_scatter.
    The partitioner uses it whenever it is shorter than the table, so the
    IR does not grow with the size of the tensor:
    ```mlir
    %2 = spmd.local_take %0 on @mesh dim = 0 starts = [0, 3, 6, 9]
           counts = [3, 3, 3, 1] : tensor<10x8xf32> -> tensor<3x8xf32>
    %3 = spmd.local_take %0 on @mesh dim = 0 starts = [0, 4, 2, 6]
           counts = [2, 2, 2, 2] : tensor<8x8xf32> -> tensor<4x8xf32>
    ```
    (%3 on a 2-rank mesh: rank 0 takes positions 0, 1, 4, 5, rank 1 takes
    2, 3, 6, 7.)
    With `uniform`, `starts` and `counts` are one rank's runs, which every
    rank takes: the reordering of a `_StridedShard`'s pieces after an
    all_gather is the same on every rank, and its runs per rank grow with
    the tensor (a 4096-row weight gathered over a 32x8 mesh would otherwise
    list 256 copies of 512 runs):
    ```mlir
    %4 = spmd.local_take %0 on @mesh dim = 0 starts = [0, 4, 2, 6]
           counts = [2, 2, 2, 2] uniform : tensor<8x8xf32> -> tensor<8x8xf32>
    ```

    Errors: a mesh that does not exist, `dim` out of range, shapes that
    differ on another dim or element types that differ, neither or both
    forms, a table whose size is not (ranks of the mesh) x (result size
    along `dim`) or run lists whose length is not a multiple of the number
    of ranks, indices outside [-1, input size along `dim`), runs outside
    the input, a rank's runs longer than the result, and `uniform` without
    runs.
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FlatSymbolRefAttr:$mesh,
                       I64Attr:$dim, OptionalAttr<DenseI64ArrayAttr>:$indices,
                       OptionalAttr<DenseI64ArrayAttr>:$starts,
                       OptionalAttr<DenseI64ArrayAttr>:$counts,
                       UnitAttr:$uniform,
                       DefaultValuedAttr<F64Attr, "0.0">:$fill);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $input `on` $mesh `dim` `=` $dim (`indices` `=` $indices^)?
    (`starts` `=` $starts^)? (`counts` `=` $counts^)? (`uniform` $uniform^)?
    (`fill` `=` $fill^)? attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

#endif // SPMD_DIALECT_SPMD_SPMDOPS_TD
