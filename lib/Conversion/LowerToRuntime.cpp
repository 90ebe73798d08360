//===- LowerToRuntime.cpp - aten/spmd ops to runtime calls ----------------===//
//
// Tensors become `SpmdBuffer *` (`!llvm.ptr`) and ops become calls of the
// runtime's C ABI (runtime/include/spmd/Runtime/Runtime.h), with MLIR's
// dialect conversion; then func and arith go to LLVM with MLIR's own
// conversions. See docs/lowering.md.
//
//===----------------------------------------------------------------------===//

#include "spmd/Conversion/Passes.h"
#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Dialect/SPMD/SPMD.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/DialectConversion.h"
#include "llvm/ADT/TypeSwitch.h"

#include "spmd/Runtime/Runtime.h"

#include <type_traits>
#include <variant>

namespace spmd {
#define GEN_PASS_DEF_CONVERTTORUNTIMECALLSPASS
#include "spmd/Conversion/Passes.h.inc"
} // namespace spmd

using namespace mlir;
namespace aten = spmd::aten;

namespace {

/// The runtime's SpmdDType code of an element type (Runtime.h), if any.
std::optional<int32_t> dtypeCode(Type type) {
  if (type.isF32())
    return 0;
  if (type.isF64())
    return 1;
  if (type.isF16())
    return 2;
  if (type.isBF16())
    return 3;
  if (type.isInteger(64))
    return 4;
  if (type.isInteger(32))
    return 5;
  if (type.isInteger(1))
    return 6;
  return std::nullopt;
}

/// The C type of a runtime function's parameter or result, as the lowering
/// passes it.
enum class CType { Void, Pointer, I32, I64, F64 };

template <typename T> constexpr CType cTypeOf() {
  if constexpr (std::is_void_v<T>)
    return CType::Void;
  else if constexpr (std::is_pointer_v<T>)
    return CType::Pointer;
  else if constexpr (std::is_same_v<T, int32_t>)
    return CType::I32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return CType::I64;
  else if constexpr (std::is_same_v<T, double>)
    return CType::F64;
  else
    static_assert(sizeof(T) == 0, "a runtime parameter of an unmapped C type");
}

/// A runtime function with its C signature (MLIR's FunctionCallBuilder):
/// calls are checked against it and it is declared from it.
struct Callee {
  StringRef name;
  CType result;
  ArrayRef<CType> params;
};

template <typename Fn> struct CSignature;
template <typename R, typename... A> struct CSignature<R(A...)> {
  static constexpr CType result = cTypeOf<R>();
  // One more slot than parameters: no zero-length array.
  static constexpr CType params[sizeof...(A) + 1] = {cTypeOf<A>()...,
                                                     CType::Void};
  static constexpr size_t size = sizeof...(A);
};

/// The Callee of runtime function `fn` (Runtime.h): a name that is not
/// declared there does not compile.
#define SPMD_CALLEE(fn) calleeOf<decltype(fn)>(#fn)

template <typename Fn> Callee calleeOf(StringRef name) {
  using S = CSignature<Fn>;
  return {name, S::result, ArrayRef<CType>(S::params, S::size)};
}

/// The Callee of a compute kernel (KernelList.def).
Callee kernelCallee(spmd::RuntimeKernel kernel) {
  static const Callee kernels[] = {
#define SPMD_RT_KERNEL(name, params, args) SPMD_CALLEE(spmd_rt_##name),
#include "spmd/Runtime/KernelList.def"
  };
  return kernels[static_cast<size_t>(kernel)];
}

/// An argument of a runtime call: a value, or a number attribute converted
/// to the C type of its parameter.
using CallArg = std::variant<Value, Attribute>;

/// Builds the arguments of runtime calls at one insertion point: constants,
/// constant i64 arrays (module globals, shared by value), allocations and
/// declarations of the runtime functions.
class CallBuilder {
public:
  CallBuilder(ConversionPatternRewriter &rewriter, Operation *op)
      : rewriter(rewriter), op(op), loc(op->getLoc()),
        module(op->getParentOfType<ModuleOp>()),
        ptrType(LLVM::LLVMPointerType::get(op->getContext())) {}

  Value i32(int64_t v) {
    return arith::ConstantIntOp::create(rewriter, loc, v, 32);
  }
  Value i64(int64_t v) {
    return arith::ConstantIntOp::create(rewriter, loc, v, 64);
  }
  Value f64(double v) {
    return arith::ConstantFloatOp::create(rewriter, loc, rewriter.getF64Type(),
                                          APFloat(v));
  }
  Value null() { return LLVM::ZeroOp::create(rewriter, loc, ptrType); }

