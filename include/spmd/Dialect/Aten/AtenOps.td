//===- AtenOps.td - aten operations ------------------------*- tablegen -*-===//
//
// One op per ATen overload traced from PyTorch 1.13 training steps (MLP,
// nn.TransformerEncoderLayer pre/post-norm with relu/gelu, nn.Embedding,
// nn.LayerNorm, dropout, cross-entropy, SGD and Adam). View ops are value
// copies here (`aten.view` stands for view/view_copy). Every op infers its
// result types with ATen's rules in `inferResultTypes`; the verifier
// compares them with the declared ones.
//
//===----------------------------------------------------------------------===//

#ifndef SPMD_DIALECT_ATEN_ATENOPS_TD
#define SPMD_DIALECT_ATEN_ATENOPS_TD

include "spmd/Dialect/Aten/AtenDialect.td"
include "spmd/Dialect/Aten/AtenInterfaces.td"
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
/// Class indices of the losses: ATen requires int64 ("expected scalar type Long").
def Aten_TargetTensor : StaticShapeTensorOf<[I64]>;

/// An ATen `Scalar`: an integer (i64) or floating-point (f64) number. The
/// kind matters for type promotion (int tensor op float scalar -> float).
def Aten_ScalarAttr : AnyAttrOf<[I64Attr, F64Attr]>;
/// An ATen `Scalar` that defaults to 1 (alpha, beta, value).
def Aten_ScaleAttr : DefaultValuedAttr<F64Attr, "1.0">;

//===----------------------------------------------------------------------===//
// Base classes
//===----------------------------------------------------------------------===//

/// An aten op. `inferResultTypes` computes the result types as ATen does and
/// reports the first rule the operands/attributes break through `emitError`;
/// the verifier calls it and compares with the declared result types.
class Aten_Op<string mnemonic, list<Trait> traits = [], bit pure = 1>
    : Op<Aten_Dialect, mnemonic,
         !listconcat(!if(pure, !listconcat(traits, [Pure]), traits),
                     [Aten_ShardingRuleOpInterface])> {
  let assemblyFormat = "operands attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
  // Ops with a shared rule set `inferBody` to a call; others define
  // inferResultTypes in AtenOps.cpp.
  code inferBody = "";
  let extraClassDeclaration = [{
    /// Infers the result types with ATen's shape and dtype rules; on a
    /// violation emits a diagnostic through `emitError` and fails.
    static ::llvm::LogicalResult inferResultTypes(
        Adaptor adaptor,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError,
        ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
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
  }], inferBody, "}")));
}

/// Elementwise op of one tensor: result has the operand's type.
class Aten_UnaryOp<string mnemonic, string schema, list<Trait> traits = []>
    : Aten_Op<mnemonic, traits> {
  let summary = schema;
  let arguments = (ins Aten_Tensor:$self);
  let results = (outs Aten_Tensor:$result);
  let inferBody = "types.push_back(adaptor.getSelf().getType()); return ::mlir::success();";
}

/// Elementwise op of several tensors: broadcast shapes, promoted dtype.
class Aten_BroadcastOp<string mnemonic, string schema, dag args>
    : Aten_Op<mnemonic> {
  let summary = schema;
  let arguments = args;
  let results = (outs Aten_Tensor:$result);
  let inferBody = [{
    return ::spmd::aten::detail::inferBroadcast(
        adaptor.getOperands().getTypes(), emitError, types);
  }];
}

/// Elementwise op of a tensor and a scalar attribute `other`.
class Aten_TensorScalarOp<string mnemonic, string schema, dag args>
    : Aten_Op<mnemonic> {
  let summary = schema;
  let arguments = args;
  let results = (outs Aten_Tensor:$result);
  let inferBody = [{
    types.push_back(::spmd::aten::detail::promoteWithScalar(
        adaptor.getSelf().getType(), adaptor.getOther()));
    return ::mlir::success();
  }];
}

/// A reshape to `size` (one entry may be -1): the element count must match.
class Aten_ReshapeOp<string mnemonic, string schema, dag args>
    : Aten_Op<mnemonic> {
  let summary = schema;
  let arguments = args;
  let results = (outs Aten_Tensor:$result);
  let inferBody = [{
    return ::spmd::aten::detail::inferReshape(adaptor.getSelf().getType(),
                                              adaptor.getSize(), emitError,
                                              types);
  }];
}

