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

/// Builds the arguments of runtime calls at one insertion point: constants,
/// constant i64 arrays (module globals, shared by value), allocations and
/// declarations of the runtime functions.
class CallBuilder {
public:
  CallBuilder(ConversionPatternRewriter &rewriter, Operation *op)
      : rewriter(rewriter), loc(op->getLoc()),
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
    return call("spmd_rt_alloc",
                {i32(*dtypeCode(type.getElementType())), i32(type.getRank()),
                 i64Array(type.getShape())},
                ptrType);
  }

  /// Calls runtime function `name`, declaring it on first use.
  Value call(StringRef name, ArrayRef<Value> args, Type result = {}) {
    SmallVector<Type> argTypes;
    for (Value v : args)
      argTypes.push_back(v.getType());
    SmallVector<Type> results;
    if (result)
      results.push_back(result);
    auto fnType = rewriter.getFunctionType(argTypes, results);
    if (!module.lookupSymbol<func::FuncOp>(name)) {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(module.getBody());
      auto fn = func::FuncOp::create(rewriter, loc, name, fnType);
      fn.setPrivate();
    }
    auto callOp = func::CallOp::create(rewriter, loc, name, results, args);
    return result ? callOp.getResult(0) : Value();
  }

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
  LLVM::GlobalOp lookupGlobal(DenseElementsAttr value, StringRef prefix) {
    for (auto global : module.getOps<LLVM::GlobalOp>())
      if (global.getSymName().starts_with(prefix) && global.getConstant() &&
          global.getValueAttr() == value)
        return global;
    return {};
  }

  ConversionPatternRewriter &rewriter;
  Location loc;
  ModuleOp module;
  Type ptrType;
};

/// What to call for an op: the kernel and the arguments after the buffers.
struct KernelCall {
  std::string name;
  SmallVector<Value> extra;
  /// Operands passed first (default: all, in order); results come before.
  std::optional<SmallVector<Value>> operands;
};

/// Random op ids, numbered in function order before conversion starts.
using RandomIds = llvm::DenseMap<Operation *, int64_t>;
/// Transposes of the last two dims whose every use is a matrix operand of a
/// matmul: they cost nothing (BLAS reads the operand transposed).
using FoldedTransposes = llvm::DenseSet<Operation *>;

bool isMatrixOperand(OpOperand &use) {
  Operation *user = use.getOwner();
  if (isa<aten::MmOp, aten::BmmOp>(user))
    return true;
  return isa<aten::AddmmOp, aten::BaddbmmOp>(user) &&
         use.getOperandNumber() > 0;
}

FoldedTransposes findFoldedTransposes(ModuleOp module) {
  FoldedTransposes folds;
  module.walk([&](Operation *op) {
    int64_t rank =
        op->getNumOperands() == 1
            ? cast<RankedTensorType>(op->getOperand(0).getType()).getRank()
            : 0;
    bool lastTwo = false;
    if (isa<aten::TOp>(op))
      lastTwo = rank == 2;
    else if (auto transpose = dyn_cast<aten::TransposeIntOp>(op)) {
      int64_t d0 = aten::normalizeDim(transpose.getDim0Attr().getInt(), rank);
      int64_t d1 = aten::normalizeDim(transpose.getDim1Attr().getInt(), rank);
      lastTwo = (rank == 2 || rank == 3) && std::min(d0, d1) == rank - 2 &&
                std::max(d0, d1) == rank - 1;
    }
    if (lastTwo && !op->getResult(0).use_empty() &&
        llvm::all_of(op->getResult(0).getUses(), isMatrixOperand))
      folds.insert(op);
  });
  return folds;
}

