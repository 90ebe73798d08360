//===- FuzzContext.cpp - shared set-up of the spmd fuzz targets -----------===//

#include "FuzzContext.h"

#include "spmd/Conversion/Passes.h"
#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Parallel/ParallelMode.h"
#include "spmd/Parallel/Passes.h"
#include "spmd/Partition/Passes.h"
#include "spmd/Propagate/Passes.h"
#include "spmd/Support/MLIRSource.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>

using namespace mlir;

/// SPMD_FUZZ_VERBOSE set: print what each input gives (read once).
static bool verbose() {
  static const bool set = std::getenv("SPMD_FUZZ_VERBOSE");
  return set;
}

void spmd::fuzz::initialize() {
  static bool done = [] {
    // spmd-report prints its table to stdout: not the fuzzer's business.
    if (!std::freopen("/dev/null", "w", stdout))
      abort();
    registerSPMDPropagatePasses();
    registerSPMDParallelPasses();
    registerBuiltinParallelModes();
    registerSPMDPartitionPasses();
    registerConversionPasses();
    return true;
  }();
  (void)done;
}

std::unique_ptr<MLIRContext> spmd::fuzz::makeContext() {
  DialectRegistry registry;
  registry.insert<func::FuncDialect, arith::ArithDialect, LLVM::LLVMDialect,
                  SPMDDialect, aten::AtenDialect>();
  auto context =
      std::make_unique<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  // SPMD_FUZZ_VERBOSE=1 prints them, to see what a reproducer does.
  context->getDiagEngine().registerHandler([](Diagnostic &diag) {
    if (verbose())
      llvm::errs() << diag.getLocation() << ": " << diag.str() << "\n";
    return success();
  });
  return context;
}

OwningOpRef<ModuleOp> spmd::fuzz::parse(llvm::StringRef text,
                                        MLIRContext &context) {
  if (llvm::Error e = checkMLIRSource(text)) {
    std::string why = llvm::toString(std::move(e));
    if (verbose())
      llvm::errs() << "input: " << why << "\n";
    return nullptr;
  }
  // As the tools read files: a NUL-terminated copy (MLIR's lexer reads up
  // to the terminator; libFuzzer's data has none).
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(llvm::MemoryBuffer::getMemBufferCopy(text),
                               llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

bool spmd::fuzz::runPipeline(ModuleOp module, llvm::StringRef pipeline) {
  OwningOpRef<ModuleOp> clone = module.clone();
  PassManager pm(module.getContext());
  std::string error;
  llvm::raw_string_ostream errorStream(error);
  if (failed(parsePassPipeline(pipeline, pm, errorStream))) {
    llvm::errs() << "spmd fuzz target: bad pipeline '" << pipeline
                 << "': " << error << "\n";
    abort(); // the target's own bug, not the input's
  }
  bool ok = succeeded(pm.run(*clone)) && succeeded(verify(*clone));
  if (verbose())
    llvm::errs() << pipeline << ": " << (ok ? "ok" : "failed") << "\n";
  return ok;
}
