//===- PackEntryFunctions.cpp - entry buffers through pointer arrays ------===//
//
// After spmd-convert-to-runtime-calls, an entry function's tensors are
// `!llvm.ptr`s to `SpmdBuffer`s; this pass passes them through two arrays
// (`void f(SpmdBuffer *const *arguments, SpmdBuffer **results)`), so that
// a step's thousands of buffers are loads and stores rather than the
// operands of one call and one return. See docs/lowering.md.
//
//===----------------------------------------------------------------------===//

#include "spmd/Conversion/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

namespace spmd {
#define GEN_PASS_DEF_PACKENTRYFUNCTIONSPASS
#include "spmd/Conversion/Passes.h.inc"
} // namespace spmd

using namespace mlir;

namespace {

/// The address of slot `index` of the pointer array `array`.
Value slotAddress(OpBuilder &b, Location loc, Value array, int32_t index) {
  Type ptrType = array.getType();
  return LLVM::GEPOp::create(b, loc, ptrType, ptrType, array,
                             ArrayRef<LLVM::GEPArg>{index});
}

LogicalResult pack(func::FuncOp fn) {
  Type ptrType = LLVM::LLVMPointerType::get(fn.getContext());
  FunctionType type = fn.getFunctionType();
  auto notBuffer = [&](Type t) { return t != ptrType; };
  if (llvm::any_of(type.getInputs(), notBuffer) ||
      llvm::any_of(type.getResults(), notBuffer))
    return fn.emitOpError("cannot be packed as an entry function: an "
                          "argument or result is not a buffer (!llvm.ptr): ")
           << type;
  // One return to rewrite, as spmd-convert-to-runtime-calls leaves it.
  if (!fn.getBody().hasOneBlock())
    return fn.emitOpError("must have a single block to be packed as an "
                          "entry function");

  Block &entry = fn.front();
  Location loc = fn.getLoc();
  unsigned numInputs = type.getNumInputs();
  Value arguments = entry.addArgument(ptrType, loc);
  Value results = entry.addArgument(ptrType, loc);
  OpBuilder b(fn.getContext());
  b.setInsertionPointToStart(&entry);
  for (unsigned i = 0; i < numInputs; ++i) {
    Value buffer = LLVM::LoadOp::create(b, loc, ptrType,
                                        slotAddress(b, loc, arguments, i));
    entry.getArgument(i).replaceAllUsesWith(buffer);
  }
  entry.eraseArguments(0, numInputs);

  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  b.setInsertionPoint(ret);
  for (auto [j, value] : llvm::enumerate(ret.getOperands()))
    LLVM::StoreOp::create(b, ret.getLoc(), value,
                          slotAddress(b, ret.getLoc(), results, j));
  func::ReturnOp::create(b, ret.getLoc());
  ret.erase();

  fn.setFunctionType(
      FunctionType::get(fn.getContext(), {ptrType, ptrType}, {}));
  fn.removeArgAttrsAttr();
  fn.removeResAttrsAttr();
  return success();
}

struct PackEntryFunctionsPass
    : spmd::impl::PackEntryFunctionsPassBase<PackEntryFunctionsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTableCollection tables;
    SymbolUserMap users(tables, module);
    for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal() || !fn.isPublic() || !users.getUsers(fn).empty())
        continue;
      if (failed(pack(fn)))
        return signalPassFailure();
    }
  }
};

} // namespace