  /// The address of a constant global holding `values` (null when empty).
  Value i64Array(ArrayRef<int64_t> values) {
    if (values.empty())
      return null();
    auto type = RankedTensorType::get({static_cast<int64_t>(values.size())},
                                      rewriter.getI64Type());
    return global(DenseElementsAttr::get(type, values), "__spmd_i64_");
  }

  /// The address of a constant global holding `data`, flattened.
  Value global(DenseElementsAttr data, StringRef prefix) {
    auto flat = data.reshape(RankedTensorType::get(
        {data.getType().getNumElements()}, data.getElementType()));
    LLVM::GlobalOp global = lookupGlobal(flat, prefix);
    if (!global) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      auto arrayType = LLVM::LLVMArrayType::get(flat.getElementType(),
                                                flat.getNumElements());
      std::string name;
      for (unsigned i = 0;; ++i) {
        name = (prefix + Twine(i)).str();
        if (!SymbolTable::lookupSymbolIn(module, name))
          break;
      }
      global = LLVM::GlobalOp::create(rewriter, loc, arrayType,
                                      /*isConstant=*/true,
                                      LLVM::Linkage::Internal, name, flat);
    }
    return LLVM::AddressOfOp::create(rewriter, loc, global);
  }

  /// A new buffer of `type`'s element type and static shape.
  Value alloc(RankedTensorType type) {
    std::optional<int32_t> dtype = dtypeCode(type.getElementType());
    if (!dtype) {
      op->emitOpError("result element type ")
          << type << " has no runtime dtype";
      hasFailed = true;
      return null();
    }
    return call(SPMD_CALLEE(spmd_rt_alloc),
                {i32(*dtype), i32(type.getRank()), i64Array(type.getShape())});
  }

  /// Calls `callee`, declaring it from its C signature on first use. A
  /// number attribute becomes a constant of its parameter's type; an
  /// argument list that does not match the signature is an error of the op
  /// being lowered (failed() then holds).
  Value call(const Callee &callee, ArrayRef<CallArg> args) {
    SmallVector<Type> params;
    for (CType t : callee.params)
      params.push_back(typeOf(t));
    SmallVector<Type> results;
    if (callee.result != CType::Void)
      results.push_back(typeOf(callee.result));
    SmallVector<Value> values;
    for (auto [i, arg] : llvm::enumerate(args)) {
      Value v = i < params.size() ? convert(arg, params[i]) : Value();
      if (!v || v.getType() != params[i])
        return mismatch(callee, args);
      values.push_back(v);
    }
    if (values.size() != params.size())
      return mismatch(callee, args);
    auto fnType = rewriter.getFunctionType(params, results);
    if (auto existing = module.lookupSymbol<func::FuncOp>(callee.name)) {
      if (existing.getFunctionType() != fnType) {
        op->emitOpError("runtime function ")
            << callee.name << " is declared as " << existing.getFunctionType()
            << "; the runtime's is " << fnType;
        hasFailed = true;
        return {};
      }
    } else {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      auto fn = func::FuncOp::create(rewriter, loc, callee.name, fnType);
      fn.setPrivate();
    }
    auto callOp =
        func::CallOp::create(rewriter, loc, callee.name, results, values);
    return results.empty() ? Value() : callOp.getResult(0);
  }

  /// Whether a call or an allocation failed (with a diagnostic).
  bool failed() const { return hasFailed; }

  /// A stack array of the buffer pointers `values` (for spmd_rt_cat).
  Value pointerArray(ValueRange values) {
    Value array = LLVM::AllocaOp::create(rewriter, loc, ptrType, ptrType,
                                         i64(values.size()));
    for (auto [i, v] : llvm::enumerate(values)) {
      Value slot = LLVM::GEPOp::create(rewriter, loc, ptrType, ptrType, array,
                                       ArrayRef<LLVM::GEPArg>{int32_t(i)});
      LLVM::StoreOp::create(rewriter, loc, v, slot);
    }
    return array;
  }

  Type getPtrType() const { return ptrType; }

private:
  Type typeOf(CType t) {
    switch (t) {
    case CType::Pointer:
      return ptrType;
    case CType::I32:
      return rewriter.getI32Type();
    case CType::I64:
      return rewriter.getI64Type();
    case CType::F64:
      return rewriter.getF64Type();
    case CType::Void:
      break;
    }
    llvm_unreachable("void is not a parameter type");
  }

