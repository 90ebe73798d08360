//===- Parallelize.cpp - the embedding API --------------------------------===//

#include "spmd/Parallel/Parallelize.h"
#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"
#include "spmd/Parallel/ParallelMode.h"
#include "spmd/Parallel/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

void spmd::registerParallelizeDialects(DialectRegistry &registry) {
  registry.insert<func::FuncDialect, arith::ArithDialect, SPMDDialect,
                  aten::AtenDialect>();
}

LogicalResult
spmd::parallelize(ModuleOp module, StringRef mode, ArrayRef<int64_t> mesh,
                  ArrayRef<std::pair<std::string, std::string>> options) {
  registerBuiltinParallelModes();
  ParallelizePassOptions passOptions;
  passOptions.mode = mode.str();
  SmallVector<std::string> sizes;
  for (int64_t size : mesh)
    sizes.push_back(std::to_string(size));
  passOptions.mesh = llvm::join(sizes, "x");
  SmallVector<std::string> rest;
  for (const auto &[key, value] : options) {
    if (key == "bucket-cap-mb") {
      if (StringRef(value).getAsDouble(passOptions.bucketCapMb))
        return module.emitError("spmd::parallelize: bucket-cap-mb '")
               << value << "' is not a number";
    } else if (key == "overlap") {
      if (StringRef(value).getAsInteger(10, passOptions.overlap))
        return module.emitError("spmd::parallelize: overlap '")
               << value << "' is not a count";
    } else if (key == "placements") {
      passOptions.placements = value;
    } else {
      rest.push_back(key + "=" + value);
    }
  }
  passOptions.modeOptions = llvm::join(rest, ";");
  PassManager pm(module.getContext());
  pm.addPass(createParallelizePass(passOptions));
  return pm.run(module);
}
