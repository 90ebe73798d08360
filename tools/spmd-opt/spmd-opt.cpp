//===- spmd-opt.cpp - spmd pass driver ------------------------------------===//
//
// mlir-opt-style driver with the dialects spmd programs use (func, arith,
// llvm, spmd, aten), the project's passes, and `canonicalize` and `cse`
// (which --spmd-parallelize runs between its stages) to run beside them.
//
// `spmd-opt --spmd-list-ops` prints the name of every registered operation,
// one per line, and exits: spmd-capture asks it which ATen ops the `aten`
// dialect has before it writes a module.
//
//===----------------------------------------------------------------------===//

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
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

namespace spmd::test {
void registerTestPasses();
} // namespace spmd::test

static int listOperations(const mlir::DialectRegistry &registry) {
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  for (mlir::RegisteredOperationName op : context.getRegisteredOperations())
    llvm::outs() << op.getStringRef() << "\n";
  return 0;
}

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  mlir::LLVM::LLVMDialect, spmd::SPMDDialect,
                  spmd::aten::AtenDialect>();
  spmd::registerSPMDPropagatePasses();
  spmd::registerSPMDParallelPasses();
  spmd::registerBuiltinParallelModes();
  spmd::registerSPMDPartitionPasses();
  spmd::registerConversionPasses();
  spmd::test::registerTestPasses();
  mlir::registerCanonicalizer();
  mlir::registerCSE();
  if (argc == 2 && llvm::StringRef(argv[1]) == "--spmd-list-ops")
    return listOperations(registry);
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "spmd optimizer driver\n", registry);
  // MlirOptMain's own driver, with one step added: what MLIR's parser would
  // crash on gets an error instead (spmd::checkMLIRSource).
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    for (llvm::StringRef name : registry.getDialectNames())
      llvm::outs() << name << "\n";
    return 0;
  }
  if (config.shouldListPasses()) {
    mlir::printRegisteredPasses();
    return 0;
  }
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << "spmd-opt: error: " << error << "\n";
    return 1;
  }
  if (llvm::Error e = spmd::checkMLIRSource(input->getBuffer())) {
    llvm::errs() << input->getBufferIdentifier()
                 << ": error: " << llvm::toString(std::move(e)) << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "spmd-opt: error: " << error << "\n";
    return 1;
  }
  if (mlir::failed(
          mlir::MlirOptMain(output->os(), std::move(input), registry, config)))
    return 1;
  output->keep();
  return 0;
}