  /// `arg` as a value of `type`: a number attribute becomes a constant
  /// (integers and bools as i32/i64, any number as f64); null when it
  /// cannot.
  Value convert(const CallArg &arg, Type type) {
    if (auto *v = std::get_if<Value>(&arg))
      return *v;
    Attribute attr = std::get<Attribute>(arg);
    if (auto b = dyn_cast<BoolAttr>(attr))
      attr = rewriter.getI64IntegerAttr(b.getValue());
    if (type.isF64() && isa<IntegerAttr, FloatAttr>(attr))
      return f64(aten::getScalarValue(attr));
    if (auto i = dyn_cast<IntegerAttr>(attr); i && type.isInteger(64))
      return i64(i.getInt());
    if (auto i = dyn_cast<IntegerAttr>(attr); i && type.isInteger(32))
      return i32(i.getInt());
    return {};
  }

  Value mismatch(const Callee &callee, ArrayRef<CallArg> args) {
    InFlightDiagnostic diag = op->emitOpError("lowering passes (");
    llvm::interleaveComma(args, diag, [&](const CallArg &arg) {
      if (auto *v = std::get_if<Value>(&arg))
        diag << v->getType();
      else
        diag << std::get<Attribute>(arg);
    });
    diag << ") to " << callee.name << ", which takes (";
    llvm::interleaveComma(callee.params, diag,
                          [&](CType t) { diag << typeOf(t); });
    diag << ")";
    hasFailed = true;
    return {};
  }

  LLVM::GlobalOp lookupGlobal(DenseElementsAttr value, StringRef prefix) {
    for (auto global : module.getOps<LLVM::GlobalOp>())
      if (global.getSymName().starts_with(prefix) && global.getConstant() &&
          global.getValueAttr() == value)
        return global;
    return {};
  }

  ConversionPatternRewriter &rewriter;
  Operation *op;
  Location loc;
  ModuleOp module;
  Type ptrType;
  bool hasFailed = false;
};

/// Random op ids, numbered in function order before conversion starts.
using RandomIds = llvm::DenseMap<Operation *, int64_t>;
/// Transposes of the last two dims whose every use is a matrix operand of a
/// matrix product: they cost nothing (BLAS reads the operand transposed).
using FoldedTransposes = llvm::DenseSet<Operation *>;

/// What the patterns share: the random op ids and the folded transposes.
struct LoweringState {
  RandomIds randomIds;
  FoldedTransposes folds;
  /// The collectives that start asynchronously, and the waits that
  /// complete them (spmd.wait).
  llvm::DenseSet<Operation *> asyncCollectives, completingWaits;
  /// Ranks of the program's mesh (1 without one).
  int64_t numRanks = 1;
  /// The program's meshes as dims of the runtime's (refined) mesh.
  spmd::MeshRefinement meshes;
};

/// A matrix operand of a matrix product: its last two operands.
bool isMatrixOperand(OpOperand &use) {
  Operation *user = use.getOwner();
  return user->hasTrait<aten::OpTrait::MatrixProduct>() &&
         use.getOperandNumber() + 2 >= user->getNumOperands();
}

FoldedTransposes findFoldedTransposes(ModuleOp module) {
  FoldedTransposes folds;
  module.walk([&](aten::PermutationOpInterface op) {
    int64_t rank = cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
    if (rank != 2 && rank != 3)
      return;
    auto swapLastTwo = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(swapLastTwo[rank - 1], swapLastTwo[rank - 2]);
    if (op.getPermutation() == ArrayRef<int64_t>(swapLastTwo) &&
        !op->getResult(0).use_empty() &&
        llvm::all_of(op->getResult(0).getUses(), isMatrixOperand))
      folds.insert(op);
  });
  return folds;
}

/// Allocates `op`'s results, calls `kernel` with them followed by `args`
/// and replaces the op by them. A result the kernel does not compute
/// (aten::isUncomputedResult: ATen's `output_mask`) is passed as NULL: no
/// buffer, no work.
LogicalResult callKernel(Operation *op, spmd::RuntimeKernel kernel,
                         ArrayRef<CallArg> args, CallBuilder &b,
                         ConversionPatternRewriter &rewriter) {
  SmallVector<CallArg> all;
  SmallVector<Value> results;
  for (OpResult result : op->getResults()) {
    results.push_back(aten::isUncomputedResult(result)
                          ? b.null()
                          : b.alloc(cast<RankedTensorType>(result.getType())));
    all.push_back(results.back());
  }
  llvm::append_range(all, args);
  b.call(kernelCallee(kernel), all);
  if (b.failed())
    return failure();
  rewriter.replaceOp(op, results);
  return success();
}

