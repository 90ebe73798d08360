//===- AtenOps.td - aten operations ------------------------*- tablegen -*-===//
//
// The op families of the aten dialect. Each family is an ODS class that
// carries what its ops share: traits that passes test for, the result-type
// rule (`inferResultTypes`, which the verifier checks), the sharding rule
// (the spmd dialect's ShardingRuleOpInterface) and the runtime kernel the
// lowering calls. The ops themselves are generated from PyTorch's schemas
// by tools/aten-ods-gen/aten_ods_gen.py into GeneratedAtenOps.td, each an
// instance of one family; a family member whose rule the family cannot state
// defines it in C++ (AtenOps.cpp, AtenSharding.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_DIALECT_ATEN_ATENOPS_TD
#define SPMD_DIALECT_ATEN_ATENOPS_TD

include "spmd/Dialect/Aten/AtenDialect.td"
include "spmd/Dialect/Aten/AtenInterfaces.td"
include "spmd/Dialect/SPMD/SPMDInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/IR/CommonTypeConstraints.td"

//===----------------------------------------------------------------------===//
// Constraints
//===----------------------------------------------------------------------===//

def Aten_ElementType : AnyTypeOf<[F32, BF16, F16, F64, I64, I32, I1]>;
def Aten_Tensor : StaticShapeTensorOf<[Aten_ElementType]>;
def Aten_FloatTensor : StaticShapeTensorOf<[F32, BF16, F16, F64]>;
def Aten_IndexTensor : StaticShapeTensorOf<[I64, I32]>;
/// Floats and integers, not bool (comparisons such as amax).
def Aten_NumericTensor : StaticShapeTensorOf<[F32, BF16, F16, F64, I64, I32]>;
/// Class indices of the losses: ATen requires int64 ("expected scalar type Long").
def Aten_TargetTensor : StaticShapeTensorOf<[I64]>;
/// A boolean mask (torch.bool).
def Aten_BoolTensor : StaticShapeTensorOf<[I1]>;
/// Integers and bools (bitwise ops: ATen rejects floats).
def Aten_IntegralTensor : StaticShapeTensorOf<[I64, I32, I1]>;

/// An ATen `Scalar`: an integer (i64) or floating-point (f64) number. The
/// kind matters for type promotion (int tensor op float scalar -> float).
def Aten_ScalarAttr : AnyAttrOf<[I64Attr, F64Attr]>;
/// An ATen `Scalar` that defaults to 1 (alpha, beta, value).
def Aten_ScaleAttr : DefaultValuedAttr<F64Attr, "1.0">;

//===----------------------------------------------------------------------===//
// Op classes that passes test for
//===----------------------------------------------------------------------===//

class Aten_Trait<string name> : NativeOpTrait<name> {
  let cppNamespace = "::spmd::aten::OpTrait";
}

/// Elementwise over operands broadcast to the result (ATen's
/// TensorIterator ops): the lowering calls the op's kernel with the
/// buffers and the op's scalar attributes.
def Aten_Pointwise : Aten_Trait<"Pointwise">;
/// The result holds the operand's elements in the same order (view,
/// reshape, unsqueeze, clone, detach): the lowering shares the memory.
def Aten_SameElementsView : Aten_Trait<"SameElementsView">;
/// The result only rearranges or broadcasts the first operand (the
/// same-elements views, transposes, permutes, expand): FSDP recomputes such
/// ops from a fresh gather; TP follows a parameter through them.
def Aten_Rearrangement : Aten_Trait<"Rearrangement">;
/// Draws random numbers by global element index (Philox): never merged,
/// each gets an id, a sharded result draws at its global offsets.
def Aten_Random : Aten_Trait<"Random">;
/// The `size` attribute is the result's shape (views, expand, full): the
/// partitioner sets it to the per-rank shape.
def Aten_ResultSizeAttr : Aten_Trait<"ResultSizeAttr">;
/// Splits operand 0 along `dim` into consecutive pieces, the results.
def Aten_Split : Aten_Trait<"Split">;
/// A (batched) matrix product `[.., n, k] x [.., k, m]` of the last two
/// operands, with an addend first when the op has `beta` (addmm, baddbmm).
def Aten_MatrixProduct : Aten_Trait<"MatrixProduct">;

