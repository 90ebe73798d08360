//===- embed.cpp - spmd as a library: parallelize a captured step ---------===//
//
// spmd-embed-example STEP.mlir MODE MESH [key=value ...]
//
// Parses a captured training step (spmd-capture's output), turns it into
// the per-rank program of MODE on a mesh MESH ("4", "2x2") with
// spmd::parallelize, and prints it. What a framework's compile step does
// with its own ModuleOp.
//
//===----------------------------------------------------------------------===//

#include "spmd/Parallel/Parallelize.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <string>

int main(int argc, char **argv) {
  if (argc < 4) {
    llvm::errs() << "usage: " << argv[0]
                 << " STEP.mlir MODE MESH [key=value ...]\n";
    return 2;
  }
  mlir::DialectRegistry registry;
  spmd::registerParallelizeDialects(registry);
  mlir::MLIRContext context(registry);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(argv[1], &context);
  if (!module)
    return 1;

  std::vector<int64_t> mesh;
  for (llvm::StringRef rest = argv[3]; !rest.empty();) {
    auto [size, tail] = rest.split('x');
    mesh.push_back(std::atoll(size.str().c_str()));
    rest = tail;
  }
  std::vector<std::pair<std::string, std::string>> options;
  for (int i = 4; i < argc; ++i) {
    auto [key, value] = llvm::StringRef(argv[i]).split('=');
    options.push_back({key.str(), value.str()});
  }
  if (mlir::failed(spmd::parallelize(*module, argv[2], mesh, options)))
    return 1;
  module->print(llvm::outs());
  return 0;
}
