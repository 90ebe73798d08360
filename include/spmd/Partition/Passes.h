//===- Passes.h - partition stage passes ------------------------*- C++ -*-===//
//
// `--spmd-partition` (the per-rank program) and `--spmd-report` (its
// collectives and memory): Passes.td, docs/partition.md.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PARTITION_PASSES_H
#define SPMD_PARTITION_PASSES_H

#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace spmd {

/// The predicted peak memory of one rank running a per-rank program, in
/// bytes: the arguments, plus the largest live set of op results (each
/// freed after its last use; views and waits share their operand's
/// buffer, which lives as long as they do; an asynchronous collective's
/// input lives until its wait): the lowering's buffer discipline, which
/// spmd-run's count matches. Split by what is live at the peak.
struct PeakMemory {
  /// Arguments by their `spmd.role`: "param", "optim_state", "grad" (a
  /// gradient carried from call to call), the rest.
  int64_t parameters = 0, optimizerState = 0, carriedGradients = 0,
          otherArguments = 0;
  /// The op results live at the peak that only move parameters: the
  /// gathers of parameter shards (fsdp's, whatever their phase), the parts
  /// kept from forward to backward (reshard-after-forward=N), and the
  /// casts, concatenations and rearrangements of parameters between them.
  int64_t gatheredParameters = 0;
  /// The other op results live at the peak by `spmd.phase`: forward and
  /// loss, backward, optimizer, none or another.
  int64_t forward = 0, backward = 0, update = 0, other = 0;

  int64_t arguments() const {
    return parameters + optimizerState + carriedGradients + otherArguments;
  }
  int64_t results() const {
    return gatheredParameters + forward + backward + update + other;
  }
  int64_t total() const { return arguments() + results(); }
};
PeakMemory predictPeakMemory(mlir::func::FuncOp fn);

/// What `--spmd-partition` does to `module` (Passes.td): every function
/// becomes its per-rank program. Fails, with the pass's diagnostics at the
/// offending ops, on the errors Passes.td lists; each rewritten op is
/// verified with its local types, the module as a whole is not.
mlir::LogicalResult partitionModule(mlir::ModuleOp module);

#define GEN_PASS_DECL
#include "spmd/Partition/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "spmd/Partition/Passes.h.inc"

} // namespace spmd

#endif // SPMD_PARTITION_PASSES_H