//===----------------------------------------------------------------------===//
// Result-type rules shared by families
//===----------------------------------------------------------------------===//

/// Broadcast of all tensor operands with ATen's type promotion.
defvar Aten_InferBroadcast = [{
  return ::spmd::aten::detail::inferBroadcast(
      adaptor.getOperands().getTypes(), emitError, types);
}];
/// Broadcast with true division (integer operands give f32).
defvar Aten_InferTrueDivide = [{
  return ::spmd::aten::detail::inferBroadcast(
      adaptor.getOperands().getTypes(), emitError, types, /*trueDivide=*/true);
}];
/// The operand's type.
defvar Aten_InferSame = [{
  types.push_back(adaptor.getOperands()[0].getType());
  return ::mlir::success();
}];
/// The operand's shape, integer and bool lifted to the default float dtype.
defvar Aten_InferFloat = [{
  types.push_back(::spmd::aten::detail::liftToFloat(
      adaptor.getOperands()[0].getType()));
  return ::mlir::success();
}];
/// A tensor `self` with a Scalar `other` (wrapped-number promotion).
defvar Aten_InferWithScalar = [{
  types.push_back(::spmd::aten::detail::promoteWithScalar(
      adaptor.getSelf().getType(), adaptor.getOther()));
  return ::mlir::success();
}];
/// `self`'s shape, i1 (comparisons, logical ops).
defvar Aten_InferBool = [{
  types.push_back(::llvm::cast<::mlir::RankedTensorType>(
      adaptor.getSelf().getType()).clone(
          ::mlir::IntegerType::get(adaptor.getSelf().getContext(), 1)));
  return ::mlir::success();
}];
/// The operands' broadcast shape, i1 (comparisons of two tensors).
defvar Aten_InferBroadcastBool = [{
  if (::mlir::failed(::spmd::aten::detail::inferBroadcast(
          adaptor.getOperands().getTypes(), emitError, types)))
    return ::mlir::failure();
  types.back() = ::llvm::cast<::mlir::RankedTensorType>(types.back()).clone(
      ::mlir::IntegerType::get(adaptor.getSelf().getContext(), 1));
  return ::mlir::success();
}];
/// A reshape to `size` (one entry may be -1).
defvar Aten_InferReshape = [{
  return ::spmd::aten::detail::inferReshape(adaptor.getSelf().getType(),
                                            adaptor.getSize(), emitError,
                                            types);
}];
/// Softmax-family forward: `self`'s type, `dim` in range.
defvar Aten_InferSoftmax = [{
  return ::spmd::aten::detail::inferNormalizedOverDim(
      adaptor.getSelf().getType(), adaptor.getDim(),
      adaptor.getHalfToFloat(), emitError, types);
}];
/// Softmax-family backward.
defvar Aten_InferSoftmaxBackward = [{
  return ::spmd::aten::detail::inferSoftmaxBackward(
      adaptor.getGradOutput().getType(), adaptor.getOutput().getType(),
      adaptor.getDim(), adaptor.getInputDtype(), emitError, types);
}];

//===----------------------------------------------------------------------===//
// Base class
//===----------------------------------------------------------------------===//