/// Softmax-family forward: same type as the input, `dim` in range.
class Aten_SoftmaxOp<string mnemonic, string schema> : Aten_Op<mnemonic> {
  let summary = schema;
  let arguments = (ins Aten_FloatTensor:$self, I64Attr:$dim,
                       BoolAttr:$half_to_float);
  let results = (outs Aten_FloatTensor:$result);
  let inferBody = [{
    return ::spmd::aten::detail::inferNormalizedOverDim(
        adaptor.getSelf().getType(), adaptor.getDim(),
        adaptor.getHalfToFloat(), emitError, types);
  }];
}

/// Softmax-family backward: grad_output and output agree; result is the
/// gradient of the input.
class Aten_SoftmaxBackwardOp<string mnemonic, string schema> : Aten_Op<mnemonic> {
  let summary = schema;
  let arguments = (ins Aten_FloatTensor:$grad_output, Aten_FloatTensor:$output,
                       I64Attr:$dim, TypeAttr:$input_dtype);
  let results = (outs Aten_FloatTensor:$result);
  let inferBody = [{
    return ::spmd::aten::detail::inferSoftmaxBackward(
        adaptor.getGradOutput().getType(), adaptor.getOutput().getType(),
        adaptor.getDim(), adaptor.getInputDtype(), emitError, types);
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Aten_AddTensorOp : Aten_BroadcastOp<"add.Tensor",
    "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    (ins Aten_Tensor:$self, Aten_Tensor:$other, Aten_ScaleAttr:$alpha)> {
  let description = "`self + alpha * other`, broadcasting.";
}
def Aten_SubTensorOp : Aten_BroadcastOp<"sub.Tensor",
    "aten::sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    (ins Aten_Tensor:$self, Aten_Tensor:$other, Aten_ScaleAttr:$alpha)> {
  let description = "`self - alpha * other`, broadcasting.";
}
def Aten_MulTensorOp : Aten_BroadcastOp<"mul.Tensor",
    "aten::mul.Tensor(Tensor self, Tensor other) -> Tensor",
    (ins Aten_Tensor:$self, Aten_Tensor:$other)>;
def Aten_DivTensorOp : Aten_BroadcastOp<"div.Tensor",
    "aten::div.Tensor(Tensor self, Tensor other) -> Tensor",
    (ins Aten_Tensor:$self, Aten_Tensor:$other)> {
  let description = "True division: integer operands give the default float dtype (f32).";
  let inferBody = [{
    return ::spmd::aten::detail::inferBroadcast(
        adaptor.getOperands().getTypes(), emitError, types, /*trueDivide=*/true);
  }];
}
def Aten_AddcmulOp : Aten_BroadcastOp<"addcmul",
    "aten::addcmul(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
    (ins Aten_Tensor:$self, Aten_Tensor:$tensor1, Aten_Tensor:$tensor2,
         Aten_ScaleAttr:$value)> {
  let description = "`self + value * tensor1 * tensor2`, broadcasting.";
}
def Aten_AddcdivOp : Aten_BroadcastOp<"addcdiv",
    "aten::addcdiv(Tensor self, Tensor tensor1, Tensor tensor2, *, Scalar value=1) -> Tensor",
    (ins Aten_Tensor:$self, Aten_Tensor:$tensor1, Aten_Tensor:$tensor2,
         Aten_ScaleAttr:$value)> {
  let description = "`self + value * tensor1 / tensor2`, broadcasting.";
}
def Aten_ThresholdBackwardOp : Aten_BroadcastOp<"threshold_backward",
    "aten::threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
    (ins Aten_Tensor:$grad_output, Aten_Tensor:$self, Aten_ScalarAttr:$threshold)> {
  let description = "`self <= threshold ? 0 : grad_output` (relu backward).";
}

def Aten_AddScalarOp : Aten_TensorScalarOp<"add.Scalar",
    "aten::add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
    (ins Aten_Tensor:$self, Aten_ScalarAttr:$other, Aten_ScaleAttr:$alpha)>;
def Aten_MulScalarOp : Aten_TensorScalarOp<"mul.Scalar",
    "aten::mul.Scalar(Tensor self, Scalar other) -> Tensor",
    (ins Aten_Tensor:$self, Aten_ScalarAttr:$other)>;
def Aten_DivScalarOp : Aten_TensorScalarOp<"div.Scalar",
    "aten::div.Scalar(Tensor self, Scalar other) -> Tensor",
    (ins Aten_Tensor:$self, Aten_ScalarAttr:$other)> {
  let description = "True division: an integer or bool `self` gives the default float dtype (f32).";
  let inferBody = "";
}
def Aten_RsubScalarOp : Aten_TensorScalarOp<"rsub.Scalar",
    "aten::rsub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
    (ins Aten_Tensor:$self, Aten_ScalarAttr:$other, Aten_ScaleAttr:$alpha)> {
  let description = "`other - alpha * self`.";
}

def Aten_PowScalarOp : Aten_Op<"pow.Scalar"> {
  let summary = "aten::pow.Scalar(Scalar self, Tensor exponent) -> Tensor";
  let description = "`self ** exponent` for a scalar base.";
  let arguments = (ins Aten_ScalarAttr:$self, Aten_Tensor:$exponent);
  let results = (outs Aten_Tensor:$result);
  let inferBody = [{
    types.push_back(::spmd::aten::detail::promoteWithScalar(
        adaptor.getExponent().getType(), adaptor.getSelf()));
    return ::mlir::success();
  }];
}

def Aten_NegOp : Aten_UnaryOp<"neg", "aten::neg(Tensor self) -> Tensor">;
/// Unary float op: an integer or bool `self` gives the default float dtype.
class Aten_UnaryFloatOp<string mnemonic, string schema>
    : Aten_UnaryOp<mnemonic, schema> {
  let description = "An integer or bool `self` gives the default float dtype (f32).";
  let inferBody = [{
    types.push_back(::spmd::aten::detail::liftToFloat(adaptor.getSelf().getType()));
    return ::mlir::success();
  }];
}
def Aten_ReciprocalOp : Aten_UnaryFloatOp<"reciprocal", "aten::reciprocal(Tensor self) -> Tensor">;
def Aten_SqrtOp : Aten_UnaryFloatOp<"sqrt", "aten::sqrt(Tensor self) -> Tensor">;
def Aten_ReluOp : Aten_UnaryOp<"relu", "aten::relu(Tensor self) -> Tensor">;
def Aten_CloneOp : Aten_UnaryOp<"clone", "aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor"> {
  let description = "A copy; memory formats do not exist in value semantics.";
}
def Aten_DetachOp : Aten_UnaryOp<"detach", "aten::detach(Tensor(a) self) -> Tensor(a)"> {
  let description = "Identity on values (detach / detach_copy).";
}

def Aten_ToCopyOp : Aten_Op<"_to_copy"> {
  let summary = "aten::_to_copy(Tensor self, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, bool? pin_memory=None, bool non_blocking=False, MemoryFormat? memory_format=None) -> Tensor";
  let description = [{
    `self` converted to element type `dtype` (`Tensor.to(dtype)`), with
    ATen's casts: to a float type rounds to nearest even, a float to an
    integer truncates toward zero, to `i1` is "nonzero". Layout, device,
    pinning and memory format mean nothing in value semantics and are not
    kept. Also the casts of ddp's bf16 communication hook.
  }];
  let arguments = (ins Aten_Tensor:$self, TypeAttr:$dtype);
  let results = (outs Aten_Tensor:$result);
}

def Aten_GeluOp : Aten_Op<"gelu"> {
  let summary = "aten::gelu(Tensor self, *, str approximate=\"none\") -> Tensor";
  let description = "`approximate` is `none` (erf) or `tanh`.";
  let arguments = (ins Aten_FloatTensor:$self,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Aten_FloatTensor:$result);
}
def Aten_GeluBackwardOp : Aten_Op<"gelu_backward"> {
  let summary = "aten::gelu_backward(Tensor grad_output, Tensor self, *, str approximate=\"none\") -> Tensor";
  let arguments = (ins Aten_FloatTensor:$grad_output, Aten_FloatTensor:$self,
                       DefaultValuedStrAttr<StrAttr, "none">:$approximate);
  let results = (outs Aten_FloatTensor:$result);
}

def Aten_TriuOp : Aten_Op<"triu"> {
  let summary = "aten::triu(Tensor self, int diagonal=0) -> Tensor";
  let description = "Zeroes the elements below the `diagonal`-th diagonal of the last two dims.";
  let arguments = (ins Aten_Tensor:$self, DefaultValuedAttr<I64Attr, "0">:$diagonal);
  let results = (outs Aten_Tensor:$result);
}

//===----------------------------------------------------------------------===//
// Random
//===----------------------------------------------------------------------===//

def Aten_BernoulliPOp : Aten_Op<"bernoulli.p", [], /*pure=*/0> {
  let summary = "aten::bernoulli.p(Tensor self, float p=0.5, *, Generator? generator=None) -> Tensor";
  let description = [{
    A tensor shaped and typed like `self` whose elements are 1 with
    probability `p` and 0 otherwise (the values of `self` are not read).
    Dropout's `empty_like` + `bernoulli_(1 - p)` pair is captured as this op.
    Not pure: two draws are never merged.
  }];
  let arguments = (ins Aten_FloatTensor:$self, F64Attr:$p);
  let results = (outs Aten_FloatTensor:$result);
}

def Aten_NativeDropoutOp : Aten_Op<"native_dropout", [], /*pure=*/0> {
  let summary = "aten::native_dropout(Tensor input, float p, bool? train) -> (Tensor, Tensor)";
  let description = [{
    Zeroes each element with probability `p` and scales the kept ones by
    `1 / (1 - p)`; also returns the boolean keep mask. Not pure.
  }];
  let arguments = (ins Aten_FloatTensor:$input, F64Attr:$p, BoolAttr:$train);
  let results = (outs Aten_FloatTensor:$output, StaticShapeTensorOf<[I1]>:$mask);
}
def Aten_NativeDropoutBackwardOp : Aten_Op<"native_dropout_backward"> {
  let summary = "aten::native_dropout_backward(Tensor grad_output, Tensor mask, float scale) -> Tensor";
  let arguments = (ins Aten_FloatTensor:$grad_output, StaticShapeTensorOf<[I1]>:$mask,
                       F64Attr:$scale);
  let results = (outs Aten_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

def Aten_OnesLikeOp : Aten_Op<"ones_like"> {
  let summary = "aten::ones_like(Tensor self, *, ScalarType? dtype=None, ...) -> Tensor";
  let description = "Ones shaped like `self`, of `dtype` when given, else `self`'s dtype.";
  let arguments = (ins Aten_Tensor:$self, OptionalAttr<TypeAttr>:$dtype);
  let results = (outs Aten_Tensor:$result);
}
def Aten_FullOp : Aten_Op<"full"> {
  let assemblyFormat = "attr-dict `:` functional-type(operands, results)";
  let summary = "aten::full(SymInt[] size, Scalar fill_value, *, ScalarType? dtype=None, ...) -> Tensor";
  let description = "A tensor of shape `size` filled with `fill_value`, of element type `dtype`.";
  let arguments = (ins DenseI64ArrayAttr:$size, Aten_ScalarAttr:$fill_value,
                       TypeAttr:$dtype);
  let results = (outs Aten_Tensor:$result);
}
def Aten_ArangeOp : Aten_Op<"arange"> {
  let assemblyFormat = "attr-dict `:` functional-type(operands, results)";
  let summary = "aten::arange(Scalar end, *, ScalarType? dtype=None, ...) -> Tensor";
  let description = "`[0, 1, ..., ceil(end) - 1]` of element type `dtype`.";
  let arguments = (ins Aten_ScalarAttr:$end, TypeAttr:$dtype);
  let results = (outs Aten_Tensor:$result);
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Aten_MmOp : Aten_Op<"mm"> {
  let summary = "aten::mm(Tensor self, Tensor mat2) -> Tensor";
  let description = "`[n, k] x [k, m] -> [n, m]`.";
  let arguments = (ins Aten_FloatTensor:$self, Aten_FloatTensor:$mat2);
  let results = (outs Aten_FloatTensor:$result);
}
def Aten_AddmmOp : Aten_Op<"addmm"> {
  let summary = "aten::addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor";
  let description = "`beta * self + alpha * (mat1 @ mat2)`; `self` broadcasts to `[n, m]`.";
  let arguments = (ins Aten_FloatTensor:$self, Aten_FloatTensor:$mat1,
                       Aten_FloatTensor:$mat2, Aten_ScaleAttr:$beta,
                       Aten_ScaleAttr:$alpha);
  let results = (outs Aten_FloatTensor:$result);
}
def Aten_BmmOp : Aten_Op<"bmm"> {
  let summary = "aten::bmm(Tensor self, Tensor mat2) -> Tensor";
  let description = "`[b, n, k] x [b, k, m] -> [b, n, m]`.";
  let arguments = (ins Aten_FloatTensor:$self, Aten_FloatTensor:$mat2);
  let results = (outs Aten_FloatTensor:$result);
}
def Aten_BaddbmmOp : Aten_Op<"baddbmm"> {
  let summary = "aten::baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> Tensor";
  let description = "`beta * self + alpha * bmm(batch1, batch2)`; `self` broadcasts to `[b, n, m]`.";
  let arguments = (ins Aten_FloatTensor:$self, Aten_FloatTensor:$batch1,
                       Aten_FloatTensor:$batch2, Aten_ScaleAttr:$beta,
                       Aten_ScaleAttr:$alpha);
  let results = (outs Aten_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Shape and layout
//===----------------------------------------------------------------------===//

def Aten_ViewOp : Aten_ReshapeOp<"view",
    "aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
    (ins Aten_Tensor:$self, DenseI64ArrayAttr:$size)>;
def Aten_UnsafeViewOp : Aten_ReshapeOp<"_unsafe_view",
    "aten::_unsafe_view(Tensor self, SymInt[] size) -> Tensor",
    (ins Aten_Tensor:$self, DenseI64ArrayAttr:$size)>;
def Aten_ReshapeAliasOp : Aten_ReshapeOp<"_reshape_alias",
    "aten::_reshape_alias(Tensor(a) self, SymInt[] size, SymInt[] stride) -> Tensor(a)",
    (ins Aten_Tensor:$self, DenseI64ArrayAttr:$size, DenseI64ArrayAttr:$stride)> {
  let description = "A reshape to `size`; `stride` is memory layout, kept for fidelity and ignored.";
}

def Aten_TOp : Aten_Op<"t"> {
  let summary = "aten::t(Tensor(a) self) -> Tensor(a)";
  let description = "Transposes a 2-D tensor; 0-D and 1-D tensors are returned as is.";
  let arguments = (ins Aten_Tensor:$self);
  let results = (outs Aten_Tensor:$result);
}
def Aten_TransposeIntOp : Aten_Op<"transpose.int"> {
  let summary = "aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)";
  let arguments = (ins Aten_Tensor:$self, I64Attr:$dim0, I64Attr:$dim1);
  let results = (outs Aten_Tensor:$result);
}
def Aten_PermuteOp : Aten_Op<"permute"> {
  let summary = "aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)";
  let arguments = (ins Aten_Tensor:$self, DenseI64ArrayAttr:$dims);
  let results = (outs Aten_Tensor:$result);
}
def Aten_UnsqueezeOp : Aten_Op<"unsqueeze"> {
  let summary = "aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)";
  let arguments = (ins Aten_Tensor:$self, I64Attr:$dim);
  let results = (outs Aten_Tensor:$result);
}
def Aten_ExpandOp : Aten_Op<"expand"> {
  let summary = "aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)";
  let description = "Broadcasts `self` to `size`; -1 keeps a dim; new dims are prepended.";
  let arguments = (ins Aten_Tensor:$self, DenseI64ArrayAttr:$size,
                       DefaultValuedAttr<BoolAttr, "false">:$implicit);
  let results = (outs Aten_Tensor:$result);
}
def Aten_CatOp : Aten_Op<"cat"> {
  let summary = "aten::cat(Tensor[] tensors, int dim=0) -> Tensor";
  let arguments = (ins Variadic<Aten_Tensor>:$tensors,
                       DefaultValuedAttr<I64Attr, "0">:$dim);
  let results = (outs Aten_Tensor:$result);
}
def Aten_SplitTensorOp : Aten_Op<"split.Tensor"> {
  let summary = "aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]";
  let description = "Pieces of `split_size` along `dim`, the last one possibly smaller.";
  let arguments = (ins Aten_Tensor:$self, I64Attr:$split_size,
                       DefaultValuedAttr<I64Attr, "0">:$dim);
  let results = (outs Variadic<Aten_Tensor>:$results);
}

def Aten_SplitWithSizesOp : Aten_Op<"split_with_sizes"> {
  let summary = "aten::split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]";
  let description = [{
    Consecutive pieces of `split_sizes[i]` elements along `dim`; the sizes
    must add up to the dim's length. DDP's gradient buckets use it to take
    the reduced flat buffer apart.
  }];
  let arguments = (ins Aten_Tensor:$self, DenseI64ArrayAttr:$split_sizes,
                       DefaultValuedAttr<I64Attr, "0">:$dim);
  let results = (outs Variadic<Aten_Tensor>:$results);
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

def Aten_SumOp : Aten_Op<"sum"> {
  let summary = "aten::sum(Tensor self, *, ScalarType? dtype=None) -> Tensor";
  let description = "Sum of all elements, a 0-D tensor (integer inputs sum to i64).";
  let arguments = (ins Aten_Tensor:$self, OptionalAttr<TypeAttr>:$dtype);
  let results = (outs Aten_Tensor:$result);
}
def Aten_SumDimIntListOp : Aten_Op<"sum.dim_IntList"> {
  let summary = "aten::sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor";
  let arguments = (ins Aten_Tensor:$self, DenseI64ArrayAttr:$dim,
                       DefaultValuedAttr<BoolAttr, "false">:$keepdim,
                       OptionalAttr<TypeAttr>:$dtype);
  let results = (outs Aten_Tensor:$result);
}

//===----------------------------------------------------------------------===//
// Normalization and losses
//===----------------------------------------------------------------------===//

def Aten_SoftmaxOp : Aten_SoftmaxOp<"_softmax",
    "aten::_softmax(Tensor self, int dim, bool half_to_float) -> Tensor">;
def Aten_LogSoftmaxOp : Aten_SoftmaxOp<"_log_softmax",
    "aten::_log_softmax(Tensor self, int dim, bool half_to_float) -> Tensor">;
def Aten_SoftmaxBackwardDataOp : Aten_SoftmaxBackwardOp<"_softmax_backward_data",
    "aten::_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor">;
def Aten_LogSoftmaxBackwardDataOp : Aten_SoftmaxBackwardOp<"_log_softmax_backward_data",
    "aten::_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim, ScalarType input_dtype) -> Tensor">;

def Aten_NativeLayerNormOp : Aten_Op<"native_layer_norm", [AttrSizedOperandSegments]> {
  let summary = "aten::native_layer_norm(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps) -> (Tensor, Tensor, Tensor)";
  let description = [{
    Normalizes over the trailing `normalized_shape` dims. Results: the output
    (shaped like `input`), and the mean and reciprocal standard deviation,
    shaped like `input` with the normalized dims set to 1.
  }];
  let arguments = (ins Aten_FloatTensor:$input, Optional<Aten_FloatTensor>:$weight,
                       Optional<Aten_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$normalized_shape, F64Attr:$eps);
  let results = (outs Aten_FloatTensor:$output, Aten_FloatTensor:$mean,
                      Aten_FloatTensor:$rstd);
  let assemblyFormat = [{
    $input (`weight` $weight^)? (`bias` $bias^)? attr-dict `:`
    functional-type(operands, results)
  }];
}
def Aten_NativeLayerNormBackwardOp : Aten_Op<"native_layer_norm_backward",
    [AttrSizedOperandSegments]> {
  let summary = "aten::native_layer_norm_backward(Tensor grad_out, Tensor input, SymInt[] normalized_shape, Tensor mean, Tensor rstd, Tensor? weight, Tensor? bias, bool[3] output_mask) -> (Tensor, Tensor, Tensor)";
  let description = [{
    Gradients of the input (shaped like `input`), the weight and the bias
    (shaped `normalized_shape`). A result whose `output_mask` entry is false
    is not computed by ATen (None); here it is produced but unused.
  }];
  let arguments = (ins Aten_FloatTensor:$grad_out, Aten_FloatTensor:$input,
                       Aten_FloatTensor:$mean, Aten_FloatTensor:$rstd,
                       Optional<Aten_FloatTensor>:$weight,
                       Optional<Aten_FloatTensor>:$bias,
                       DenseI64ArrayAttr:$normalized_shape,
                       DenseBoolArrayAttr:$output_mask);
  let results = (outs Aten_FloatTensor:$grad_input, Aten_FloatTensor:$grad_weight,
                      Aten_FloatTensor:$grad_bias);
  let assemblyFormat = [{
    $grad_out `,` $input `,` $mean `,` $rstd (`weight` $weight^)?
    (`bias` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Aten_EmbeddingOp : Aten_Op<"embedding"> {
  let summary = "aten::embedding(Tensor weight, Tensor indices, int padding_idx=-1, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor";
  let description = "Rows of `weight` [V, D] picked by `indices`: shape `indices.shape + [D]`.";
  let arguments = (ins Aten_FloatTensor:$weight, Aten_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "-1">:$padding_idx,
                       DefaultValuedAttr<BoolAttr, "false">:$scale_grad_by_freq,
                       DefaultValuedAttr<BoolAttr, "false">:$sparse);
  let results = (outs Aten_FloatTensor:$result);
}
def Aten_EmbeddingDenseBackwardOp : Aten_Op<"embedding_dense_backward"> {
  let summary = "aten::embedding_dense_backward(Tensor grad_output, Tensor indices, SymInt num_weights, int padding_idx, bool scale_grad_by_freq) -> Tensor";
  let description = "Scatter-adds `grad_output` rows into a `[num_weights, D]` gradient.";
  let arguments = (ins Aten_FloatTensor:$grad_output, Aten_IndexTensor:$indices,
                       I64Attr:$num_weights, I64Attr:$padding_idx,
                       BoolAttr:$scale_grad_by_freq);
  let results = (outs Aten_FloatTensor:$result);
}

def Aten_NllLossForwardOp : Aten_Op<"nll_loss_forward"> {
  let summary = "aten::nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, int ignore_index) -> (Tensor output, Tensor total_weight)";
  let description = [{
    `self` is `[N, C]` (or `[C]`) log-probabilities, `target` `[N]` (or `[]`)
    class indices, `weight` optional `[C]`. `reduction` is 0 (none: output
    `[N]`), 1 (mean) or 2 (sum) (0-D output). `total_weight` is 0-D.
  }];
  let arguments = (ins Aten_FloatTensor:$self, Aten_TargetTensor:$target,
                       Optional<Aten_FloatTensor>:$weight, I64Attr:$reduction,
                       I64Attr:$ignore_index);
  let results = (outs Aten_FloatTensor:$output, Aten_FloatTensor:$total_weight);
  let assemblyFormat = [{
    $self `,` $target (`weight` $weight^)? attr-dict `:`
    functional-type(operands, results)
  }];
}
def Aten_NllLossBackwardOp : Aten_Op<"nll_loss_backward"> {
  let summary = "aten::nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, int reduction, int ignore_index, Tensor total_weight) -> Tensor";
  let description = "The gradient of `self`; operands as in `aten.nll_loss_forward`.";
  let arguments = (ins Aten_FloatTensor:$grad_output, Aten_FloatTensor:$self,
                       Aten_TargetTensor:$target, Optional<Aten_FloatTensor>:$weight,
                       Aten_FloatTensor:$total_weight, I64Attr:$reduction,
                       I64Attr:$ignore_index);
  let results = (outs Aten_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $self `,` $target (`weight` $weight^)? `,` $total_weight
    attr-dict `:` functional-type(operands, results)
  }];
}

#endif // SPMD_DIALECT_ATEN_ATENOPS_TD
