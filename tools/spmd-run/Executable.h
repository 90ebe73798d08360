//===- Executable.h - a per-rank program, lowered and JIT-compiled -*- C++ -*-//
//
// What spmd-run and the Python binding (libspmd_session) share: the layouts
// of the entry function's arguments and results, the lowering to runtime
// calls and JIT compilation with MLIR's ExecutionEngine, and the moves of a
// global array to and from the local piece one rank holds.
//
// Errors that end the job (a module the runtime cannot run, a layout that
// does not fit its global shape) go through spmd_rt_fatal, which names the
// rank: every rank of an SPMD job meets them at the same point.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_TOOLS_SPMD_RUN_EXECUTABLE_H
#define SPMD_TOOLS_SPMD_RUN_EXECUTABLE_H

#include "Bundle.h"

#include "spmd/Runtime/Runtime.h"

#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spmd::run {

/// What a runner needs of one argument or result of the entry function.
struct Slot {
  mlir::RankedTensorType type; // the local (per-rank) type
  std::string fqn;
  std::vector<layout::Placement> placements; // empty: replicated
  int64_t updates = -1;                      // results: the argument updated
};

/// The SpmdDType code of an element type spmd-run can load, or none.
std::optional<int32_t> dtypeOf(mlir::Type type);
std::string typeString(mlir::Type type);

/// The per-dim global indices the rank at `coords` holds of a tensor of
/// global shape `global` laid out as `slot` (all of them when replicated,
/// and along a Partial(sum) mesh dim, where each rank holds a summand of
/// the whole value). Fatal for another Partial reduction and for a layout
/// that does not fit `global`.
std::vector<std::vector<int64_t>> mapsFor(const Slot &slot,
                                          const std::vector<int64_t> &global,
                                          const std::vector<int64_t> &mesh,
                                          const std::vector<int64_t> &coords);

/// Whether `slot` is Partial along some mesh dim (each rank a summand).
bool hasPartial(const Slot &slot);

/// The piece of the whole value `global` that the rank at `coords` holds
/// laid out as `slot`, padded to `slot`'s local type: the region `maps`
/// (mapsFor's) and, along each Partial(sum) mesh dim, the value on
/// coordinate 0 and zeros on the others, so that the summands add up to
/// `global` (DTensor's Replicate -> Partial).
Array pieceFor(const Slot &slot, const Array &global,
               const std::vector<std::vector<int64_t>> &maps,
               const std::vector<int64_t> &coords);

/// Why a value of global shape `global` and dtype `dtype` cannot be `slot`
/// on `mesh` (the layout does not fit the shape, or the piece it gives,
/// padded to the largest as the partitioner pads, is not the slot's local
/// type), or "" when it can.
std::string misfit(const Slot &slot, const std::vector<int64_t> &global,
                   int32_t dtype, const std::vector<int64_t> &mesh);

/// A buffer's values; bf16 widened to f32 by the runtime's cast (.npy and
/// Array have no bf16).
Array fromBuffer(const SpmdBuffer *buffer);
/// A buffer of `dtype` holding `a`: the same dtype, or bf16 from f32 values,
/// rounded by the runtime's cast.
SpmdBuffer *toBuffer(const Array &a, int32_t dtype);

/// Assembles a value of global shape `global` from every rank's local piece
/// `local` (laid out as `slot` on `mesh`; summing the summands of a
/// Partial(sum) layout): on rank 0 only (`everyRank` false; the others get
/// an empty array of that shape) or on every rank. Collective over
/// MPI_COMM_WORLD.
Array gather(const SpmdBuffer *local, const Slot &slot,
             const std::vector<int64_t> &global,
             const std::vector<int64_t> &mesh, bool everyRank = false);

/// Adds the dialects a per-rank program uses (func, arith, llvm, spmd, aten)
/// and their LLVM IR translations to `registry`.
void registerExecutableDialects(mlir::DialectRegistry &registry);

/// A per-rank program: the device mesh and entry function of a partitioned
/// module, lowered (buildLowerToRuntimePipeline) and JIT-compiled against
/// the runtime library.
class Executable {
public:
  /// Reads the mesh and the slots of @`function` from `module`, sets the
  /// runtime's mesh, lowers `module` in place and JIT-compiles it at -O2.
  /// `runtimeLib` is the path of libspmd_runtime.so. Fatal when @`function`
  /// is missing, a slot's type has no runtime dtype, or lowering or JIT
  /// compilation fails (the lowering's diagnostics are printed first).
  static std::unique_ptr<Executable> create(mlir::ModuleOp module,
                                            llvm::StringRef function,
                                            llvm::StringRef runtimeLib);

  /// Runs the function once on this rank's local arguments (one buffer per
  /// argument slot, kept by the caller); returns the result buffers, which
  /// the caller owns. Fatal when the JIT reports an error.
  std::vector<SpmdBuffer *> invoke(std::vector<SpmdBuffer *> &args);

  std::vector<int64_t> mesh;
  std::vector<Slot> args, results;

private:
  std::string function;
  std::unique_ptr<mlir::ExecutionEngine> engine;
};

} // namespace spmd::run

#endif // SPMD_TOOLS_SPMD_RUN_EXECUTABLE_H