/// An aten op. `inferResultTypes` computes the result types as ATen does
/// and reports the first rule the operands/attributes break through
/// `emitError`; the verifier (which names the expected and the declared
/// types) calls it, and so can a builder that needs the types. The ops do
/// not declare InferTypeOpInterface: its own verification would infer every
/// op's types a second time after the verifier (about 6% of
/// `--spmd-parallelize` on a Llama step, where MLIR verifies after each
/// nested pass).
/// `inferBody` and `ruleBody` hold a family's shared result-type and
/// sharding rules; when empty the op defines `inferResultTypes`
/// (AtenOps.cpp) or `getShardingRule` (AtenSharding.cpp) itself. `kernel`
/// names the runtime kernel (`spmd_rt_<kernel>` of the runtime's
/// KernelList.def; a name not in the list does not compile).
class Aten_Op<string mnemonic, list<Trait> traits = [], bit pure = 1>
    : Op<Aten_Dialect, mnemonic,
         !listconcat(!if(pure, !listconcat(traits, [Pure]), traits),
                     [DeclareOpInterfaceMethods<SPMD_ShardingRuleOpInterface>])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  code inferBody = "";
  code ruleBody = "";
  string kernel = "";
  /// The kernel's arguments after the result buffers: a `return {...};` of
  /// KernelArguments, with `b` a Builder.
  code kernelArguments = "";
  /// Results the kernel takes NULL for and then does not compute (ATen's
  /// `output_mask`): the lowering passes NULL for such a result with no use.
  list<int> optionalResults = [];
  /// Declarations a family adds to its ops.
  code familyDeclarations = "";
  let extraClassDeclaration = !strconcat([{
    /// Infers the result types with ATen's shape and dtype rules; on a
    /// violation emits a diagnostic through `emitError` and fails.
    static ::llvm::LogicalResult inferResultTypes(
        Adaptor adaptor,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
        ::llvm::SmallVectorImpl<::mlir::Type> &types);
    /// The runtime kernel that computes the op, if it is lowered to one.
    static constexpr ::std::optional<::spmd::RuntimeKernel>
    getRuntimeKernel() {
      return }], !if(!empty(kernel), "::std::nullopt",
                     "::spmd::RuntimeKernel::" # kernel), [{;
    }
    /// Whether the runtime kernel takes NULL for result `i` and then does
    /// not compute it (aten::isUncomputedResult asks at run time).
    static constexpr bool hasOptionalResults = }],
        !if(!empty(optionalResults), "false", "true"), [{;
    static constexpr bool isOptionalResult([[maybe_unused]] unsigned i) {
      return }], !foldl("false", optionalResults, acc, r,
                        acc # " || i == " # !cast<string>(r)), [{;
    }
  }], !if(!empty(kernelArguments), "", !strconcat([{
    /// The arguments of the runtime kernel after the result buffers.
    ::llvm::SmallVector<::spmd::aten::KernelArgument> getKernelArguments() {
      ::mlir::Builder b(getContext());
  }], kernelArguments, "}")), familyDeclarations);
  let extraClassDefinition = !strconcat([{
    ::llvm::LogicalResult $cppClass::verify() {
      return ::spmd::aten::detail::verifyResultTypes(
          getOperation(), [&](auto emitError, auto &types) {
            return inferResultTypes(Adaptor(*this), emitError, types);
          });
    }
  }], !if(!empty(inferBody), "", !strconcat([{
    ::llvm::LogicalResult $cppClass::inferResultTypes(
        Adaptor adaptor,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
        ::llvm::SmallVectorImpl<::mlir::Type> &types) {
  }], inferBody, "}")), !if(!empty(ruleBody), "", !strconcat([{
    ::std::optional<::spmd::layout::EinsumRule> $cppClass::getShardingRule() {
  }], ruleBody, "}")));
}

//===----------------------------------------------------------------------===//
// Families
//===----------------------------------------------------------------------===//

/// Pointwise with broadcasting (ATen's TensorIterator ops, forward and
/// backward). `linear` lists the groups of operands the op is linear in
/// jointly: a Partial(sum) in each operand of a group gives a Partial(sum)
/// result (add: {{0, 1}}; mul: {{0}, {1}}; relu, abs, pow: none). `reduce`
/// is the Partial the groups carry, a `layout::ReduceKind`: `Sum`, or `Max`
/// for an op that commutes with max (maximum: max(max_r a_r, b) is
/// max_r max(a_r, b)). The sharding rule labels the result's dims and
/// broadcasts them to the operands.
class Aten_PointwiseOp<string mnemonic, string linear = "{}",
                       list<Trait> traits = [], bit pure = 1,
                       string reduce = "Sum">
    : Aten_Op<mnemonic, !listconcat(traits, [Aten_Pointwise]), pure> {
  let inferBody = Aten_InferBroadcast;
  let ruleBody = "return ::spmd::aten::rules::pointwise(getOperation(), "
                 # linear # ", ::spmd::layout::ReduceKind::" # reduce # ");";
}

/// Pointwise ops that draw random numbers (dropout): never pure.
class Aten_RandomOp<string mnemonic, list<Trait> traits = []>
    : Aten_PointwiseOp<mnemonic, "{}", !listconcat(traits, [Aten_Random]),
                       /*pure=*/0>;

/// Random ops that read only their operand's shape (a draw shaped like a
/// template tensor: dropout's mask, `rand_like`): sharded as factories, so
/// a Partial template gives a Replicate draw without being reduced.
class Aten_RandomLikeOp<string mnemonic, list<Trait> traits = []>
    : Aten_RandomOp<mnemonic, traits> {
  let ruleBody = "return ::spmd::aten::rules::factory(getOperation());";
}

/// Factories: the result's values depend on its shape (and dtype) only.
class Aten_FactoryOp<string mnemonic, list<Trait> traits = []>
    : Aten_PointwiseOp<mnemonic, "{}", traits> {
  let ruleBody = "return ::spmd::aten::rules::factory(getOperation());";
}

/// Views and reshapes to `size`: same elements, same order (DTensor's view
/// rule: dims merged or split are sharded only evenly).
class Aten_ViewOp<string mnemonic, list<Trait> traits = []>
    : Aten_Op<mnemonic, !listconcat(traits, [Aten_SameElementsView,
                                             Aten_Rearrangement])> {
  let ruleBody = "return ::spmd::aten::rules::view(getOperation());";
}

/// Ops that permute dims: result dim i is operand dim getPermutation()[i].
class Aten_PermuteOp<string mnemonic>
    : Aten_Op<mnemonic, [Aten_Rearrangement,
                         DeclareOpInterfaceMethods<Aten_PermutationOpInterface>]> {
  let ruleBody = "return ::spmd::aten::rules::permute(getPermutation());";
}

/// (Batched) matrix products, with an addend `self` when `withSelf`.
class Aten_MatmulOp<string mnemonic, bit batched, bit withSelf>
    : Aten_Op<mnemonic, [Aten_MatrixProduct]> {
  // One GEMM kernel for the family; its arguments are the family's.
  let kernel = "matmul";
  let familyDeclarations = !if(withSelf, [{
    /// The addend's and the product's factors (beta * self + alpha * a b).
    double getBetaValue() { return getBeta().convertToDouble(); }
    double getAlphaValue() { return getAlpha().convertToDouble(); }
  }], [{
    double getBetaValue() { return 0.0; }
    double getAlphaValue() { return 1.0; }
  }]);
  let ruleBody = "return ::spmd::aten::rules::matmul(getOperation(), "
                 # !if(batched, "true", "false") # ", "
                 # !if(withSelf, "true", "false") # ");";
}

/// Reductions over dims (ATen's sum, mean and amax): `self` folded over its
/// `dim` list (every dim when the op has none or the list is empty), the
/// reduced dims removed or kept as size 1 (`keepdim`). Template arguments:
///   reduce     what a sharded reduced dim leaves pending, as DTensor's
///              reduction rule: `Sum`, `Avg` (mean: only over equal shards)
///              or `Max` (amax), a `layout::ReduceKind`;
///   withDims   the op has `dim` and `keepdim`, else it reduces everything;
///   singleDim  `dim` is one dim (any.dim), not a list;
///   withDtype  the op has `dtype`, the result's element type when given;
///   promotes   without `dtype`, integer and bool inputs give i64 (sum).
class Aten_ReductionOp<string mnemonic, string reduce = "Sum",
                       bit withDims = 1, bit withDtype = 1, bit promotes = 0,
                       bit singleDim = 0>
    : Aten_Op<mnemonic> {
  // `singleDim`: `dim` is one int (any.dim), not a list.
  defvar dimOf = !if(singleDim,
      "::llvm::ArrayRef<int64_t>(static_cast<int64_t>(X.getDim()))",
      "X.getDim()");
  defvar dims = !if(withDims, !subst("X.", "", dimOf), "::std::nullopt");
  defvar keepdim = !if(withDims, "getKeepdim()", "false");
  let inferBody = "return ::spmd::aten::detail::inferReduction("
                  "adaptor.getSelf().getType(), "
                  # !if(withDims, !subst("X.", "adaptor.", dimOf)
                                  # ", adaptor.getKeepdim()",
                        "::std::nullopt, false") # ", "
                  # !if(withDtype, "adaptor.getDtype()", "::std::nullopt")
                  # ", " # !if(promotes, "true", "false")
                  # ", emitError, types);";
  let familyDeclarations = [{
    /// The reduced dims, normalized (every dim for ATen's empty list).
    ::llvm::SmallVector<int64_t> getReducedDims() {
      return ::spmd::aten::detail::reducedDims(getSelf().getType().getRank(),
  }] # dims # [{);
    }
    /// Whether reduced dims stay as size 1.
    bool keepsDims() { return }] # keepdim # [{; }
  }];
  let ruleBody = "return ::spmd::aten::rules::reduction(getOperation(), "
                 "getReducedDims(), keepsDims(), ::spmd::layout::ReduceKind::"
                 # reduce # ");";
}

