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

namespace {
template <typename OpTy> bool isOptionalResultOf(TypeID op, unsigned i) {
  if constexpr (OpTy::hasOptionalResults)
    return op == TypeID::get<OpTy>() && OpTy::isOptionalResult(i);
  return false;
}

template <typename... Ops> bool isOptionalResult(TypeID op, unsigned i) {
  return (isOptionalResultOf<Ops>(op, i) || ...);
}
} // namespace

bool spmd::aten::isUncomputedResult(OpResult result) {
  return result.use_empty() && isOptionalResult<
#define GET_OP_LIST
#include "spmd/Dialect/Aten/AtenOps.cpp.inc"
                                   >(result.getOwner()->getName().getTypeID(),
                                     result.getResultNumber());
}