/// The call arguments of an op's KernelArguments (getKernelArguments(),
/// generated from the op list), `operands` already converted.
SmallVector<CallArg> callArgs(ArrayRef<aten::KernelArgument> kernelArgs,
                              ValueRange operands, CallBuilder &b) {
  SmallVector<CallArg> args;
  for (const aten::KernelArgument &k : kernelArgs) {
    switch (k.kind) {
    case aten::KernelArgument::Kind::Operands: {
      ValueRange group = operands.slice(k.begin, k.length);
      if (k.variadic) {
        args.push_back(b.i32(group.size()));
        args.push_back(b.pointerArray(group));
      } else {
        args.push_back(group.empty() ? b.null() : group.front());
      }
      break;
    }
    case aten::KernelArgument::Kind::Number:
      args.push_back(k.number);
      break;
    case aten::KernelArgument::Kind::Integers:
      args.push_back(b.i32(k.integers.size()));
      args.push_back(b.i64Array(k.integers));
      break;
    }
  }
  return args;
}

/// This rank's row of a per-rank table attribute `name` (rows of
/// `rowLength`), or null when `op` has none.
Value rankRow(Operation *op, StringRef name, int64_t rowLength,
              CallBuilder &b) {
  auto table = op->getAttrOfType<DenseI64ArrayAttr>(name);
  if (!table)
    return {};
  return b.call(SPMD_CALLEE(spmd_rt_rank_row),
                {b.i64Array(table.asArrayRef()), b.i64(rowLength)});
}

/// Per-op changes to the generic kernel call; the default changes nothing.
/// A vocabulary-sharded embedding and a class-sharded nll_loss
/// (spmd-partition) call the `_rows` variant with this rank's row of the
/// {begin, count, size} table.
template <typename OpTy>
void adjustKernelCall(OpTy, spmd::RuntimeKernel &, SmallVector<CallArg> &,
                      CallBuilder &) {}
template <>
void adjustKernelCall(aten::EmbeddingOp op, spmd::RuntimeKernel &kernel,
                      SmallVector<CallArg> &args, CallBuilder &b) {
  if (Value rows = rankRow(op, "spmd.vocab_rows", 3, b)) {
    kernel = spmd::RuntimeKernel::embedding_rows;
    args.back() = rows; // in place of padding_idx
  }
}
/// Where `op` carries the per-rank table `attr`, calls `rowsKernel` with
/// this rank's row appended.
static void appendRows(Operation *op, StringRef attr,
                       spmd::RuntimeKernel rowsKernel,
                       spmd::RuntimeKernel &kernel, SmallVector<CallArg> &args,
                       CallBuilder &b) {
  if (Value rows = rankRow(op, attr, 3, b)) {
    kernel = rowsKernel;
    args.push_back(rows);
  }
}
template <>
void adjustKernelCall(aten::EmbeddingDenseBackwardOp op,
                      spmd::RuntimeKernel &kernel, SmallVector<CallArg> &args,
                      CallBuilder &b) {
  appendRows(op, "spmd.vocab_rows",
             spmd::RuntimeKernel::embedding_dense_backward_rows, kernel, args,
             b);
}
template <>
void adjustKernelCall(aten::NllLossForwardOp op, spmd::RuntimeKernel &kernel,
                      SmallVector<CallArg> &args, CallBuilder &b) {
  appendRows(op, "spmd.class_rows", spmd::RuntimeKernel::nll_loss_forward_rows,
             kernel, args, b);
}
template <>
void adjustKernelCall(aten::NllLossBackwardOp op, spmd::RuntimeKernel &kernel,
                      SmallVector<CallArg> &args, CallBuilder &b) {
  appendRows(op, "spmd.class_rows", spmd::RuntimeKernel::nll_loss_backward_rows,
             kernel, args, b);
}

/// A family pattern that reads the LoweringState.
template <typename OpTy> struct StatefulPattern : OpConversionPattern<OpTy> {
  StatefulPattern(const TypeConverter &converter, MLIRContext *ctx,
                  const LoweringState &state)
      : OpConversionPattern<OpTy>(converter, ctx), state(state) {}

  const LoweringState &state;
};

/// Ops with a runtime kernel: the results, then the op's kernel arguments;
/// random ops (the Random trait) also pass their id and the global shape
/// and offset of this rank's piece, so that a shard draws the numbers of
/// the unsharded op.
template <typename OpTy> struct KernelToCall : StatefulPattern<OpTy> {
  using StatefulPattern<OpTy>::StatefulPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CallBuilder b(rewriter, op);
    spmd::RuntimeKernel kernel = *OpTy::getRuntimeKernel();
    SmallVector<CallArg> args =
        callArgs(op.getKernelArguments(), adaptor.getOperands(), b);
    adjustKernelCall(op, kernel, args, b);
    if constexpr (OpTy::template hasTrait<aten::OpTrait::Random>()) {
      auto type = cast<RankedTensorType>(op->getResult(0).getType());
      args.push_back(b.i64(this->state.randomIds.lookup(op)));
      if (Value offsets = rankRow(op, "spmd.global_offsets", type.getRank(),
                                  b)) {
        args.push_back(b.i64Array(
            op->template getAttrOfType<DenseI64ArrayAttr>("spmd.global_shape")
                .asArrayRef()));
        args.push_back(offsets);
      } else {
        args.push_back(b.i64Array(type.getShape()));
        args.push_back(b.i64Array(SmallVector<int64_t>(type.getRank(), 0)));
      }
    }
    return callKernel(op, kernel, args, b, rewriter);
  }
};

