//===- spmd-opt.cpp - spmd pass driver ------------------------------------===//
//
// mlir-opt-style driver with the dialects spmd programs use (func, arith,
// spmd, aten) and the project's passes only.
//
//===----------------------------------------------------------------------===//

#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::func::FuncDialect, mlir::arith::ArithDialect,
                  spmd::SPMDDialect, spmd::aten::AtenDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "spmd optimizer driver\n", registry));
}
