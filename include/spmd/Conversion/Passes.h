//===- Passes.h - lowering stage passes -------------------------*- C++ -*-===//
//
// `--spmd-lower-to-runtime` (buildLowerToRuntimePipeline): runtime calls
// (spmd-convert-to-runtime-calls), the entry functions' buffers through
// pointer arrays (spmd-pack-entry-functions), then MLIR's func/arith to LLVM
// conversions; the result is an LLVM-dialect module that MLIR's
// ExecutionEngine JIT-compiles (spmd-run) or that translates to LLVM IR.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_CONVERSION_PASSES_H
#define SPMD_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace spmd {

#define GEN_PASS_DECL
#include "spmd/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "spmd/Conversion/Passes.h.inc"

/// Adds the lowering to runtime calls and to the LLVM dialect to `pm`.
void buildLowerToRuntimePipeline(mlir::OpPassManager &pm);

/// Registers the passes of this stage and the `spmd-lower-to-runtime`
/// pipeline.
void registerConversionPasses();

} // namespace spmd

#endif // SPMD_CONVERSION_PASSES_H