/// Element `index` of dim `dim` of `self`, a result without that dim
/// (select.int): the dim stays whole, the others pass through, Partials
/// included.
class Aten_SelectOp<string mnemonic> : Aten_Op<mnemonic> {
  let inferBody = [{
    return ::spmd::aten::detail::inferSelect(adaptor.getSelf().getType(),
                                             adaptor.getDim(),
                                             adaptor.getIndex(), emitError,
                                             types);
  }];
  let familyDeclarations = [{
    /// `dim` and `index`, normalized.
    int64_t getSelectedDim() {
      return ::spmd::aten::normalizeDim(getDim(), getSelf().getType().getRank());
    }
    int64_t getSelectedIndex() {
      int64_t size = getSelf().getType().getDimSize(getSelectedDim());
      int64_t index = static_cast<int64_t>(getIndex());
      return index < 0 ? index + size : index;
    }
  }];
  let ruleBody = [{
    return ::spmd::aten::rules::select(getOperation(), getSelectedDim());
  }];
}

/// Softmax and log-softmax over `dim`, which stays whole.
class Aten_SoftmaxOp<string mnemonic> : Aten_Op<mnemonic> {
  let inferBody = Aten_InferSoftmax;
  let ruleBody = [{
    return ::spmd::aten::rules::keepWhole(
        ::spmd::aten::rules::pointwise(getOperation(), {}), getDim());
  }];
}