/// The kernel and attribute arguments of `op` (operands already converted),
/// or failure with a diagnostic.
FailureOr<KernelCall> describe(Operation *op, ValueRange operands,
                               CallBuilder &b, const RandomIds &randomIds,
                               const FoldedTransposes &folds) {
  auto inType = [&](unsigned i) {
    return cast<RankedTensorType>(op->getOperand(i).getType());
  };
  auto outType = [&](unsigned i) {
    return cast<RankedTensorType>(op->getResult(i).getType());
  };
  auto dims = [&](ArrayRef<int64_t> values, int64_t rank) {
    SmallVector<int64_t> normalized;
    for (int64_t d : values)
      normalized.push_back(aten::normalizeDim(d, rank));
    return normalized;
  };
  auto dimList = [&](ArrayRef<int64_t> values) -> SmallVector<Value> {
    return {b.i32(values.size()), b.i64Array(values)};
  };
  auto random = [&](StringRef name, SmallVector<Value> extra,
                    RankedTensorType type) -> KernelCall {
    extra.push_back(b.i64(randomIds.lookup(op)));
    // A sharded result (spmd-partition) draws at its global positions:
    // this rank's row of the per-rank offset table.
    auto global = op->getAttrOfType<DenseI64ArrayAttr>("spmd.global_shape");
    auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("spmd.global_offsets");
    if (global && offsets) {
      extra.push_back(b.i64Array(global.asArrayRef()));
      extra.push_back(
          b.call("spmd_rt_rank_row",
                 {b.i64Array(offsets.asArrayRef()), b.i64(type.getRank())},
                 b.getPtrType()));
    } else {
      extra.push_back(b.i64Array(type.getShape()));
      extra.push_back(b.i64Array(SmallVector<int64_t>(type.getRank(), 0)));
    }
    return {name.str(), extra, std::nullopt};
  };
  auto optional = [&](Value v) { return v ? v : b.null(); };
  // A vocabulary-sharded embedding (spmd-partition): this rank's row of
  // the {begin, count, vocab} table, or null.
  auto vocabRows = [&]() -> Value {
    auto table = op->getAttrOfType<DenseI64ArrayAttr>("spmd.vocab_rows");
    if (!table)
      return {};
    return b.call("spmd_rt_rank_row",
                  {b.i64Array(table.asArrayRef()), b.i64(3)}, b.getPtrType());
  };
  using Result = FailureOr<KernelCall>;
  auto simple = [](StringRef name, SmallVector<Value> extra = {}) -> Result {
    return KernelCall{name.str(), std::move(extra), std::nullopt};
  };

  return llvm::TypeSwitch<Operation *, Result>(op)
      .Case([&](aten::AddTensorOp o) {
        return simple("spmd_rt_add_tensor",
                      {b.f64(o.getAlpha().convertToDouble())});
      })
      .Case([&](aten::SubTensorOp o) {
        return simple("spmd_rt_sub_tensor",
                      {b.f64(o.getAlpha().convertToDouble())});
      })
      .Case([&](aten::MulTensorOp) { return simple("spmd_rt_mul_tensor"); })
      .Case([&](aten::DivTensorOp) { return simple("spmd_rt_div_tensor"); })
      .Case([&](aten::AddcmulOp o) {
        return simple("spmd_rt_addcmul",
                      {b.f64(o.getValue().convertToDouble())});
      })
      .Case([&](aten::AddcdivOp o) {
        return simple("spmd_rt_addcdiv",
                      {b.f64(o.getValue().convertToDouble())});
      })
      .Case([&](aten::ThresholdBackwardOp o) {
        return simple("spmd_rt_threshold_backward",
                      {b.f64(aten::getScalarValue(o.getThreshold()))});
      })
      .Case([&](aten::AddScalarOp o) {
        return simple("spmd_rt_add_scalar",
                      {b.f64(aten::getScalarValue(o.getOther())),
                       b.f64(o.getAlpha().convertToDouble())});
      })
      .Case([&](aten::MulScalarOp o) {
        return simple("spmd_rt_mul_scalar",
                      {b.f64(aten::getScalarValue(o.getOther()))});
      })
      .Case([&](aten::DivScalarOp o) {
        return simple("spmd_rt_div_scalar",
                      {b.f64(aten::getScalarValue(o.getOther()))});
      })
      .Case([&](aten::RsubScalarOp o) {
        return simple("spmd_rt_rsub_scalar",
                      {b.f64(aten::getScalarValue(o.getOther())),
                       b.f64(o.getAlpha().convertToDouble())});
      })
      .Case([&](aten::PowScalarOp o) -> Result {
        // The base is an attribute: it goes before the exponent.
        return KernelCall{
            "spmd_rt_pow_scalar",
            {},
            SmallVector<Value>{b.f64(aten::getScalarValue(o.getSelf())),
                               operands[0]}};
      })
      .Case([&](aten::NegOp) { return simple("spmd_rt_neg"); })
      .Case([&](aten::ToCopyOp) { return simple("spmd_rt_copy"); })
      .Case([&](aten::ReciprocalOp) { return simple("spmd_rt_reciprocal"); })
      .Case([&](aten::SqrtOp) { return simple("spmd_rt_sqrt"); })
      .Case([&](aten::ReluOp) { return simple("spmd_rt_relu"); })
      .Case([&](aten::GeluOp o) {
        return simple("spmd_rt_gelu", {b.i64(o.getApproximate() == "tanh")});
      })
      .Case([&](aten::GeluBackwardOp o) {
        return simple("spmd_rt_gelu_backward",
                      {b.i64(o.getApproximate() == "tanh")});
      })
      .Case([&](aten::TriuOp o) {
        return simple("spmd_rt_triu", {b.i64(o.getDiagonal())});
      })
      .Case([&](aten::BernoulliPOp o) -> Result {
        KernelCall call =
            random("spmd_rt_bernoulli_p", {b.f64(o.getP().convertToDouble())},
                   outType(0));
        call.operands = SmallVector<Value>{}; // self only gives the shape
        return call;
      })
      .Case([&](aten::NativeDropoutOp o) {
        return random("spmd_rt_native_dropout",
                      {b.f64(o.getP().convertToDouble()), b.i64(o.getTrain())},
                      outType(0));
      })
      .Case([&](aten::NativeDropoutBackwardOp o) {
        return simple("spmd_rt_native_dropout_backward",
                      {b.f64(o.getScale().convertToDouble())});
      })
      .Case([&](aten::OnesLikeOp) -> Result {
        return KernelCall{"spmd_rt_fill", {b.f64(1.0)}, SmallVector<Value>{}};
      })
      .Case([&](aten::FullOp o) {
        return simple("spmd_rt_fill",
                      {b.f64(aten::getScalarValue(o.getFillValue()))});
      })
      .Case([&](aten::ArangeOp) { return simple("spmd_rt_arange"); })
      .Case<aten::MmOp, aten::BmmOp, aten::AddmmOp, aten::BaddbmmOp>(
          [&](Operation *op) -> Result {
            // One GEMM entry for the family; a folded transpose of a matrix
            // operand becomes a BLAS transpose flag.
            bool hasSelf = isa<aten::AddmmOp, aten::BaddbmmOp>(op);
            double beta = 0, alpha = 1;
            if (auto addmm = dyn_cast<aten::AddmmOp>(op))
              beta = addmm.getBeta().convertToDouble(),
              alpha = addmm.getAlpha().convertToDouble();
            if (auto baddbmm = dyn_cast<aten::BaddbmmOp>(op))
              beta = baddbmm.getBeta().convertToDouble(),
              alpha = baddbmm.getAlpha().convertToDouble();
            unsigned first = hasSelf ? 1 : 0;
            auto folded = [&](unsigned i) {
              Operation *def = op->getOperand(i).getDefiningOp();
              return b.i64(def && folds.contains(def));
            };
            return KernelCall{
                "spmd_rt_matmul",
                {b.f64(beta), b.f64(alpha), folded(first), folded(first + 1)},
                SmallVector<Value>{hasSelf ? operands[0] : b.null(),
                                   operands[first], operands[first + 1]}};
          })
      .Case([&](aten::TOp) -> Result {
        if (inType(0).getRank() < 2)
          return simple("spmd_rt_copy");
        return simple("spmd_rt_permute", dimList({1, 0}));
      })
      .Case([&](aten::TransposeIntOp o) {
        int64_t rank = inType(0).getRank();
        SmallVector<int64_t> perm =
            llvm::to_vector(llvm::seq<int64_t>(0, rank));
        std::swap(perm[aten::normalizeDim(o.getDim0Attr().getInt(), rank)],
                  perm[aten::normalizeDim(o.getDim1Attr().getInt(), rank)]);
        return simple("spmd_rt_permute", dimList(perm));
      })
      .Case([&](aten::PermuteOp o) {
        return simple("spmd_rt_permute",
                      dimList(dims(o.getDims(), inType(0).getRank())));
      })
      .Case([&](aten::ExpandOp) { return simple("spmd_rt_expand"); })
      .Case([&](aten::CatOp o) -> Result {
        return KernelCall{"spmd_rt_cat",
                          {b.i64(aten::normalizeDim(o.getDimAttr().getInt(),
                                                    outType(0).getRank()))},
                          SmallVector<Value>{b.i32(operands.size()),
                                             b.pointerArray(operands)}};
      })
      .Case([&](aten::SumOp) {
        int64_t rank = inType(0).getRank();
        return simple("spmd_rt_sum",
                      dimList(llvm::to_vector(llvm::seq<int64_t>(0, rank))));
      })
      .Case([&](aten::SumDimIntListOp o) {
        return simple("spmd_rt_sum", dimList(aten::reducedDims(o)));
      })
      .Case([&](aten::SoftmaxOp o) {
        return simple("spmd_rt_softmax",
                      {b.i64(aten::normalizeDim(o.getDimAttr().getInt(),
                                                inType(0).getRank()))});
      })
      .Case([&](aten::LogSoftmaxOp o) {
        return simple("spmd_rt_log_softmax",
                      {b.i64(aten::normalizeDim(o.getDimAttr().getInt(),
                                                inType(0).getRank()))});
      })
      .Case([&](aten::SoftmaxBackwardDataOp o) {
        return simple("spmd_rt_softmax_backward_data",
                      {b.i64(aten::normalizeDim(o.getDimAttr().getInt(),
                                                inType(0).getRank()))});
      })
      .Case([&](aten::LogSoftmaxBackwardDataOp o) {
        return simple("spmd_rt_log_softmax_backward_data",
                      {b.i64(aten::normalizeDim(o.getDimAttr().getInt(),
                                                inType(0).getRank()))});
      })
      .Case([&](aten::NativeLayerNormOp o) -> Result {
        typename aten::NativeLayerNormOp::Adaptor a(operands, o);
        return KernelCall{"spmd_rt_native_layer_norm",
                          {b.i64(o.getNormalizedShape().size()),
                           b.f64(o.getEps().convertToDouble())},
                          SmallVector<Value>{a.getInput(),
                                             optional(a.getWeight()),
                                             optional(a.getBias())}};
      })
      .Case([&](aten::NativeLayerNormBackwardOp o) -> Result {
        typename aten::NativeLayerNormBackwardOp::Adaptor a(operands, o);
        return KernelCall{"spmd_rt_native_layer_norm_backward",
                          {b.i64(o.getNormalizedShape().size())},
                          SmallVector<Value>{a.getGradOut(), a.getInput(),
                                             a.getMean(), a.getRstd(),
                                             optional(a.getWeight()),
                                             optional(a.getBias())}};
      })
      .Case([&](aten::EmbeddingOp o) {
        if (Value rows = vocabRows())
          return simple("spmd_rt_embedding_rows", {rows});
        return simple("spmd_rt_embedding",
                      {b.i64(o.getPaddingIdxAttr().getInt())});
      })
      .Case([&](aten::EmbeddingDenseBackwardOp o) {
        SmallVector<Value> extra = {b.i64(o.getPaddingIdxAttr().getInt()),
                                    b.i64(o.getScaleGradByFreq())};
        if (Value rows = vocabRows()) {
          extra.push_back(rows);
          return simple("spmd_rt_embedding_dense_backward_rows", extra);
        }
        return simple("spmd_rt_embedding_dense_backward", extra);
      })
      .Case([&](aten::NllLossForwardOp o) -> Result {
        typename aten::NllLossForwardOp::Adaptor a(operands, o);
        return KernelCall{"spmd_rt_nll_loss_forward",
                          {b.i64(o.getReductionAttr().getInt()),
                           b.i64(o.getIgnoreIndexAttr().getInt())},
                          SmallVector<Value>{a.getSelf(), a.getTarget(),
                                             optional(a.getWeight())}};
      })
      .Case([&](aten::NllLossBackwardOp o) -> Result {
        typename aten::NllLossBackwardOp::Adaptor a(operands, o);
        return KernelCall{
            "spmd_rt_nll_loss_backward",
            {b.i64(o.getReductionAttr().getInt()),
             b.i64(o.getIgnoreIndexAttr().getInt())},
            SmallVector<Value>{a.getGradOutput(), a.getSelf(), a.getTarget(),
                               optional(a.getWeight()), a.getTotalWeight()}};
      })
      .Case([&](spmd::AllReduceOp o) {
        SmallVector<Value> extra = dimList(o.getMeshDims());
        extra.push_back(b.i32(static_cast<int32_t>(o.getReduce())));
        return simple("spmd_rt_all_reduce", extra);
      })
      .Case([&](spmd::AllGatherOp o) {
        SmallVector<Value> extra = dimList(o.getMeshDims());
        extra.push_back(b.i64(o.getGatherDimAttr().getInt()));
        return simple("spmd_rt_all_gather", extra);
      })
      .Case([&](spmd::ReduceScatterOp o) {
        SmallVector<Value> extra = dimList(o.getMeshDims());
        extra.push_back(b.i64(o.getScatterDimAttr().getInt()));
        extra.push_back(b.i32(static_cast<int32_t>(o.getReduce())));
        return simple("spmd_rt_reduce_scatter", extra);
      })
      .Case([&](spmd::AllToAllOp o) {
        SmallVector<Value> extra = dimList(o.getMeshDims());
        extra.push_back(b.i64(o.getSplitDimAttr().getInt()));
        extra.push_back(b.i64(o.getConcatDimAttr().getInt()));
        return simple("spmd_rt_all_to_all", extra);
      })
      .Case([&](spmd::LocalTakeOp o) {
        if (auto indices = o.getIndicesAttr())
          return simple("spmd_rt_local_take",
                        {b.i64(o.getDim()), b.i64Array(indices.asArrayRef()),
                         b.f64(o.getFill().convertToDouble())});
        return simple("spmd_rt_local_take_runs",
                      {b.i64(o.getDim()),
                       b.i64Array(o.getStartsAttr().asArrayRef()),
                       b.i64Array(o.getCountsAttr().asArrayRef()),
                       b.f64(o.getFill().convertToDouble())});
      })
      .Case([&](spmd::BroadcastOp o) {
        SmallVector<Value> extra = dimList(o.getMeshDims());
        extra.push_back(b.i64(o.getRootAttr().getInt()));
        return simple("spmd_rt_broadcast", extra);
      })
      .Default([&](Operation *op) -> Result {
        return op->emitOpError("has no runtime kernel");
      });
}

