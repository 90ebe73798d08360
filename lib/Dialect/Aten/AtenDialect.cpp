//===- AtenDialect.cpp - aten dialect -------------------------------------===//

#include "spmd/Dialect/Aten/Aten.h"

using namespace mlir;
using namespace spmd::aten;

#include "spmd/Dialect/Aten/AtenDialect.cpp.inc"

void AtenDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "spmd/Dialect/Aten/AtenOps.cpp.inc"
      >();
}