/// Their backward: linear in grad_output; `dim` stays whole.
class Aten_SoftmaxBackwardOp<string mnemonic> : Aten_Op<mnemonic> {
  let inferBody = Aten_InferSoftmaxBackward;
  let ruleBody = [{
    return ::spmd::aten::rules::keepWhole(
        ::spmd::aten::rules::pointwise(getOperation(), {{0}}), getDim());
  }];
}

/// Splits into consecutive pieces along `dim`.
class Aten_SplitOp<string mnemonic> : Aten_Op<mnemonic, [Aten_Split]> {
  let ruleBody = [{
    return ::spmd::aten::rules::split(getSelf(), getResults(), getDim());
  }];
}

/// Scaled-dot-product attention, forward and backward, on `[B, H, L|S, E]`
/// query, key and value: batch and heads shard alike on every operand and
/// result, the sequences and the head size stay whole (DTensor's strategy
/// for `_scaled_dot_product_flash_attention`); nonlinear, so no Partial
/// passes through. The result types are each op's own (AtenOps.cpp).
class Aten_AttentionOp<string mnemonic, bit backward = 0> : Aten_Op<mnemonic> {
  let familyDeclarations = [{
    /// The factor of the scores: `scale`, or 1 / sqrt(E) when absent.
    double getScaleValue() {
      return ::spmd::aten::detail::attentionScale(getScale(),
                                                  getQuery().getType());
    }
  }];
  let ruleBody = [{
    return ::spmd::aten::rules::attention(getOperation(), getAttnMask(),
  }] # !if(backward, "true", "false") # [{);
  }];
}

/// Ops whose rules are their own (normalization, indexing, losses, cat and
/// split): defined in AtenOps.cpp and AtenSharding.cpp.
class Aten_OtherOp<string mnemonic, list<Trait> traits = []>
    : Aten_Op<mnemonic, traits>;

include "spmd/Dialect/Aten/GeneratedAtenOps.td"

#endif // SPMD_DIALECT_ATEN_ATENOPS_TD