/// aten ops and spmd collectives: allocate the results, call the kernel.
struct OpToRuntimeCall : ConversionPattern {
  OpToRuntimeCall(const TypeConverter &converter, MLIRContext *ctx,
                  const RandomIds &randomIds, const FoldedTransposes &folds)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx),
        randomIds(randomIds), folds(folds) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isa<aten::AtenDialect>(op->getDialect()) &&
        !isa<spmd::CollectiveOpInterface, spmd::LocalTakeOp>(op))
      return failure();
    for (Type type : op->getResultTypes())
      if (!dtypeCode(cast<RankedTensorType>(type).getElementType()))
        return op->emitOpError("result element type ")
               << type << " has no runtime dtype";
    if (folds.contains(op)) {
      // Its users read the input transposed (spmd_rt_matmul's flags).
      rewriter.replaceOp(op, operands[0]);
      return success();
    }
    CallBuilder b(rewriter, op);
    if (aten::isSameElementsView(op)) {
      // Same elements, same order: share the data (spmd_rt_view).
      auto type = cast<RankedTensorType>(op->getResult(0).getType());
      rewriter.replaceOp(op, b.call("spmd_rt_view",
                                    {operands[0], b.i32(type.getRank()),
                                     b.i64Array(type.getShape())},
                                    b.getPtrType()));
      return success();
    }
    if (isa<aten::SplitTensorOp, aten::SplitWithSizesOp>(op)) {
      // One slice per piece, each starting where the previous one ended.
      int64_t rank =
          cast<RankedTensorType>(op->getOperand(0).getType()).getRank();
      int64_t dim = aten::normalizeDim(
          op->getAttrOfType<IntegerAttr>("dim").getInt(), rank);
      SmallVector<Value> pieces;
      int64_t start = 0;
      for (Type type : op->getResultTypes()) {
        auto piece = cast<RankedTensorType>(type);
        pieces.push_back(b.alloc(piece));
        b.call("spmd_rt_slice",
               {pieces.back(), operands[0], b.i64(dim), b.i64(start)});
        start += piece.getDimSize(dim);
      }
      rewriter.replaceOp(op, pieces);
      return success();
    }
    FailureOr<KernelCall> call = describe(op, operands, b, randomIds, folds);
    if (failed(call))
      return failure();
    SmallVector<Value> results, args;
    for (Type type : op->getResultTypes())
      results.push_back(b.alloc(cast<RankedTensorType>(type)));
    llvm::append_range(args, results);
    if (call->operands)
      llvm::append_range(args, *call->operands);
    else
      llvm::append_range(args, operands);
    llvm::append_range(args, call->extra);
    b.call(call->name, args);
    rewriter.replaceOp(op, results);
    return success();
  }

  const RandomIds &randomIds;
  const FoldedTransposes &folds;
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
    b.call("spmd_rt_constant",
           {buffer, b.global(data, "__spmd_constant_"), b.i64(bytes)});
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
/// value returned twice is cloned first (at tensor level, before conversion;
/// the clone is a new buffer sharing the data, which the caller may free
/// independently).
void cloneAliasedResults(func::FuncOp fn) {
  for (auto ret : llvm::make_early_inc_range(fn.getOps<func::ReturnOp>())) {
    OpBuilder b(ret);
    llvm::SmallPtrSet<Value, 8> seen;
    for (OpOperand &operand : ret->getOpOperands()) {
      Value v = operand.get();
      if (!isa<RankedTensorType>(v.getType()))
        continue;
      if (isa<BlockArgument>(v) || !seen.insert(v).second)
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

    auto meshes = llvm::to_vector(module.getOps<spmd::MeshOp>());
    if (meshes.size() > 1) {
      meshes[1].emitOpError("is a second mesh: the runtime runs one mesh "
                            "per program");
      return signalPassFailure();
    }
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

    RandomIds randomIds;
    module.walk([&](Operation *op) {
      if (isa<aten::BernoulliPOp, aten::NativeDropoutOp>(op))
        randomIds.try_emplace(op, randomIds.size());
    });
    for (auto fn : module.getOps<func::FuncOp>())
      cloneAliasedResults(fn);
    FoldedTransposes folds = findFoldedTransposes(module);

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
    patterns.add<OpToRuntimeCall>(converter, ctx, randomIds, folds);
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
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void spmd::registerConversionPasses() {
  registerSPMDConversionPasses();
  PassPipelineRegistration<>(
      "spmd-lower-to-runtime",
      "Lower aten ops and spmd collectives to runtime calls and the LLVM "
      "dialect (spmd-convert-to-runtime-calls, convert-func-to-llvm, "
      "convert-arith-to-llvm, reconcile-unrealized-casts)",
      buildLowerToRuntimePipeline);
}
