//===- Parallelize.h - spmd as a compile step of a framework ----*- C++ -*-===//
//
// The embedding API: a framework that holds a captured training step as an
// MLIR ModuleOp (spmd-capture's output, or its own import into the aten
// dialect) turns it into the per-rank program with one call, as
// `spmd-opt --spmd-parallelize` does. Installed with the CMake package
// (`find_package(spmd)`, target `spmd::spmd`); examples/embed uses it.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_PARALLEL_PARALLELIZE_H
#define SPMD_PARALLEL_PARALLELIZE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <utility>
#include <vector>

namespace spmd {

/// Adds the dialects a captured step and its per-rank program use (func,
/// arith, spmd, aten) to `registry`; the context that parses the module
/// needs them.
void registerParallelizeDialects(mlir::DialectRegistry &registry);

/// Runs the ParallelMode `mode` ("ddp", "fsdp", or one registered by the
/// caller through spmd/Parallel/ParallelMode.h) on `module` for a device
/// mesh of shape `mesh` (e.g. {4} or {2, 2}): its partition and
/// transformAndCompile, so `module` becomes the per-rank program (local
/// types, spmd collectives, `spmd.layout` on every argument and result).
/// `options` are the mode's key/value options (`bucket-cap-mb`,
/// `placements`, ...) and `overlap` (collectives per class in flight,
/// --spmd-overlap-collectives; "0", the default, keeps them synchronous).
/// Errors: diagnostics through the module's context
/// (an unknown mode, a mesh that does not fit, invalid options, an op the
/// compiler cannot shard) and failure; `module` is then unspecified.
mlir::LogicalResult
parallelize(mlir::ModuleOp module, llvm::StringRef mode,
            llvm::ArrayRef<int64_t> mesh,
            llvm::ArrayRef<std::pair<std::string, std::string>> options = {});

} // namespace spmd

#endif // SPMD_PARALLEL_PARALLELIZE_H