/// Matrix products: one GEMM kernel for the family; a folded transpose of a
/// matrix operand becomes a BLAS transpose flag.
template <typename OpTy> struct MatmulToCall : StatefulPattern<OpTy> {
  using StatefulPattern<OpTy>::StatefulPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CallBuilder b(rewriter, op);
    ValueRange operands = adaptor.getOperands();
    unsigned first = operands.size() - 2;
    auto folded = [&](unsigned i) {
      Operation *def = op->getOperand(i).getDefiningOp();
      return b.i64(def && this->state.folds.contains(def));
    };
    return callKernel(op, *OpTy::getRuntimeKernel(),
                      {first ? operands[0] : b.null(), operands[first],
                       operands[first + 1], b.f64(op.getBetaValue()),
                       b.f64(op.getAlphaValue()), folded(first),
                       folded(first + 1)},
                      b, rewriter);
  }
};

/// Same elements, same order: share the data (spmd_rt_view).
template <typename OpTy> struct ViewToCall : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CallBuilder b(rewriter, op);
    auto type = cast<RankedTensorType>(op->getResult(0).getType());
    Value view = b.call(SPMD_CALLEE(spmd_rt_view),
                        {adaptor.getOperands()[0], b.i32(type.getRank()),
                         b.i64Array(type.getShape())});
    if (b.failed())
      return failure();
    rewriter.replaceOp(op, view);
    return success();
  }
};

/// Splits: one slice per piece, each starting where the previous one ended.
template <typename OpTy> struct SplitToCall : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;

  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CallBuilder b(rewriter, op);
    int64_t dim = aten::normalizeDim(op.getDim(),
                                     op.getSelf().getType().getRank());
    SmallVector<Value> pieces;
    int64_t start = 0;
    for (Type type : op->getResultTypes()) {
      auto piece = cast<RankedTensorType>(type);
      pieces.push_back(b.alloc(piece));
      b.call(SPMD_CALLEE(spmd_rt_slice), {pieces.back(), adaptor.getSelf(),
                                          b.i64(dim), b.i64(start), b.i64(1)});
      start += piece.getDimSize(dim);
    }
    if (b.failed())
      return failure();
    rewriter.replaceOp(op, pieces);
    return success();
  }
};

/// Registers the pattern of `OpTy`'s family; a folded transpose is replaced
/// by its operand (its users read it transposed).
template <typename OpTy>
void addAtenPattern(RewritePatternSet &patterns,
                    const TypeConverter &converter,
                    const LoweringState &state) {
  MLIRContext *ctx = patterns.getContext();
  if constexpr (OpTy::template hasTrait<aten::OpTrait::SameElementsView>())
    patterns.add<ViewToCall<OpTy>>(converter, ctx);
  else if constexpr (OpTy::template hasTrait<aten::OpTrait::Split>())
    patterns.add<SplitToCall<OpTy>>(converter, ctx);
  else if constexpr (OpTy::template hasTrait<aten::OpTrait::MatrixProduct>())
    patterns.add<MatmulToCall<OpTy>>(converter, ctx, state);
  else if constexpr (OpTy::getRuntimeKernel().has_value())
    patterns.add<KernelToCall<OpTy>>(converter, ctx, state);
  else
    static_assert(sizeof(OpTy) == 0, "an aten op with no lowering");
}

/// The patterns of every aten op (the dialect's op list), by family.
template <typename... OpTys>
void addAtenPatterns(RewritePatternSet &patterns,
                     const TypeConverter &converter,
                     const LoweringState &state) {
  (addAtenPattern<OpTys>(patterns, converter, state), ...);
}

/// A transpose that only feeds matrix operands: its users read its operand
/// transposed (MatmulToCall's flags). Outranks the family patterns.
struct FoldTranspose : ConversionPattern {
  FoldTranspose(const TypeConverter &converter, MLIRContext *ctx,
                const LoweringState &state)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/2, ctx),
        state(state) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (!state.folds.contains(op))
      return failure();
    rewriter.replaceOp(op, operands[0]);
    return success();
  }

  const LoweringState &state;
};

