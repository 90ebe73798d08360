//===- DataParallel.h - what the data-parallel modes share ------*- C++ -*-===//
//
// Shared by the built-in modes under passes/: option checking, per-argument
// layout overrides (seed 003's placement override), the gradient bucketing
// of DDP's transformAndCompile and FSDP's parameter gathers (fsdp,
// fsdp-tp).
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PARALLEL_DATAPARALLEL_H
#define SPMD_PARALLEL_DATAPARALLEL_H

#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Parallel/ParallelMode.h"

#include <optional>

namespace spmd {

/// A data-parallel mode's checked options.
struct DataParallelConfig {
  /// The caller's options with the mesh names defaulted ("dp").
  ParallelOptions options;
  /// `placements=glob=layout;...`, in order: the first match wins.
  std::vector<std::pair<std::string, std::vector<layout::Placement>>> overrides;

  /// The override for an argument's FQN, if a pattern matches it.
  std::optional<std::vector<layout::Placement>>
  overrideFor(llvm::StringRef fqn) const;

  /// A data-parallel argument layout: the override for `fqn` if any, else
  /// Partial(sum) (each rank's own summand: a carried gradient not yet
  /// reduced) when `role` is in `partialRoles`, else Shard(0) for a tensor
  /// of rank >= 1 whose role is in `shardedRoles`, else none (Replicate).
  std::optional<std::vector<layout::Placement>>
  layoutOf(llvm::StringRef role, llvm::StringRef fqn,
           mlir::RankedTensorType type,
           llvm::ArrayRef<llvm::StringRef> shardedRoles,
           llvm::ArrayRef<llvm::StringRef> partialRoles = {}) const;
};

/// Checks `options` for mode `mode` on a 1-D mesh (checkModeOptions, with
/// the keys `placements`, `bucket-cap-mb` and `known`) and the overrides'
/// syntax and mesh rank; each problem gets a diagnostic at the module.
mlir::FailureOr<DataParallelConfig>
parseDataParallelConfig(mlir::ModuleOp module, const ParallelOptions &options,
                        llvm::StringRef mode,
                        llvm::ArrayRef<llvm::StringRef> known);

/// The bucket cap in bytes that option `key` of `mode` gives in MiB
/// (`bucket-cap-mb`, `first-bucket-cap-mb`), `defaultMb` when absent.
/// Error (at the module): not a non-negative number ("<mode>: <key> must be
/// a non-negative number, got 'x'").
mlir::FailureOr<int64_t> parseBucketCapBytes(mlir::ModuleOp module,
                                             const ParallelOptions &options,
                                             llvm::StringRef mode,
                                             llvm::StringRef key,
                                             double defaultMb);

/// DDP's gradient bucketing (seed 004's bucket_cap_mb) on a per-rank
/// program of mode `mode` (the buckets' reason: "<mode> gradient bucket
/// i: ..."): the all_reduces of values computed in backward that the update
/// reads or the step returns (a gradient carried to the next call), in
/// backward order, are grouped into buckets of at most `capBytes` bytes (a
/// gradient larger than the cap is a bucket of its own) with the same mesh
/// dims, reduction and element type; each bucket becomes one all_reduce of the
/// flattened, concatenated gradients, placed after the last of them and
/// split back (aten.view, aten.cat, aten.split_with_sizes). capBytes 0
/// leaves every all_reduce alone. The first bucket holds at most
/// min(capBytes, firstCapBytes) (PyTorch DDP's first bucket: the gradients
/// computed first go out early; 0 means capBytes).
///
/// With `compressBf16` (seed 004's communication hook, PyTorch's
/// bf16_compress_hook), every f32/f64 gradient all_reduce (bucketed or not)
/// then runs on bf16: `aten._to_copy` to bf16, the all_reduce in bf16, and
/// `aten._to_copy` back, halving (f32) the bytes on the wire. PyTorch's hook
/// divides by the world size before the sum because DDP averages; here the
/// gradients are already partial sums of the global loss, so no division.
mlir::LogicalResult bucketGradientAllReduces(mlir::ModuleOp module,
                                             llvm::StringRef mode,
                                             int64_t capBytes,
                                             int64_t firstCapBytes,
                                             bool compressBf16 = false);

/// The all_reduces of one origin that do not wait for each other, fused
/// (XLA's all-reduce combiner, restricted to one `spmd.reason`; gradients'
/// reductions are left to the mode's buckets, asynchronous ones to their
/// waits): in each block, an all_reduce joins the open group of earlier ones
/// with its reason, mesh, mesh dims, reduction and element type when every use
/// of the group's results comes after its operand is computed; each group of
/// two or more becomes one all_reduce (fuseCollectives) after its last
/// operand, its reason followed by ", <n> all_reduces fused". A BatchNorm
/// under data parallelism reduces two batch sums in backward (of the
/// output gradient and of its product with the normalized input): one
/// message each, latency-bound, now one for both. Runs on every mode's
/// per-rank program, after transformAndCompile.
void fuseIndependentAllReduces(mlir::ModuleOp module);

/// FSDP's parameter gathers (ZeRO-3) on mesh dim `meshDim`: before every
/// forward and backward use of a parameter sharded on that mesh dim, a
/// fixed redistribute to its layout with Replicate there (an all_gather);
/// the backward gathers again, and what it reads of a gathered parameter
/// through forward's view ops is recomputed from the fresh gather, so the
/// gathered copy of forward is not kept alive. `mode` names the mode in the
/// gathers' `spmd.reason`. Runs before propagation (a beforePropagate hook
/// of annotateAndPartition).
///
/// A parameter for which `keepGathered(fqn)` holds is not resharded after
/// forward (FSDP2's reshard_after_forward=False, and its root unit): one
/// gather before its first use serves forward and backward.
///
/// Mixed precision (spmd-capture --param-dtype): a parameter read through a
/// dtype cast (`aten._to_copy` of the argument) is gathered after the cast,
/// in the narrow dtype, as FSDP2 gathers in param_dtype; the cast is
/// repeated on the shard right before each gather.
mlir::LogicalResult gatherShardedParameters(
    mlir::func::FuncOp fn, int64_t meshDim, llvm::StringRef mode,
    llvm::function_ref<bool(llvm::StringRef)> keepGathered = nullptr);

/// Mixed precision's gradient cast: `op` if it is an `aten._to_copy` that
/// widens a float (a gradient computed in bf16 cast back to its fp32
/// parameter's dtype), else null.
mlir::Operation *getGradientCast(mlir::Operation *op);

/// The gradients of a captured step: results of backward ops that an
/// optimizer-phase op reads, in program order.
llvm::SmallVector<mlir::Value> findGradients(mlir::func::FuncOp fn);

/// The arguments `grad` ends up updating: those the function results that
/// its optimizer-phase users reach update (`spmd.updates`), nearest first.
llvm::SmallVector<unsigned> argumentsUpdatedBy(mlir::func::FuncOp fn,
                                               mlir::Value grad);

/// `reduce-dtype=` of the data-parallel modes (FSDP2's and DDP's mixed
/// precision `reduce_dtype`): the dtype gradients are reduced in. Under
/// mixed precision (spmd-capture --param-dtype) a parameter's gradient is
/// computed in the narrow dtype and cast back to the parameter's (a
/// widening `aten._to_copy` of backward that the optimizer reads, a
/// "gradient cast"); its reduction goes before the cast (reduce-dtype is the
/// narrow dtype; the default, as FSDP2's reduce_dtype=None) or after it
/// (reduce-dtype is the parameter's: the cast's Partial(sum) passes through,
/// summed in the wide dtype). With `constrainDim`, a gradient reduced after
/// its cast gets an spmd.sharding_constraint on the cast's result: Partial(sum)
/// on that mesh dim, the layout of the parameter it updates on the others
/// (free where none is found), so propagation neither moves the reduction
/// before the cast nor reduces the other dims in the wide dtype. Returns the
/// gradient casts whose gradient is reduced before them.
///
/// Errors (on the module, or at the gradient's op): reduce-dtype is not
/// bf16, f16, f32 or f64; a gradient cast's dtypes do not include it; a
/// gradient without a cast has another dtype (fp32 gradients compress with
/// ddp's comm-hook=bf16, not reduce-dtype).
mlir::FailureOr<llvm::SmallVector<mlir::Operation *>>
applyReduceDtype(mlir::func::FuncOp fn, const ParallelOptions &options,
                 llvm::StringRef mode, std::optional<int64_t> constrainDim);

/// Fuses `group`, collectives of one kind (spmd.all_reduce, all_gather or
/// reduce_scatter) on the same mesh dims, reduction and element type, into
/// one flat collective of that kind built at `b`'s insertion point (which
/// every operand must dominate and every use of a result must follow), as
/// FSDP2's flat all_gather and reduce_scatter and DDP's buckets do: each
/// operand with its gathered or scattered dim moved first (aten.permute) is
/// flattened (aten.view) and concatenated (aten.cat; along dim 1 of [R, k]
/// pieces for a reduce_scatter, so that destination rank r's chunks of
/// every member are contiguous), and each member's result is cut back out
/// (aten.slice of the gathered [R, K] rows, aten.split_with_sizes
/// otherwise) and restored to its shape. The members are erased; the fused
/// collective, with `reason` as its `spmd.reason`, is returned. Bytes moved
/// are the members' sum.
mlir::Operation *fuseCollectives(llvm::ArrayRef<mlir::Operation *> group,
                                 mlir::OpBuilder &b, llvm::StringRef reason);

/// FSDP units (FSDP2's `fully_shard` granularity): which parameters are
/// gathered by one all_gather and whose gradients are reduced by one
/// reduce_scatter.
struct FsdpUnits {
  /// `units=` FQN patterns of the unit modules; empty: the first element of
  /// each module list (`layers.0`, `h.3`, `block.1`), as FSDP2 is applied
  /// to each transformer block.
  std::vector<std::string> patterns;
  /// `units=none`: every parameter its own unit: one collective per
  /// parameter and use, nothing fused, no root unit.
  bool perParameter = false;
  /// `reshard-after-forward=true` (default): a unit's parameters are
  /// gathered again for backward; `false`: they stay gathered from forward
  /// to backward (more memory, no backward gathers).
  bool reshardAfterForward = true;
  /// `reshard-after-forward=N` (FSDP2's int form, 1 < N < the fsdp mesh
  /// dim's size D; 0 otherwise): after forward each rank keeps 1/N of a
  /// unit's gathered parameters, the part its position in its group of N
  /// consecutive ranks names (FSDP2's post-forward mesh `mesh.view(-1, N)`,
  /// shard dim 1), and backward gathers them over that group only: within
  /// a host when N is the devices per host. Memory held from forward to
  /// backward: 1/N of each unit's parameters, against 1/D with `true`.
  int64_t postForwardGroup = 0;
  /// `carried-grads=unsharded` (default `sharded`): a gradient carried from
  /// call to call (role "grad": accumulation across calls) stays each
  /// rank's whole summand, Partial(sum) on the fsdp mesh dim, as after
  /// FSDP2's `set_requires_gradient_sync(False)`: the calls that only
  /// accumulate reduce-scatter nothing and the call that steps reduces the
  /// sum once, at the cost of each rank holding whole gradients (4 bytes
  /// per fp32 parameter element against 4/D sharded).
  bool unshardedCarriedGrads = false;
  /// Whether parameter `param` stays gathered from forward to backward: in
  /// the root unit (as FSDP2's root, which never reshards: its parameters,
  /// the head and final norm, are the first backward needs) or with
  /// reshard-after-forward=false.
  bool keepsGathered(llvm::StringRef param) const;
  /// The unit of the module (or parameter owner) with FQN `module`: the
  /// deepest enclosing module a pattern names (by default the first module
  /// list element on its path), or "" (the root unit: every parameter no
  /// unit claims, as the root `fully_shard`). Not used with perParameter.
  std::string unitOf(llvm::StringRef module) const;
};

/// The `units=auto|none|glob,glob` option of `mode` ("auto" when absent),
/// `reshard-after-forward=true|false|N` (true when absent; N as FSDP2:
/// 1 is false, D (the size of fsdp's mesh dim `meshDim`) is true) and
/// `carried-grads=sharded|unsharded` (sharded when absent). Errors: an
/// empty pattern ("<mode>: units '...' has an empty pattern"), another
/// reshard value ("<mode>: reshard-after-forward must be true, false or a
/// group size that divides D, got 'x'"), another carried-grads value
/// ("<mode>: carried-grads must be sharded or unsharded, got 'x'").
mlir::FailureOr<FsdpUnits> parseFsdpUnits(mlir::ModuleOp module,
                                          const ParallelOptions &options,
                                          int64_t meshDim,
                                          llvm::StringRef mode);

/// FSDP's communication per unit, on a per-rank program (fsdp and fsdp-tp's
/// transformAndCompile; the units from `options`, parseFsdpUnits): the
/// all_gathers of parameters (arguments with role "param") on mesh dim
/// `meshDim` become one per unit and phase (forward, backward), placed
/// before the first use of any of them; the gradient reduce_scatters on
/// that mesh dim become one per unit (of the module whose backward computed
/// the gradient), placed after the last gradient, split where a result is
/// used before a later gradient exists. fuseCollectives does each fusion;
/// `mode` begins each `spmd.reason`. Errors: parseFsdpUnits'.
///
/// With reshard-after-forward=N, each backward all_gather of a parameter
/// gathered in forward (of a unit's backward group whose every gather
/// repeats a forward one, so that the fused gather runs on one mesh; the
/// others stay on the program's mesh, as with `true`) is replaced (before
/// fusion) by an all_gather over the N ranks of this rank's group, on the
/// post-forward mesh this adds to the module: `spmd.mesh @post_forward`, the
/// program's mesh with mesh dim `meshDim` (named d) split into (D / N, N),
/// named `d_replicate` and `d_shard` (FSDP2's `mesh.view(-1, N)`). Its input is
/// this rank's 1/N of forward's gathered (padded) parameter along the gathered
/// dim, its position in the group naming the part, taken right after forward's
/// gather (spmd.local_take), so that forward's full copy dies with its
/// last forward use; a fused gather's concatenation of the parts moves up
/// to right after them. The gathered result is the same padded parameter.
mlir::LogicalResult fuseUnitCollectives(mlir::ModuleOp module,
                                        const ParallelOptions &options,
                                        int64_t meshDim, llvm::StringRef mode);

/// Registration of the modes of passes/ (one library each).
void registerDDPMode();
void registerFSDPMode();
void registerTPMode();
void registerFSDPTPMode();

} // namespace spmd

#endif // SPMD_PARALLEL_DATAPARALLEL_H
