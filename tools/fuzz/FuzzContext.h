//===- FuzzContext.h - shared set-up of the spmd fuzz targets ---*- C++ -*-===//
//
// The fuzz targets (libFuzzer's LLVMFuzzerTestOneInput) parse and transform
// untrusted input with the dialects and passes spmd-opt registers. A target
// that finds no error message wrong only reports crashes, hangs and
// sanitizer findings: diagnostics are the expected answer and are dropped.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_TOOLS_FUZZ_FUZZCONTEXT_H
#define SPMD_TOOLS_FUZZ_FUZZCONTEXT_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"

#include <memory>

namespace spmd::fuzz {

/// Registers spmd-opt's passes and built-in ParallelModes and sends stdout
/// (spmd-report's tables) to /dev/null, once.
void initialize();

/// A fresh single-threaded context with spmd-opt's dialects whose
/// diagnostics are dropped (each input gets its own: attributes and types
/// interned by one input do not pile up across millions). With
/// SPMD_FUZZ_VERBOSE set in the environment they are printed instead.
std::unique_ptr<mlir::MLIRContext> makeContext();

/// Parses and verifies a NUL-terminated copy of `text`, as the tools parse
/// files, after spmd::checkMLIRSource (what MLIR's parser would crash on is
/// refused first); null on any error.
mlir::OwningOpRef<mlir::ModuleOp> parse(llvm::StringRef text,
                                        mlir::MLIRContext &context);

/// Runs the textual pass pipeline `pipeline` on builtin.module, without the
/// anchor (e.g. "spmd-parallelize{mode=ddp mesh=4},spmd-report"), on a clone of
/// `module`, then verifies the result; returns whether both succeeded.
bool runPipeline(mlir::ModuleOp module, llvm::StringRef pipeline);

} // namespace spmd::fuzz

#endif // SPMD_TOOLS_FUZZ_FUZZCONTEXT_H