/// The spmd collectives and local_take: their own runtime entry points.
struct CollectiveToCall : ConversionPattern {
  CollectiveToCall(const TypeConverter &converter, MLIRContext *ctx,
                   const LoweringState &state)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        state(state) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isa<spmd::CollectiveOpInterface, spmd::LocalTakeOp>(op))
      return failure();
    CallBuilder b(rewriter, op);
    // A collective's group first: its mesh dims as (count, array).
    SmallVector<CallArg> args;
    if (auto collective = dyn_cast<spmd::CollectiveOpInterface>(op)) {
      SmallVector<int64_t> meshDims = state.meshes.refine(
          collective.getMeshAttr().getValue(), collective.getMeshDims());
      args = {b.i32(meshDims.size()), b.i64Array(meshDims)};
    }
    // An asynchronous collective calls the `_start` form (same arguments).
    bool async = state.asyncCollectives.contains(op);
    Callee callee =
        llvm::TypeSwitch<Operation *, Callee>(op)
            .Case([&](spmd::AllReduceOp o) {
              args.push_back(b.i32(static_cast<int32_t>(o.getReduce())));
              return async ? SPMD_CALLEE(spmd_rt_all_reduce_start)
                           : SPMD_CALLEE(spmd_rt_all_reduce);
            })
            .Case([&](spmd::AllGatherOp o) {
              args.push_back(b.i64(o.getGatherDimAttr().getInt()));
              return async ? SPMD_CALLEE(spmd_rt_all_gather_start)
                           : SPMD_CALLEE(spmd_rt_all_gather);
            })
            .Case([&](spmd::ReduceScatterOp o) {
              args.push_back(b.i64(o.getScatterDimAttr().getInt()));
              args.push_back(b.i32(static_cast<int32_t>(o.getReduce())));
              return async ? SPMD_CALLEE(spmd_rt_reduce_scatter_start)
                           : SPMD_CALLEE(spmd_rt_reduce_scatter);
            })
            .Case([&](spmd::AllToAllOp o) {
              args.push_back(b.i64(o.getSplitDimAttr().getInt()));
              args.push_back(b.i64(o.getConcatDimAttr().getInt()));
              return async ? SPMD_CALLEE(spmd_rt_all_to_all_start)
                           : SPMD_CALLEE(spmd_rt_all_to_all);
            })
            .Case([&](spmd::BroadcastOp o) {
              args.push_back(b.i64(o.getRootAttr().getInt()));
              return async ? SPMD_CALLEE(spmd_rt_broadcast_start)
                           : SPMD_CALLEE(spmd_rt_broadcast);
            })
            .Case([&](spmd::LocalTakeOp o) {
              args.push_back(b.i64(o.getDim()));
              if (auto indices = o.getIndicesAttr()) {
                args.push_back(b.i64Array(indices.asArrayRef()));
                args.push_back(b.f64(o.getFill().convertToDouble()));
                return SPMD_CALLEE(spmd_rt_local_take);
              }
              // Uniform runs are every rank's: no per-rank offset.
              ArrayRef<int64_t> starts = o.getStartsAttr().asArrayRef();
              int64_t runs = static_cast<int64_t>(starts.size()) /
                             (o.getUniform() ? 1 : state.numRanks);
              args.push_back(b.i64(runs));
              args.push_back(b.i64(o.getUniform() ? 0 : runs));
              args.push_back(b.i64Array(starts));
              args.push_back(b.i64Array(o.getCountsAttr().asArrayRef()));
              args.push_back(b.f64(o.getFill().convertToDouble()));
              return SPMD_CALLEE(spmd_rt_local_take_runs);
            });
    SmallVector<CallArg> all = {b.alloc(cast<RankedTensorType>(
                                    op->getResult(0).getType())),
                                operands[0]};
    llvm::append_range(all, args);
    b.call(callee, all);
    if (b.failed())
      return failure();
    rewriter.replaceOp(op, std::get<Value>(all[0]));
    return success();
  }

  const LoweringState &state;
};

/// spmd.wait: the result is the collective's buffer; the wait that
/// completes an asynchronous collective calls spmd_rt_wait(out, in), which
/// also keeps `in` allocated until there (insertFrees).
struct WaitToCall : StatefulPattern<spmd::WaitOp> {
  using StatefulPattern::StatefulPattern;

  LogicalResult
  matchAndRewrite(spmd::WaitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (state.completingWaits.contains(op)) {
      CallBuilder b(rewriter, op);
      Value in = rewriter.getRemappedValue(op.getCollective()->getOperand(0));
      b.call(SPMD_CALLEE(spmd_rt_wait), {adaptor.getInput(), in});
      if (b.failed())
        return failure();
    }
    rewriter.replaceOp(op, adaptor.getInput());
    return success();
  }
};

