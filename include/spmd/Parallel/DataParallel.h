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
  /// Shard(0) for a tensor of rank >= 1 whose role is in `shardedRoles`,
  /// else none (Replicate).
  std::optional<std::vector<layout::Placement>>
  layoutOf(llvm::StringRef role, llvm::StringRef fqn,
           mlir::RankedTensorType type,
           llvm::ArrayRef<llvm::StringRef> shardedRoles) const;
};

/// Checks `options` for mode `mode` on a 1-D mesh (checkModeOptions, with
/// the keys `placements`, `bucket-cap-mb` and `known`) and the overrides'
/// syntax and mesh rank; each problem gets a diagnostic at the module.
mlir::FailureOr<DataParallelConfig>
parseDataParallelConfig(mlir::ModuleOp module, const ParallelOptions &options,
                        llvm::StringRef mode,
                        llvm::ArrayRef<llvm::StringRef> known);

/// DDP's gradient bucketing (seed 004's bucket_cap_mb) on a per-rank
/// program: the all_reduces of values computed in backward, in backward
/// order, are grouped into buckets of at most `capBytes` bytes (a gradient
/// larger than the cap is a bucket of its own) with the same mesh dims,
/// reduction and element type; each bucket becomes one all_reduce of the
/// flattened, concatenated gradients, placed after the last of them and
/// split back (aten.view, aten.cat, aten.split_with_sizes). capBytes 0
/// leaves every all_reduce alone.
///
/// With `compressBf16` (seed 004's communication hook, PyTorch's
/// bf16_compress_hook), every f32/f64 gradient all_reduce (bucketed or not)
/// then runs on bf16: `aten._to_copy` to bf16, the all_reduce in bf16, and
/// `aten._to_copy` back, halving (f32) the bytes on the wire. PyTorch's hook
/// divides by the world size before the sum because DDP averages; here the
/// gradients are already partial sums of the global loss, so no division.
mlir::LogicalResult bucketGradientAllReduces(mlir::ModuleOp module,
                                             int64_t capBytes,
                                             bool compressBf16 = false);

/// FSDP's parameter gathers (ZeRO-3) on mesh dim `meshDim`: before every
/// forward and backward use of a parameter sharded on that mesh dim, a
/// fixed redistribute to its layout with Replicate there (an all_gather);
/// the backward gathers again, and what it reads of a gathered parameter
/// through forward's view ops is recomputed from the fresh gather, so the
/// gathered copy of forward is not kept alive. `mode` names the mode in the
/// gathers' `spmd.reason`. Runs before propagation (a beforePropagate hook
/// of annotateAndPartition).
mlir::LogicalResult gatherShardedParameters(mlir::func::FuncOp fn,
                                            int64_t meshDim,
                                            llvm::StringRef mode);

/// Registration of the modes of passes/ (one library each).
void registerDDPMode();
void registerFSDPMode();
void registerTPMode();
void registerFSDPTPMode();

} // namespace spmd

#endif // SPMD_PARALLEL_DATAPARALLEL_H
