//===- TensorParallel.h - TP plans and ParallelStyles -----------*- C++ -*-===//
//
// What the tp and fsdp-tp modes share: the TP plan (DESIGN.md §4), its
// ParallelStyles (seed 002: colwise, rowwise, sequence_parallel,
// prepare_module_input, prepare_module_output, and DTensor's
// PrepareModuleInputOutput as both of these) resolved against the modules
// of a captured step (seed 000's FQN patterns), the parameter placements
// they give on the tp mesh dim, and the sharding constraints they put at
// module boundaries. docs/parallel-modes.md describes the semantics.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PARALLEL_TENSORPARALLEL_H
#define SPMD_PARALLEL_TENSORPARALLEL_H

#include "spmd/Layout/LayoutMath.h"
#include "spmd/Parallel/ParallelMode.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spmd {

/// One entry of a TP plan: an FQN pattern (fnmatch per dot-separated
/// component) and the style it applies, with seed 002's keyword arguments.
struct TPPlanEntry {
  enum class Style {
    /// `{"placements": [...]}` on parameter FQNs.
    Placements,
    Colwise,
    Rowwise,
    SequenceParallel,
    PrepareModuleInput,
    PrepareModuleOutput
  };
  std::string pattern;
  Style style = Style::Placements;
  /// Layouts on the tp mesh dim, one per module input / output (an empty
  /// optional: the style's default, or "leave alone" for prepare_*). Shard
  /// dims may be negative (Python style, `shard(-1)`): they are normalized
  /// against the value they apply to.
  std::vector<std::optional<layout::Placement>> inputLayouts,
      desiredInputLayouts, outputLayouts, desiredOutputLayouts;
  /// sequence_parallel: the sequence dim of the module's input and output.
  int64_t sequenceDim = 1;
  /// Style::Placements: the parameters' placement on the tp mesh dim.
  layout::Placement placement;
};

/// A parsed plan, entries in file order.
struct TPPlan {
  std::vector<TPPlanEntry> entries;
};

/// Reads and parses the plan file at `path` (JSON: FQN pattern -> {"style":
/// name, keyword arguments...} or {"placements": [one placement]}; a
/// placement is written `shard(d)`, `strided_shard(d, k)`, `replicate` or
/// `partial(sum)`, and `<>` may replace the parentheses). Errors: a
/// diagnostic at `module` naming the file and the entry (unreadable file,
/// malformed JSON, an unknown style or keyword, a malformed placement).
mlir::FailureOr<TPPlan> parseTPPlan(mlir::ModuleOp module,
                                    llvm::StringRef path);

/// A module a style applies to.
struct TPStyledModule {
  std::string fqn;
  /// The plan entry (points into the TPPlan).
  const TPPlanEntry *entry;
  /// An nn.Embedding (rowwise then wants its input Replicate).
  bool embedding;
  /// A colwise projection whose output is split into this many equal
  /// pieces (packed q|k|v): its weight, bias and output are
  /// StridedShard(d, packed); 1 otherwise.
  int64_t packed = 1;
};

/// A plan resolved against a captured step on a tp mesh dim of `tpSize`
/// ranks.
struct TPResolution {
  /// The tp placement of each parameter FQN the plan shards, and of the
  /// optimizer state that follows it (`<param fqn>.<state>`); every other
  /// argument is Replicate on tp.
  llvm::StringMap<layout::Placement> placements;
  /// Styled modules in plan order.
  std::vector<TPStyledModule> styled;
};

/// Resolves `plan` against `fn` (a captured @train_step: `spmd.modules`,
/// the arguments' `spmd.fqn`/`spmd.role`). Errors, each a diagnostic at
/// `fn` naming the FQN and the reason: an entry that names no module (a
/// style) or no parameter (placements); a style on a module it does not
/// support (colwise/rowwise: nn.Linear, nn.Embedding; sequence_parallel:
/// nn.LayerNorm, nn.Dropout, RMSNorm); two entries giving one parameter
/// different placements or one module two styles; a placement that does
/// not fit its parameter; a MultiheadAttention whose in_proj is sharded
/// while its heads do not divide over `tpSize` ranks; a step captured
/// without `spmd.modules`.
mlir::FailureOr<TPResolution> resolveTPPlan(mlir::func::FuncOp fn,
                                            const TPPlan &plan, int64_t tpSize);

/// Puts each styled module's boundary layouts into `fn` as
/// spmd.sharding_constraint ops on the last mesh dim (tp) of the module's
/// one spmd.mesh (the other mesh dims free): inputs as the style's input
/// layouts and then its desired input layouts, outputs as its output layouts
/// (seed 002's defaults: colwise R -> S(-1), rowwise S(-1) -> R for Linear and
/// R -> R for Embedding, sequence_parallel S(sequence_dim) both ways). A
/// module's ops are the forward ops located in it; for a module that runs none
/// itself (nn.MultiheadAttention's out_proj, applied by its parent through
/// F.linear), the forward ops that read its parameters through views. Its
/// inputs are the values its ops read from outside (its own parameters
/// excluded), in order of first use; its outputs the values of its ops
/// that other forward ops read. Errors: a module that runs no op, an input
/// or output count that does not match the style's layouts, a layout that
/// does not fit the value, a module without exactly one mesh.
mlir::LogicalResult constrainTPBoundaries(mlir::func::FuncOp fn,
                                          const TPResolution &resolution);

/// A TP mode's checked options: the plan, resolved against the step.
struct TPConfig {
  /// The caller's options with the mesh names defaulted.
  ParallelOptions options;
  TPPlan plan;
  /// Points into `plan`.
  TPResolution resolution;
};

/// Checks `options` for TP mode `mode` ("tp", "fsdp-tp") on a mesh named
/// `names` (the mesh must have that many dims; the tp mesh dim is the last),
/// reads the `plan=FILE` option and resolves it against `module`'s
/// @train_step. Option keys: `plan`, `bucket-cap-mb`, `search` and
/// `known`. Errors: a diagnostic at the module (wrong mesh rank, an
/// unknown option, no plan) or whatever parseTPPlan/resolveTPPlan report.
mlir::FailureOr<std::unique_ptr<TPConfig>>
parseTPConfig(mlir::ModuleOp module, const ParallelOptions &options,
              llvm::StringRef mode, llvm::ArrayRef<std::string> names,
              llvm::ArrayRef<llvm::StringRef> known = {});

} // namespace spmd

#endif // SPMD_PARALLEL_TENSORPARALLEL_H