/// Tensor constants: a constant global copied into a new buffer.
struct ConstantToRuntimeCall : OpConversionPattern<arith::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(arith::ConstantOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(op.getType());
    auto data = dyn_cast<DenseElementsAttr>(op.getValue());
    if (!type || !data || !dtypeCode(type.getElementType()))
      return failure(); // diagnosed before the conversion starts
    CallBuilder b(rewriter, op);
    Value buffer = b.alloc(type);
    int64_t bytes = type.getNumElements() *
                    std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
    b.call(SPMD_CALLEE(spmd_rt_constant),
           {buffer, b.global(data, "__spmd_constant_"), b.i64(bytes)});
    if (b.failed())
      return failure();
    rewriter.replaceOp(op, buffer);
    return success();
  }
};

struct EraseMesh : OpConversionPattern<spmd::MeshOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(spmd::MeshOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

/// Returned values must be buffers of their own: a returned argument or a
/// value returned twice (or two waits of one collective) is cloned first (at
/// tensor level, before conversion; the clone is a new buffer sharing the data,
/// which the caller may free independently).
void cloneAliasedResults(func::FuncOp fn) {
  for (auto ret : llvm::make_early_inc_range(fn.getOps<func::ReturnOp>())) {
    OpBuilder b(ret);
    llvm::SmallPtrSet<Value, 8> seen;
    for (OpOperand &operand : ret->getOpOperands()) {
      Value v = operand.get();
      if (!isa<RankedTensorType>(v.getType()))
        continue;
      // A wait's result is its collective's buffer.
      Value buffer = v;
      if (auto wait = v.getDefiningOp<spmd::WaitOp>())
        buffer = wait.getInput();
      if (isa<BlockArgument>(v) || !seen.insert(buffer).second)
        operand.set(aten::CloneOp::create(b, ret.getLoc(), v.getType(), v));
    }
  }
}

/// The calls that read `buffer`: its direct users, and for a buffer stored
/// into a pointer array (spmd_rt_cat's inputs), the calls given the array.
SmallVector<Operation *> readers(Value buffer) {
  SmallVector<Operation *> result;
  for (Operation *user : buffer.getUsers()) {
    auto store = dyn_cast<LLVM::StoreOp>(user);
    if (!store || store.getValue() != buffer) {
      result.push_back(user);
      continue;
    }
    Value array = store.getAddr();
    while (auto gep = array.getDefiningOp<LLVM::GEPOp>())
      array = gep.getBase();
    for (Operation *arrayUser : array.getUsers())
      if (isa<func::CallOp>(arrayUser))
        result.push_back(arrayUser);
  }
  return result;
}

/// Frees every buffer the function allocates right after its last use.
void insertFrees(func::FuncOp fn) {
  SmallVector<Value> buffers;
  fn.walk([&](func::CallOp call) {
    if (call.getCallee() == "spmd_rt_alloc" ||
        call.getCallee() == "spmd_rt_view")
      buffers.push_back(call.getResult(0));
  });
  for (Value buffer : buffers) {
    Operation *last = buffer.getDefiningOp();
    bool returned = false;
    for (Operation *user : readers(buffer)) {
      Operation *inBlock = last->getBlock()->findAncestorOpInBlock(*user);
      returned |= isa<func::ReturnOp>(user);
      if (inBlock && last->isBeforeInBlock(inBlock))
        last = inBlock;
    }
    if (returned)
      continue;
    OpBuilder b(last->getContext());
    b.setInsertionPointAfter(last);
    func::CallOp::create(b, last->getLoc(), "spmd_rt_free", TypeRange{},
                         ValueRange{buffer});
  }
}

/// spmd.* argument and result attributes describe the tensor-level program
/// (spmd-run reads them before lowering); LLVM has no use for them.
void dropSpmdAttributes(func::FuncOp fn) {
  auto strip = [](DictionaryAttr attrs) {
    SmallVector<NamedAttribute> kept;
    if (attrs)
      for (NamedAttribute attr : attrs)
        if (!attr.getName().strref().starts_with("spmd."))
          kept.push_back(attr);
    return kept;
  };
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    fn.setArgAttrs(i, strip(fn.getArgAttrDict(i)));
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    fn.setResultAttrs(i, strip(fn.getResultAttrDict(i)));
}

struct ConvertToRuntimeCallsPass
    : spmd::impl::ConvertToRuntimeCallsPassBase<ConvertToRuntimeCallsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();

    FailureOr<spmd::MeshRefinement> meshes =
        spmd::refineMeshes(module, "spmd-convert-to-runtime-calls");
    if (failed(meshes))
      return signalPassFailure();
    WalkResult walk = module.walk([&](Operation *op) {
      if (isa<spmd::RedistributeOp, spmd::KeepLocalOp>(op)) {
        op->emitOpError("is in the global view: run the partitioner "
                        "(--spmd-parallelize) before lowering");
        return WalkResult::interrupt();
      }
      if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
        auto type = dyn_cast<RankedTensorType>(constant.getType());
        if (isa<TensorType>(constant.getType()) &&
            (!type || !isa<DenseElementsAttr>(constant.getValue()) ||
             !dtypeCode(type.getElementType()))) {
          constant.emitOpError("tensor constant of type ")
              << constant.getType() << " cannot be lowered";
          return WalkResult::interrupt();
        }
      }
      if (auto fn = dyn_cast<func::FuncOp>(op))
        if (!fn.isExternal() && !fn.getBody().hasOneBlock()) {
          fn.emitOpError("must have a single block to be lowered");
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    LoweringState state;
    state.numRanks = spmd::layout::numRanks(
        std::vector<int64_t>(meshes->shape.begin(), meshes->shape.end()));
    state.meshes = std::move(*meshes);
    aten::forEachRandomId(module, [&](Operation *op, int64_t id) {
      state.randomIds.try_emplace(op, id);
    });
    for (auto fn : module.getOps<func::FuncOp>())
      cloneAliasedResults(fn);
    state.folds = findFoldedTransposes(module);
    module.walk([&](spmd::CollectiveOpInterface op) {
      if (spmd::WaitOp wait = spmd::WaitOp::getCompletingWait(op)) {
        state.asyncCollectives.insert(op);
        state.completingWaits.insert(wait);
      }
    });

    Type ptrType = LLVM::LLVMPointerType::get(ctx);
    TypeConverter converter;
    converter.addConversion([](Type type) { return type; });
    converter.addConversion([&](RankedTensorType) -> Type { return ptrType; });

    ConversionTarget target(*ctx);
    target.addLegalDialect<LLVM::LLVMDialect>();
    target.addIllegalDialect<aten::AtenDialect, spmd::SPMDDialect>();
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp fn) {
      return converter.isSignatureLegal(fn.getFunctionType());
    });
    target.addDynamicallyLegalOp<func::ReturnOp, func::CallOp>(
        [&](Operation *op) { return converter.isLegal(op); });
    target.addDynamicallyLegalOp<arith::ConstantOp>(
        [](arith::ConstantOp op) { return !isa<TensorType>(op.getType()); });
    target.addLegalOp<ModuleOp>();
    target.markUnknownOpDynamicallyLegal(
        [&](Operation *op) { return converter.isLegal(op); });

    RewritePatternSet patterns(ctx);
    addAtenPatterns<
#define GET_OP_LIST
#include "spmd/Dialect/Aten/AtenOps.cpp.inc"
        >(patterns, converter, state);
    patterns.add<FoldTranspose>(converter, ctx, state);
    patterns.add<CollectiveToCall, WaitToCall>(converter, ctx, state);
    patterns.add<ConstantToRuntimeCall, EraseMesh>(converter, ctx);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                   converter);
    populateReturnOpTypeConversionPattern(patterns, converter);
    populateCallOpTypeConversionPattern(patterns, converter);
    if (failed(applyFullConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    for (auto fn : module.getOps<func::FuncOp>())
      if (!fn.isExternal()) {
        insertFrees(fn);
        dropSpmdAttributes(fn);
      }
    // spmd_rt_free is called by the pass itself: declare it.
    if (!module.lookupSymbol("spmd_rt_free")) {
      OpBuilder b(ctx);
      b.setInsertionPointToStart(module.getBody());
      auto fn = func::FuncOp::create(b, module.getLoc(), "spmd_rt_free",
                                     b.getFunctionType({ptrType}, {}));
      fn.setPrivate();
    }
  }
};

} // namespace

void spmd::buildLowerToRuntimePipeline(OpPassManager &pm) {
  pm.addPass(createConvertToRuntimeCallsPass());
  pm.addPass(createPackEntryFunctionsPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void spmd::registerConversionPasses() {
  registerSPMDConversionPasses();
  PassPipelineRegistration<>(
      "spmd-lower-to-runtime",
      "Lower aten ops and spmd collectives to runtime calls and the LLVM "
      "dialect (spmd-convert-to-runtime-calls, spmd-pack-entry-functions, "
      "convert-func-to-llvm, "
      "convert-arith-to-llvm, reconcile-unrealized-casts)",
      buildLowerToRuntimePipeline);
}
