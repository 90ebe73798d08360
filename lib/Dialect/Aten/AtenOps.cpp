//===- AtenOps.cpp - aten operations, shape and dtype inference -----------===//

#include "spmd/Dialect/Aten/Aten.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace spmd::aten;

#define GET_OP_CLASSES
#include "spmd/Dialect/Aten/AtenOps.cpp.inc"

LogicalResult MmOp::inferReturnTypes(MLIRContext *, std::optional<Location> loc,
                                     Adaptor adaptor,
                                     SmallVectorImpl<Type> &results) {
  auto a = llvm::cast<RankedTensorType>(adaptor.getSelf().getType());
  auto b = llvm::cast<RankedTensorType>(adaptor.getMat2().getType());
  if (a.getRank() != 2 || b.getRank() != 2 || a.getDimSize(1) != b.getDimSize(0))
    return emitOptionalError(loc, "mm: bad shapes");
  results.push_back(RankedTensorType::get({a.getDimSize(0), b.getDimSize(1)},
                                          a.getElementType()));
  return success();
}
