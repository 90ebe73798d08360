//===- ParallelMode.h - pluggable parallelization modes ---------*- C++ -*-===//
//
// A ParallelMode turns the single-device training step into the per-rank
// program of one parallelization scheme. It has the two entry points of
// PyTorch's `_spmd` ParallelMode (seed 003): `partition` (annotate the
// arguments' layouts, propagate, reshard, expand) and `transformAndCompile`
// (the mode's own optimizations of the per-rank program, e.g. DDP's
// gradient bucketing). Modes are registered by name; `--spmd-parallelize`
// and spmd::parallelize (the embedding API, spmd/Parallel/Parallelize.h)
// run the one named by `mode=`. A mode built outside the tree registers
// itself from an MLIR pass plugin (`spmd-opt --load-pass-plugin=...`).
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PARALLEL_PARALLELMODE_H
#define SPMD_PARALLEL_PARALLELMODE_H

#include "spmd/Layout/LayoutMath.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace spmd {

/// What a mode is asked to do: the device mesh and the mode's options.
struct ParallelOptions {
  /// Mesh shape, one size per mesh dim ("4" -> {4}, "2x2" -> {2, 2}).
  std::vector<int64_t> meshShape;
  /// Mesh dim names; defaults by mode ("dp"; "dp", "tp").
  std::vector<std::string> meshNames;
  /// Mode options as key -> value text (`bucket-cap-mb=25`,
  /// `placements=glob=layout;...`, `plan=FILE`, ...). A mode reports an
  /// option it does not know.
  llvm::StringMap<std::string> options;
  /// Runs a pass pipeline on the module (inside a pass: the pass's
  /// runPipeline, so failures and instrumentation propagate).
  std::function<mlir::LogicalResult(mlir::OpPassManager &, mlir::ModuleOp)>
      runPipeline;
};

/// A parallelization scheme (seed 003's ParallelMode).
class ParallelMode {
public:
  virtual ~ParallelMode();
  /// Annotates layouts, propagates, reshards and expands `module` (a
  /// captured `@train_step`) into the per-rank program. Errors: a
  /// diagnostic at the offending op or argument, and failure.
  virtual mlir::LogicalResult partition(mlir::ModuleOp module,
                                        const ParallelOptions &options) = 0;
  /// The mode's optimizations of the per-rank program; by default none.
  virtual mlir::LogicalResult
  transformAndCompile(mlir::ModuleOp module, const ParallelOptions &options);
};

using ParallelModeFactory = std::function<std::unique_ptr<ParallelMode>()>;

/// Registers a mode under `name` (replacing none: a second registration of
/// a name is ignored and returns false).
bool registerParallelMode(llvm::StringRef name, ParallelModeFactory factory);
/// A new instance of the mode registered as `name`, or null.
std::unique_ptr<ParallelMode> createParallelMode(llvm::StringRef name);
/// The registered names, sorted.
std::vector<std::string> getParallelModeNames();

/// The captured step, `@train_step` with a body; otherwise "a ParallelMode
/// needs a func.func @train_step with a body" at the module, and failure.
mlir::FailureOr<mlir::func::FuncOp> getTrainStep(mlir::ModuleOp module);

/// An argument's `spmd.fqn` and `spmd.role` (spmd-capture's names and
/// roles); "" where absent.
llvm::StringRef getArgFqn(mlir::func::FuncOp fn, unsigned i);
llvm::StringRef getArgRole(mlir::func::FuncOp fn, unsigned i);

/// The block argument `v` is, or that `v` casts (`aten._to_copy`: mixed
/// precision reads every parameter through its dtype cast); else null.
mlir::BlockArgument getCastArgument(mlir::Value v);

/// What every built-in mode checks of its options: a mesh of
/// `names.size()` dims ("<mode> runs on a K-D mesh (names); got a mesh of
/// N dims"), option keys among `known` ("<mode>: unknown option 'k'"),
/// each a diagnostic at the module. Returns the options with the mesh
/// names defaulted to `names`.
mlir::FailureOr<ParallelOptions>
checkModeOptions(mlir::ModuleOp module, const ParallelOptions &options,
                 llvm::StringRef mode, llvm::ArrayRef<std::string> names,
                 llvm::ArrayRef<llvm::StringRef> known);

/// Parses "4" or "2x2" into a mesh shape; fails on anything else (sizes must
/// be positive integers).
mlir::FailureOr<std::vector<int64_t>> parseMeshShape(llvm::StringRef text);

/// Parses a placement list as written inside #spmd.layout's brackets
/// ("shard<0>, replicate", "strided_shard<0, 3>", "partial<sum>") with the
/// spmd dialect's own parser; fails with the parser's message in `error`.
mlir::FailureOr<std::vector<layout::Placement>>
parsePlacements(mlir::MLIRContext *ctx, llvm::StringRef text,
                std::string &error);

/// fnmatch-style match of an FQN against a pattern, per dot-separated
/// component (seed 000: `layers.*.linear1` matches `layers.0.linear1`): each
/// component is an llvm::GlobPattern (`*`, `?`, `[0-9]`, `[!0]`, `{a,b}`),
/// so wildcards never cross a dot. A malformed component (`[` unclosed)
/// matches nothing.
bool matchFqn(llvm::StringRef pattern, llvm::StringRef fqn);

/// The shared first half of a data-parallel mode's partition: adds the
/// mesh `@mesh` (names from `options`), sets each `@train_step` argument's
/// `spmd.layout` to `layoutOf(role, fqn, type)` (null: Replicate), gives
/// an input or target that is not batched like the first input (its dim 0
/// differs, as a causal mask's; spmd-capture --accumulate's rule) the role
/// "" so that it stays Replicate unless an override names it, gives
/// each result that updates an argument that argument's layout, then runs
/// `--spmd-propagate --spmd-partition`, then `canonicalize` and `cse`,
/// through options.runPipeline.
/// `beforePropagate` may constrain the global program (insert fixed
/// redistributions, pin strategies) first.
mlir::LogicalResult annotateAndPartition(
    mlir::ModuleOp module, const ParallelOptions &options,
    llvm::function_ref<std::optional<std::vector<layout::Placement>>(
        llvm::StringRef role, llvm::StringRef fqn, mlir::RankedTensorType)>
        layoutOf,
    llvm::function_ref<mlir::LogicalResult(mlir::func::FuncOp)>
        beforePropagate = nullptr);

/// Registers the built-in modes of passes/ (ddp, fsdp, tp, fsdp-tp); the
/// tools and the embedding API call it (library SPMDParallelModes).
void registerBuiltinParallelModes();

} // namespace spmd

#endif // SPMD_PARALLEL_PARALLELMODE_H
