//===- AtenOps.cpp - aten operations, shape and dtype inference -----------===//
//
// Result types follow ATen's meta functions (shape) and at::result_type
// (dtype). Dims may be negative (Python-style) wherever ATen allows it.
//
//===----------------------------------------------------------------------===//

#include "spmd/Dialect/Aten/Aten.h"
#include "spmd/Runtime/Window.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>

using namespace mlir;
using namespace spmd::aten;
using namespace spmd::aten::detail;

#define GET_OP_CLASSES
#include "spmd/Dialect/Aten/AtenOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Shared rules
//===----------------------------------------------------------------------===//

namespace {
/// Type-promotion category: bool < integer < floating point.
enum class Category { Bool = 0, Integer = 1, Float = 2 };
} // namespace

static Category getCategory(Type t) {
  if (t.isInteger(1))
    return Category::Bool;
  if (llvm::isa<IntegerType>(t))
    return Category::Integer;
  return Category::Float;
}

Type spmd::aten::promoteTypes(Type a, Type b) {
  if (!a)
    return b;
  if (!b || a == b)
    return a;
  Category ca = getCategory(a), cb = getCategory(b);
  if (ca != cb)
    return ca > cb ? a : b;
  if (a.getIntOrFloatBitWidth() != b.getIntOrFloatBitWidth())
    return a.getIntOrFloatBitWidth() > b.getIntOrFloatBitWidth() ? a : b;
  // Same width, different float formats (bf16 and f16).
  return Float32Type::get(a.getContext());
}

Type spmd::aten::resultElementType(TypeRange types) {
  Type dimResult, zeroResult;
  for (Type t : types) {
    auto tensor = llvm::cast<RankedTensorType>(t);
    Type &slot = tensor.getRank() > 0 ? dimResult : zeroResult;
    slot = promoteTypes(slot, tensor.getElementType());
  }
  if (!dimResult)
    return zeroResult;
  if (zeroResult && getCategory(zeroResult) > getCategory(dimResult))
    return promoteTypes(dimResult, zeroResult);
  return dimResult;
}

SmallVector<int64_t>
spmd::aten::detail::reducedDims(int64_t rank,
                                std::optional<ArrayRef<int64_t>> dims) {
  if (!dims || dims->empty())
    return llvm::to_vector(llvm::seq<int64_t>(0, rank));
  return llvm::map_to_vector(*dims,
                             [&](int64_t d) { return normalizeDim(d, rank); });
}

SmallVector<int64_t> TOp::getPermutation() {
  int64_t rank = getSelf().getType().getRank();
  if (rank == 2)
    return {1, 0};
  return llvm::to_vector(llvm::seq<int64_t>(0, rank));
}

SmallVector<int64_t> TransposeIntOp::getPermutation() {
  int64_t rank = getSelf().getType().getRank();
  auto perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (rank > 0)
    std::swap(perm[normalizeDim(getDim0(), rank)],
              perm[normalizeDim(getDim1(), rank)]);
  return perm;
}

SmallVector<int64_t> PermuteOp::getPermutation() {
  int64_t rank = getSelf().getType().getRank();
  SmallVector<int64_t> perm;
  for (int64_t d : getDims())
    perm.push_back(normalizeDim(d, rank));
  return perm;
}

double spmd::aten::getScalarValue(Attribute scalar) {
  if (auto f = llvm::dyn_cast<FloatAttr>(scalar))
    return f.getValueAsDouble();
  return static_cast<double>(llvm::cast<IntegerAttr>(scalar).getInt());
}

Type spmd::aten::detail::liftToFloat(Type type) {
  auto tensor = llvm::cast<RankedTensorType>(type);
  if (getCategory(tensor.getElementType()) == Category::Float)
    return tensor;
  return tensor.clone(Float32Type::get(type.getContext()));
}

Type spmd::aten::detail::promoteWithScalar(Type tensor, Attribute scalar) {
  auto type = llvm::cast<RankedTensorType>(tensor);
  Type elem = type.getElementType();
  Category c = getCategory(elem);
  if (llvm::isa<FloatAttr>(scalar) && c != Category::Float)
    elem = Float32Type::get(tensor.getContext());
  else if (c == Category::Bool)
    elem = IntegerType::get(tensor.getContext(), 64);
  return type.clone(elem);
}

int64_t spmd::aten::detail::indexOf(StringRef value,
                                    ArrayRef<StringRef> values) {
  return llvm::find(values, value) - values.begin();
}

LogicalResult spmd::aten::detail::verifyResultTypes(Operation *op,
                                                    InferFn infer) {
  SmallVector<Type> inferred;
  if (failed(infer([op] { return op->emitOpError(); }, inferred)))
    return failure();
  if (TypeRange(inferred) == op->getResultTypes())
    return success();
  InFlightDiagnostic diag = op->emitOpError("expected result type");
  if (inferred.size() != 1)
    diag << "s";
  diag << " ";
  llvm::interleaveComma(inferred, diag);
  diag << ", got ";
  llvm::interleaveComma(op->getResultTypes(), diag);
  return diag;
}

/// Normalizes a Python-style `dim` for a tensor of `rank` dims (ATen's
/// maybe_wrap_dim; a 0-D tensor accepts 0 and -1).
static FailureOr<int64_t> wrapDim(int64_t dim, int64_t rank,
                                  EmitErrorFn emitError,
                                  StringRef what = "dim") {
  int64_t extent = std::max<int64_t>(rank, 1);
  if (dim < -extent || dim >= extent) {
    emitError() << what << " " << dim
                << " is out of range for a tensor of rank " << rank;
    return failure();
  }
  return spmd::aten::normalizeDim(dim, rank);
}

static RankedTensorType tensorType(Value v) {
  return llvm::cast<RankedTensorType>(v.getType());
}
static RankedTensorType tensorType(Type t) {
  return llvm::cast<RankedTensorType>(t);
}

/// Numpy broadcasting of two shapes; fails naming both.
static FailureOr<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a,
                                                       ArrayRef<int64_t> b,
                                                       EmitErrorFn emitError) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      InFlightDiagnostic diag = emitError() << "shapes [";
      llvm::interleaveComma(a, diag);
      diag << "] and [";
      llvm::interleaveComma(b, diag);
      diag << "] do not broadcast (dim " << i << ": " << da << " vs " << db
           << ")";
      return failure();
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

LogicalResult spmd::aten::detail::inferBroadcast(TypeRange operands,
                                                 EmitErrorFn emitError,
                                                 SmallVectorImpl<Type> &types,
                                                 bool trueDivide) {
  // Operands of one type (most elementwise ops) broadcast to that type: no
  // shape to build, no type to unique.
  if (!operands.empty() && llvm::all_equal(operands) &&
      !tensorType(operands.front()).getEncoding()) {
    types.push_back(trueDivide ? liftToFloat(operands.front())
                               : operands.front());
    return success();
  }
  SmallVector<int64_t> shape;
  for (Type t : operands) {
    auto shapeOr = broadcastShapes(shape, tensorType(t).getShape(), emitError);
    if (failed(shapeOr))
      return failure();
    shape = *shapeOr;
  }
  Type result = RankedTensorType::get(shape, resultElementType(operands));
  types.push_back(trueDivide ? liftToFloat(result) : result);
  return success();
}

LogicalResult spmd::aten::detail::inferReshape(Type self,
                                               ArrayRef<int64_t> size,
                                               EmitErrorFn emitError,
                                               SmallVectorImpl<Type> &types) {
  auto type = tensorType(self);
  SmallVector<int64_t> shape(size);
  int64_t known = 1;
  std::optional<size_t> inferredDim;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (d == -1) {
      if (inferredDim)
        return emitError() << "only one dimension can be inferred (-1)";
      inferredDim = i;
    } else if (d < 0) {
      return emitError() << "invalid size " << d << " in dim " << i;
    } else {
      known *= d;
    }
  }
  int64_t numel = type.getNumElements();
  if (inferredDim) {
    if (known == 0 || numel % known != 0)
      return emitError() << "shape '[" << size << "]' is invalid for input of "
                         << numel << " elements";
    shape[*inferredDim] = numel / known;
  } else if (known != numel) {
    InFlightDiagnostic diag = emitError() << "shape '[";
    llvm::interleaveComma(size, diag);
    return diag << "]' is invalid for input of " << numel << " elements";
  }
  types.push_back(ArrayRef<int64_t>(shape) == type.getShape()
                      ? Type(type)
                      : Type(type.clone(shape)));
  return success();
}

LogicalResult spmd::aten::detail::inferNormalizedOverDim(
    Type self, int64_t dim, bool halfToFloat, EmitErrorFn emitError,
    SmallVectorImpl<Type> &types) {
  auto type = tensorType(self);
  if (failed(wrapDim(dim, type.getRank(), emitError)))
    return failure();
  if (halfToFloat) {
    if (!type.getElementType().isF16())
      return emitError() << "half_to_float needs an f16 input, got "
                         << type.getElementType();
    types.push_back(type.clone(Float32Type::get(self.getContext())));
    return success();
  }
  types.push_back(type);
  return success();
}

LogicalResult spmd::aten::detail::inferSoftmaxBackward(
    Type gradOutput, Type output, int64_t dim, Type inputDtype,
    EmitErrorFn emitError, SmallVectorImpl<Type> &types) {
  auto grad = tensorType(gradOutput), out = tensorType(output);
  if (grad.getShape() != out.getShape())
    return emitError() << "grad_output " << grad << " and output " << out
                       << " differ in shape";
  if (failed(wrapDim(dim, grad.getRank(), emitError)))
    return failure();
  if (!llvm::isa<FloatType>(inputDtype))
    return emitError() << "input_dtype must be a float type, got "
                       << inputDtype;
  // As ATen's meta function: grad_output's dtype, except that an f32
  // gradient of an f16 input (half_to_float) gives f16.
  Type elem = grad.getElementType();
  if (elem.isF32() && inputDtype.isF16())
    elem = inputDtype;
  types.push_back(grad.clone(elem));
  return success();
}

/// Checks that `t` has `rank` dims, naming `what` otherwise.
static LogicalResult expectRank(RankedTensorType t, int64_t rank,
                                StringRef what, EmitErrorFn emitError) {
  if (t.getRank() != rank)
    return emitError() << what << " must be " << rank << "-D, got " << t;
  return success();
}

/// Checks that `a` and `b` have one element type, naming them otherwise.
static LogicalResult expectSameElementType(RankedTensorType a,
                                           RankedTensorType b, StringRef what,
                                           EmitErrorFn emitError) {
  if (a.getElementType() != b.getElementType())
    return emitError() << what
                       << " element types differ: " << a.getElementType()
                       << " vs " << b.getElementType();
  return success();
}

/// Checks that `t` broadcasts to `shape` (ATen expand rules: right-aligned,
/// size 1 or equal).
static LogicalResult expectBroadcastsTo(RankedTensorType t,
                                        ArrayRef<int64_t> shape, StringRef what,
                                        EmitErrorFn emitError) {
  auto out = broadcastShapes(t.getShape(), shape, emitError);
  if (failed(out))
    return failure();
  if (ArrayRef<int64_t>(*out) != shape) {
    InFlightDiagnostic diag = emitError()
                              << what << " " << t << " does not broadcast to [";
    llvm::interleaveComma(shape, diag);
    return diag << "]";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise with custom rules
//===----------------------------------------------------------------------===//

LogicalResult DivScalarOp::inferResultTypes(Adaptor adaptor,
                                            EmitErrorFn emitError,
                                            SmallVectorImpl<Type> &types) {
  types.push_back(liftToFloat(
      promoteWithScalar(adaptor.getSelf().getType(), adaptor.getOther())));
  return success();
}

LogicalResult PowScalarOp::inferResultTypes(Adaptor adaptor, EmitErrorFn,
                                            SmallVectorImpl<Type> &types) {
  types.push_back(
      promoteWithScalar(adaptor.getExponent().getType(), adaptor.getSelf()));
  return success();
}

LogicalResult
PowTensorScalarOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                    SmallVectorImpl<Type> &types) {
  Type self = adaptor.getSelf().getType();
  // ATen's pow meta function (NumPy's rule).
  auto exponent = dyn_cast<IntegerAttr>(adaptor.getExponent());
  if (exponent && exponent.getInt() < 0 &&
      getCategory(tensorType(self).getElementType()) != Category::Float)
    return emitError() << "Integers to negative integer powers are not allowed";
  types.push_back(promoteWithScalar(self, adaptor.getExponent()));
  return success();
}

LogicalResult ClampOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                        SmallVectorImpl<Type> &types) {
  Attribute min = adaptor.getMinAttr(), max = adaptor.getMaxAttr();
  if (!min && !max)
    return emitError() << "at least one of 'min' or 'max' must be given";
  // ATen's clamp meta function: the given bounds take part in the type
  // promotion of a non-float `self`.
  Type type = adaptor.getSelf().getType();
  for (Attribute bound : {min, max})
    if (bound)
      type = promoteWithScalar(type, bound);
  types.push_back(type);
  return success();
}

/// Checks gelu's `approximate` argument: "none" (erf) or "tanh".
static LogicalResult expectGeluApproximation(StringRef approx,
                                             EmitErrorFn emitError) {
  if (approx != "none" && approx != "tanh")
    return emitError() << "approximate must be 'none' or 'tanh', got '"
                       << approx << "'";
  return success();
}

LogicalResult GeluOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                       SmallVectorImpl<Type> &types) {
  if (failed(expectGeluApproximation(adaptor.getApproximate(), emitError)))
    return failure();
  types.push_back(adaptor.getSelf().getType());
  return success();
}

LogicalResult GeluBackwardOp::inferResultTypes(Adaptor adaptor,
                                               EmitErrorFn emitError,
                                               SmallVectorImpl<Type> &types) {
  if (failed(expectGeluApproximation(adaptor.getApproximate(), emitError)))
    return failure();
  return inferBroadcast(adaptor.getOperands().getTypes(), emitError, types);
}

LogicalResult TriuOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                       SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  if (self.getRank() < 2)
    return emitError() << "triu needs at least 2 dims, got " << self;
  types.push_back(self);
  return success();
}

//===----------------------------------------------------------------------===//
// Random
//===----------------------------------------------------------------------===//

/// Checks that the probability `p` lies in [0, 1] (NaN fails).
static LogicalResult expectProbability(const APFloat &p,
                                       EmitErrorFn emitError) {
  double value = p.convertToDouble();
  if (!(value >= 0.0 && value <= 1.0))
    return emitError() << "probability p must be in [0, 1], got " << value;
  return success();
}

LogicalResult BernoulliPOp::inferResultTypes(Adaptor adaptor,
                                             EmitErrorFn emitError,
                                             SmallVectorImpl<Type> &types) {
  if (failed(expectProbability(adaptor.getP(), emitError)))
    return failure();
  types.push_back(adaptor.getSelf().getType());
  return success();
}

LogicalResult NativeDropoutOp::inferResultTypes(Adaptor adaptor,
                                                EmitErrorFn emitError,
                                                SmallVectorImpl<Type> &types) {
  if (failed(expectProbability(adaptor.getP(), emitError)))
    return failure();
  auto input = tensorType(adaptor.getInput());
  types.push_back(input);
  types.push_back(input.clone(IntegerType::get(input.getContext(), 1)));
  return success();
}

LogicalResult NativeDropoutBackwardOp::inferResultTypes(
    Adaptor adaptor, EmitErrorFn emitError, SmallVectorImpl<Type> &types) {
  auto grad = tensorType(adaptor.getGradOutput());
  auto mask = tensorType(adaptor.getMask());
  if (grad.getShape() != mask.getShape())
    return emitError() << "mask " << mask << " does not match grad_output "
                       << grad;
  types.push_back(grad);
  return success();
}

//===----------------------------------------------------------------------===//
// Factories
//===----------------------------------------------------------------------===//

/// Checks that `dtype` is an element type aten tensors may have.
static LogicalResult expectElementType(Type dtype, EmitErrorFn emitError) {
  if (dtype.isF32() || dtype.isBF16() || dtype.isF16() || dtype.isF64() ||
      dtype.isInteger(64) || dtype.isInteger(32) || dtype.isInteger(1))
    return success();
  return emitError() << "unsupported dtype " << dtype;
}

/// ATen's *_like factories: `self`'s shape, `dtype` when given, else
/// `self`'s element type.
static LogicalResult inferLike(Value selfValue, std::optional<Type> given,
                               EmitErrorFn emitError,
                               SmallVectorImpl<Type> &types) {
  auto self = tensorType(selfValue);
  Type dtype = self.getElementType();
  if (given) {
    if (failed(expectElementType(*given, emitError)))
      return failure();
    dtype = *given;
  }
  types.push_back(self.clone(dtype));
  return success();
}

LogicalResult OnesLikeOp::inferResultTypes(Adaptor adaptor,
                                           EmitErrorFn emitError,
                                           SmallVectorImpl<Type> &types) {
  return inferLike(adaptor.getSelf(), adaptor.getDtype(), emitError, types);
}

LogicalResult FullLikeOp::inferResultTypes(Adaptor adaptor,
                                           EmitErrorFn emitError,
                                           SmallVectorImpl<Type> &types) {
  return inferLike(adaptor.getSelf(), adaptor.getDtype(), emitError, types);
}

LogicalResult ToCopyOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                         SmallVectorImpl<Type> &types) {
  if (failed(expectElementType(adaptor.getDtype(), emitError)))
    return failure();
  auto self = cast<RankedTensorType>(adaptor.getSelf().getType());
  types.push_back(RankedTensorType::get(self.getShape(), adaptor.getDtype()));
  return success();
}

LogicalResult FullOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                       SmallVectorImpl<Type> &types) {
  for (int64_t d : adaptor.getSize())
    if (d < 0)
      return emitError() << "size must be non-negative, got " << d;
  if (failed(expectElementType(adaptor.getDtype(), emitError)))
    return failure();
  types.push_back(RankedTensorType::get(adaptor.getSize(), adaptor.getDtype()));
  return success();
}

LogicalResult ArangeOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                         SmallVectorImpl<Type> &types) {
  double end = getScalarValue(adaptor.getEnd());
  // For i64, ATen computes the length in int64: the end is truncated first.
  if (adaptor.getDtype().isInteger(64))
    end = std::trunc(end);
  if (!(end >= 0.0))
    return emitError() << "end must be non-negative, got " << end;
  if (failed(expectElementType(adaptor.getDtype(), emitError)))
    return failure();
  types.push_back(RankedTensorType::get({static_cast<int64_t>(std::ceil(end))},
                                        adaptor.getDtype()));
  return success();
}

LogicalResult
ArangeStartStepOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                    SmallVectorImpl<Type> &types) {
  double start = getScalarValue(adaptor.getStart());
  double end = getScalarValue(adaptor.getEnd());
  double step = getScalarValue(adaptor.getStep());
  if (step == 0.0)
    return emitError() << "step must be nonzero";
  if ((step > 0 && start > end) || (step < 0 && start < end))
    return emitError() << "upper bound and lower bound inconsistent with "
                          "step sign";
  if (failed(expectElementType(adaptor.getDtype(), emitError)))
    return failure();
  // ATen's arange_out: ceil((end - start) / step) in double.
  types.push_back(RankedTensorType::get(
      {static_cast<int64_t>(std::ceil((end - start) / step))},
      adaptor.getDtype()));
  return success();
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

/// `[.., n, k] x [.., k, m]` with `batch` leading dims that must match.
static FailureOr<RankedTensorType> inferMatmul(RankedTensorType a,
                                               RankedTensorType b,
                                               int64_t batch,
                                               EmitErrorFn emitError) {
  if (failed(expectRank(a, batch + 2, "self", emitError)) ||
      failed(expectRank(b, batch + 2, "mat2", emitError)) ||
      failed(expectSameElementType(a, b, "operand", emitError)))
    return failure();
  for (int64_t i = 0; i < batch; ++i)
    if (a.getDimSize(i) != b.getDimSize(i))
      return emitError() << "batch sizes differ: " << a.getDimSize(i) << " vs "
                         << b.getDimSize(i);
  if (a.getDimSize(batch + 1) != b.getDimSize(batch))
    return emitError() << "contracting dims differ: " << a << " x " << b;
  SmallVector<int64_t> shape(a.getShape().drop_back());
  shape.push_back(b.getDimSize(batch + 1));
  return a.clone(shape);
}

LogicalResult MmOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                     SmallVectorImpl<Type> &types) {
  auto out = inferMatmul(tensorType(adaptor.getSelf()),
                         tensorType(adaptor.getMat2()), 0, emitError);
  if (failed(out))
    return failure();
  types.push_back(*out);
  return success();
}

LogicalResult BmmOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                      SmallVectorImpl<Type> &types) {
  auto out = inferMatmul(tensorType(adaptor.getSelf()),
                         tensorType(adaptor.getMat2()), 1, emitError);
  if (failed(out))
    return failure();
  types.push_back(*out);
  return success();
}

/// `beta * self + alpha * matmul`: `self` broadcasts to the product.
static LogicalResult inferAddMatmul(Value self, Value a, Value b, int64_t batch,
                                    EmitErrorFn emitError,
                                    SmallVectorImpl<Type> &types) {
  auto out = inferMatmul(tensorType(a), tensorType(b), batch, emitError);
  if (failed(out) ||
      failed(expectSameElementType(tensorType(self), *out, "self and product",
                                   emitError)) ||
      failed(expectBroadcastsTo(tensorType(self), out->getShape(), "self",
                                emitError)))
    return failure();
  types.push_back(*out);
  return success();
}

LogicalResult AddmmOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                        SmallVectorImpl<Type> &types) {
  return inferAddMatmul(adaptor.getSelf(), adaptor.getMat1(), adaptor.getMat2(),
                        0, emitError, types);
}

LogicalResult BaddbmmOp::inferResultTypes(Adaptor adaptor,
                                          EmitErrorFn emitError,
                                          SmallVectorImpl<Type> &types) {
  return inferAddMatmul(adaptor.getSelf(), adaptor.getBatch1(),
                        adaptor.getBatch2(), 1, emitError, types);
}

//===----------------------------------------------------------------------===//
// Shape and layout
//===----------------------------------------------------------------------===//

LogicalResult TOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                    SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  if (self.getRank() > 2)
    return emitError() << "t expects a tensor with <= 2 dims, got " << self;
  SmallVector<int64_t> shape(llvm::reverse(self.getShape()));
  types.push_back(self.clone(shape));
  return success();
}

LogicalResult TransposeIntOp::inferResultTypes(Adaptor adaptor,
                                               EmitErrorFn emitError,
                                               SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto d0 = wrapDim(adaptor.getDim0(), self.getRank(), emitError, "dim0");
  if (failed(d0))
    return failure();
  auto d1 = wrapDim(adaptor.getDim1(), self.getRank(), emitError, "dim1");
  if (failed(d1))
    return failure();
  SmallVector<int64_t> shape(self.getShape());
  if (!shape.empty())
    std::swap(shape[*d0], shape[*d1]);
  types.push_back(self.clone(shape));
  return success();
}

LogicalResult PermuteOp::inferResultTypes(Adaptor adaptor,
                                          EmitErrorFn emitError,
                                          SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (static_cast<int64_t>(dims.size()) != self.getRank())
    return emitError() << "permute needs " << self.getRank() << " dims, got "
                       << dims.size();
  SmallVector<bool> seen(self.getRank(), false);
  SmallVector<int64_t> shape;
  for (int64_t d : dims) {
    auto w = wrapDim(d, self.getRank(), emitError);
    if (failed(w))
      return failure();
    if (seen[*w])
      return emitError() << "dim " << d << " repeats in permute";
    seen[*w] = true;
    shape.push_back(self.getDimSize(*w));
  }
  types.push_back(self.clone(shape));
  return success();
}

LogicalResult UnsqueezeOp::inferResultTypes(Adaptor adaptor,
                                            EmitErrorFn emitError,
                                            SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  // unsqueeze wraps against rank + 1.
  auto d = wrapDim(adaptor.getDim(), self.getRank() + 1, emitError);
  if (failed(d))
    return failure();
  SmallVector<int64_t> shape(self.getShape());
  shape.insert(shape.begin() + *d, 1);
  types.push_back(self.clone(shape));
  return success();
}

LogicalResult SqueezeDimsOp::inferResultTypes(Adaptor adaptor,
                                              EmitErrorFn emitError,
                                              SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  SmallVector<bool> listed(std::max<int64_t>(self.getRank(), 1), false);
  for (int64_t d : adaptor.getDim()) {
    auto w = wrapDim(d, self.getRank(), emitError);
    if (failed(w))
      return failure();
    // ATen leaves other dims in place; the dialect takes only size-1 dims,
    // so that a result's shape never depends on how its dims are sharded.
    if (self.getDimSize(*w) != 1)
      return emitError() << "dim " << d << " has size " << self.getDimSize(*w)
                         << ", not 1";
    listed[*w] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < self.getRank(); ++d)
    if (!listed[d])
      shape.push_back(self.getDimSize(d));
  types.push_back(self.clone(shape));
  return success();
}

LogicalResult spmd::aten::detail::inferSelect(Type selfType, int64_t dim,
                                              int64_t index,
                                              EmitErrorFn emitError,
                                              SmallVectorImpl<Type> &types) {
  auto self = tensorType(selfType);
  if (self.getRank() == 0)
    return emitError() << "select of a 0-D tensor";
  auto d = wrapDim(dim, self.getRank(), emitError);
  if (failed(d))
    return failure();
  int64_t size = self.getDimSize(*d);
  if (index < -size || index >= size)
    return emitError() << "index " << index << " out of range for dim " << dim
                       << " of size " << size;
  SmallVector<int64_t> shape(self.getShape());
  shape.erase(shape.begin() + *d);
  types.push_back(self.clone(shape));
  return success();
}

/// The type of `self[..., start:end:step]` along `dim`: checks normalized
/// bounds `0 <= start <= end <= size` and `step >= 1`.
static FailureOr<RankedTensorType> sliceType(RankedTensorType self, int64_t dim,
                                             int64_t start, int64_t end,
                                             int64_t step,
                                             EmitErrorFn emitError) {
  if (self.getRank() == 0) {
    emitError() << "slice of a 0-D tensor";
    return failure();
  }
  auto d = wrapDim(dim, self.getRank(), emitError);
  if (failed(d))
    return failure();
  int64_t size = self.getDimSize(*d);
  if (step < 1) {
    emitError() << "slice step must be positive, got " << step;
    return failure();
  }
  if (start < 0 || start > end || end > size) {
    emitError() << "slice bounds [" << start << ", " << end
                << ") are not normalized for dim " << dim << " of size " << size
                << " (expected 0 <= start <= end <= size)";
    return failure();
  }
  SmallVector<int64_t> shape(self.getShape());
  shape[*d] = (end - start + step - 1) / step;
  return self.clone(shape);
}

LogicalResult SliceTensorOp::inferResultTypes(Adaptor adaptor,
                                              EmitErrorFn emitError,
                                              SmallVectorImpl<Type> &types) {
  auto slice = sliceType(tensorType(adaptor.getSelf()), adaptor.getDim(),
                         adaptor.getStart(), adaptor.getEnd(),
                         adaptor.getStep(), emitError);
  if (failed(slice))
    return failure();
  types.push_back(*slice);
  return success();
}

LogicalResult SliceScatterOp::inferResultTypes(Adaptor adaptor,
                                               EmitErrorFn emitError,
                                               SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto src = tensorType(adaptor.getSrc());
  auto slice = sliceType(self, adaptor.getDim(), adaptor.getStart(),
                         adaptor.getEnd(), adaptor.getStep(), emitError);
  if (failed(slice))
    return failure();
  if (src.getShape() != slice->getShape())
    return emitError() << "src " << src << " is not shaped like the slice "
                       << *slice;
  types.push_back(self);
  return success();
}

LogicalResult ConstantPadNdOp::inferResultTypes(Adaptor adaptor,
                                                EmitErrorFn emitError,
                                                SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  ArrayRef<int64_t> pad = adaptor.getPad();
  int64_t rank = self.getRank();
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size()) > 2 * rank)
    return emitError() << "pad needs an even number of amounts, at most 2 per "
                          "dim of "
                       << self << ", got " << pad.size();
  SmallVector<int64_t> shape(self.getShape());
  for (size_t k = 0; 2 * k < pad.size(); ++k) {
    int64_t &size = shape[rank - 1 - k];
    size += pad[2 * k] + pad[2 * k + 1];
    if (size < 0)
      return emitError() << "padding dim " << rank - 1 - k << " of " << self
                         << " by (" << pad[2 * k] << ", " << pad[2 * k + 1]
                         << ") leaves a negative size";
  }
  types.push_back(self.clone(shape));
  return success();
}

LogicalResult CumsumOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                         SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  if (failed(wrapDim(adaptor.getDim(), self.getRank(), emitError)))
    return failure();
  Type elem = self.getElementType();
  if (std::optional<Type> dtype = adaptor.getDtype()) {
    if (failed(expectElementType(*dtype, emitError)))
      return failure();
    elem = *dtype;
  } else if (getCategory(elem) != Category::Float) {
    elem = IntegerType::get(self.getContext(), 64); // ATen: integers sum to i64
  }
  types.push_back(self.clone(elem));
  return success();
}

LogicalResult GatherOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                         SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto index = tensorType(adaptor.getIndex());
  auto dim = wrapDim(adaptor.getDim(), self.getRank(), emitError);
  if (failed(dim))
    return failure();
  if (index.getRank() != self.getRank())
    return emitError() << "index " << index << " and self " << self
                       << " differ in rank";
  for (int64_t d = 0; d < self.getRank(); ++d)
    if (d != *dim && index.getDimSize(d) > self.getDimSize(d))
      return emitError() << "index " << index << " is larger than self " << self
                         << " along dim " << d;
  types.push_back(index.clone(self.getElementType()));
  return success();
}

/// scatter.src and scatter_add: `self`'s type; `index` of `self`'s rank, no
/// larger than `src` anywhere nor than `self` outside `dim`; `src` of
/// `self`'s element type (torch.Tensor.scatter's checks).
static LogicalResult inferScatter(Value selfValue, int64_t dimValue,
                                  Value indexValue, Value srcValue,
                                  EmitErrorFn emitError,
                                  SmallVectorImpl<Type> &types) {
  auto self = tensorType(selfValue);
  auto index = tensorType(indexValue);
  auto src = tensorType(srcValue);
  auto dim = wrapDim(dimValue, self.getRank(), emitError);
  if (failed(dim))
    return failure();
  if (src.getElementType() != self.getElementType())
    return emitError() << "src " << src << " and self " << self
                       << " differ in element type";
  if (index.getRank() != self.getRank() || src.getRank() != self.getRank())
    return emitError() << "index " << index << ", src " << src << " and self "
                       << self << " differ in rank";
  for (int64_t d = 0; d < self.getRank(); ++d)
    if (index.getDimSize(d) > src.getDimSize(d) ||
        (d != *dim && index.getDimSize(d) > self.getDimSize(d)))
      return emitError() << "index " << index << " is larger than src " << src
                         << " or self " << self << " along dim " << d;
  types.push_back(self);
  return success();
}

LogicalResult ScatterSrcOp::inferResultTypes(Adaptor adaptor,
                                             EmitErrorFn emitError,
                                             SmallVectorImpl<Type> &types) {
  return inferScatter(adaptor.getSelf(), adaptor.getDim(), adaptor.getIndex(),
                      adaptor.getSrc(), emitError, types);
}

LogicalResult ScatterAddOp::inferResultTypes(Adaptor adaptor,
                                             EmitErrorFn emitError,
                                             SmallVectorImpl<Type> &types) {
  return inferScatter(adaptor.getSelf(), adaptor.getDim(), adaptor.getIndex(),
                      adaptor.getSrc(), emitError, types);
}

LogicalResult SortStableOp::inferResultTypes(Adaptor adaptor,
                                             EmitErrorFn emitError,
                                             SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  if (failed(wrapDim(adaptor.getDim(), self.getRank(), emitError)))
    return failure();
  types.push_back(self);
  types.push_back(self.clone(IntegerType::get(self.getContext(), 64)));
  return success();
}

LogicalResult TopkOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                       SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto dim = wrapDim(adaptor.getDim(), self.getRank(), emitError);
  if (failed(dim))
    return failure();
  int64_t k = adaptor.getK();
  if (k < 0 || k > self.getDimSize(*dim))
    return emitError() << "k " << k << " is not in [0, "
                       << self.getDimSize(*dim) << "], the size of dim " << *dim
                       << " of " << self;
  SmallVector<int64_t> shape(self.getShape());
  shape[*dim] = k;
  types.push_back(self.clone(shape));
  types.push_back(self.clone(shape, IntegerType::get(self.getContext(), 64)));
  return success();
}

LogicalResult IndexTensorOp::inferResultTypes(Adaptor adaptor,
                                              EmitErrorFn emitError,
                                              SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  ValueRange indices = adaptor.getIndices();
  if (indices.empty() || static_cast<int64_t>(indices.size()) > self.getRank())
    return emitError() << "index needs 1 to " << self.getRank()
                       << " indices for " << self << ", got " << indices.size();
  SmallVector<int64_t> shape;
  for (Value index : indices) {
    auto b = broadcastShapes(shape, tensorType(index).getShape(), emitError);
    if (failed(b))
      return failure();
    shape = *b;
  }
  llvm::append_range(shape, self.getShape().drop_front(indices.size()));
  types.push_back(self.clone(shape));
  return success();
}

LogicalResult WhereSelfOp::inferResultTypes(Adaptor adaptor,
                                            EmitErrorFn emitError,
                                            SmallVectorImpl<Type> &types) {
  // The condition broadcasts but takes no part in type promotion.
  SmallVector<Type> values = {adaptor.getSelf().getType(),
                              adaptor.getOther().getType()};
  if (failed(
          inferBroadcast(adaptor.getOperands().getTypes(), emitError, types)))
    return failure();
  types.back() =
      cast<RankedTensorType>(types.back()).clone(resultElementType(values));
  return success();
}

LogicalResult ExpandOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                         SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  ArrayRef<int64_t> size = adaptor.getSize();
  if (static_cast<int64_t>(size.size()) < self.getRank())
    return emitError() << "expand to " << size.size()
                       << " dims is fewer than the input's " << self.getRank();
  int64_t lead = size.size() - self.getRank();
  SmallVector<int64_t> shape;
  for (auto [i, s] : llvm::enumerate(size)) {
    int64_t in =
        static_cast<int64_t>(i) < lead ? -2 : self.getDimSize(i - lead);
    if (s == -1) {
      if (in == -2)
        return emitError() << "-1 is not allowed in a new leading dim " << i;
      shape.push_back(in);
    } else if (s < 0) {
      return emitError() << "invalid size " << s << " in dim " << i;
    } else if (in != -2 && in != 1 && in != s) {
      return emitError() << "cannot expand dim " << i << " of size " << in
                         << " to " << s;
    } else {
      shape.push_back(s);
    }
  }
  types.push_back(self.clone(shape));
  return success();
}

LogicalResult CatOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                      SmallVectorImpl<Type> &types) {
  ValueRange tensors = adaptor.getTensors();
  if (tensors.empty())
    return emitError() << "cat needs at least one tensor";
  auto first = tensorType(tensors.front());
  auto dim = wrapDim(adaptor.getDim(), first.getRank(), emitError);
  if (failed(dim))
    return failure();
  if (first.getRank() == 0)
    return emitError() << "zero-dimensional tensors cannot be concatenated";
  SmallVector<int64_t> shape(first.getShape());
  shape[*dim] = 0;
  for (auto [i, v] : llvm::enumerate(tensors)) {
    auto t = tensorType(v);
    if (t.getRank() != first.getRank())
      return emitError() << "tensor #" << i << " " << t
                         << " has a different rank than tensor #0 " << first;
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (d != *dim && t.getDimSize(d) != first.getDimSize(d))
        return emitError() << "tensor #" << i << " " << t
                           << " differs from tensor #0 " << first
                           << " outside dim " << *dim;
    shape[*dim] += t.getDimSize(*dim);
  }
  types.push_back(
      RankedTensorType::get(shape, resultElementType(tensors.getTypes())));
  return success();
}

LogicalResult SplitTensorOp::inferResultTypes(Adaptor adaptor,
                                              EmitErrorFn emitError,
                                              SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto dim = wrapDim(adaptor.getDim(), self.getRank(), emitError);
  if (failed(dim))
    return failure();
  if (self.getRank() == 0)
    return emitError() << "split expects at least a 1-dimensional tensor";
  int64_t split = adaptor.getSplitSize();
  int64_t length = self.getDimSize(*dim);
  if (split < 0 || (split == 0 && length != 0))
    return emitError() << "split_size must be positive, got " << split;
  int64_t pieces =
      split == 0 ? 1 : std::max<int64_t>(1, llvm::divideCeil(length, split));
  for (int64_t i = 0; i < pieces; ++i) {
    SmallVector<int64_t> shape(self.getShape());
    shape[*dim] = std::min(split, length - i * split);
    types.push_back(self.clone(shape));
  }
  return success();
}

LogicalResult SplitWithSizesOp::inferResultTypes(Adaptor adaptor,
                                                 EmitErrorFn emitError,
                                                 SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  if (self.getRank() == 0)
    return emitError() << "split_with_sizes expects at least a 1-dimensional "
                          "tensor";
  auto dim = wrapDim(adaptor.getDim(), self.getRank(), emitError);
  if (failed(dim))
    return failure();
  int64_t total = 0;
  for (int64_t size : adaptor.getSplitSizes()) {
    if (size < 0)
      return emitError() << "split_sizes must be non-negative, got " << size;
    total += size;
    SmallVector<int64_t> shape(self.getShape());
    shape[*dim] = size;
    types.push_back(self.clone(shape));
  }
  if (total != self.getDimSize(*dim))
    return emitError() << "split_sizes add up to " << total << " but dim "
                       << *dim << " has " << self.getDimSize(*dim)
                       << " elements";
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

LogicalResult spmd::aten::detail::inferReduction(
    Type selfType, std::optional<ArrayRef<int64_t>> dims, bool keepdim,
    std::optional<Type> dtype, bool promotes, EmitErrorFn emitError,
    SmallVectorImpl<Type> &types) {
  auto self = tensorType(selfType);
  Type elem = self.getElementType();
  if (dtype) {
    if (failed(expectElementType(*dtype, emitError)))
      return failure();
    elem = *dtype;
  } else if (promotes && getCategory(elem) != Category::Float) {
    elem = IntegerType::get(self.getContext(), 64);
  }
  SmallVector<bool> reduced(std::max<int64_t>(self.getRank(), 1), false);
  // No list or an empty one reduces every dim (ATen's sum.dim_IntList
  // with []).
  if (!dims || dims->empty())
    reduced.assign(reduced.size(), true);
  for (int64_t d : dims.value_or(ArrayRef<int64_t>())) {
    auto w = wrapDim(d, self.getRank(), emitError);
    if (failed(w))
      return failure();
    if (reduced[*w])
      return emitError() << "dim " << d << " appears multiple times";
    reduced[*w] = true;
  }
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < self.getRank(); ++d) {
    if (!reduced[d])
      shape.push_back(self.getDimSize(d));
    else if (keepdim)
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, elem));
  return success();
}

//===----------------------------------------------------------------------===//
// Normalization and losses
//===----------------------------------------------------------------------===//

/// Checks `normalized_shape` against the trailing dims of `input`; returns
/// the index of the first normalized dim.
static FailureOr<int64_t> normalizedAxis(RankedTensorType input,
                                         ArrayRef<int64_t> normalized,
                                         EmitErrorFn emitError) {
  int64_t n = normalized.size();
  if (n == 0 || n > input.getRank() ||
      input.getShape().take_back(n) != normalized) {
    InFlightDiagnostic diag = emitError() << "normalized_shape [";
    llvm::interleaveComma(normalized, diag);
    diag << "] does not match the trailing dims of input " << input;
    return failure();
  }
  return input.getRank() - n;
}

/// Checks an optional affine parameter (weight or bias) of layer norm
/// against the normalized shape and the input's element type.
static LogicalResult expectAffine(Value v, RankedTensorType input,
                                  ArrayRef<int64_t> normalized, StringRef what,
                                  EmitErrorFn emitError) {
  if (!v)
    return success();
  if (failed(expectSameElementType(
          input, tensorType(v), (Twine("input and ") + what).str(), emitError)))
    return failure();
  if (tensorType(v).getShape() == normalized)
    return success();
  InFlightDiagnostic diag = emitError() << what << " " << tensorType(v)
                                        << " must have normalized_shape [";
  llvm::interleaveComma(normalized, diag);
  return diag << "]";
}

/// Shape of layer norm's mean/rstd: input with normalized dims set to 1.
static RankedTensorType statsType(RankedTensorType input, int64_t axis) {
  SmallVector<int64_t> shape(input.getShape());
  for (int64_t d = axis; d < input.getRank(); ++d)
    shape[d] = 1;
  return input.clone(shape);
}

LogicalResult
NativeLayerNormOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                    SmallVectorImpl<Type> &types) {
  auto input = tensorType(adaptor.getInput());
  auto axis = normalizedAxis(input, adaptor.getNormalizedShape(), emitError);
  if (failed(axis) ||
      failed(expectAffine(adaptor.getWeight(), input,
                          adaptor.getNormalizedShape(), "weight", emitError)) ||
      failed(expectAffine(adaptor.getBias(), input,
                          adaptor.getNormalizedShape(), "bias", emitError)))
    return failure();
  types.push_back(input);
  types.push_back(statsType(input, *axis));
  types.push_back(statsType(input, *axis));
  return success();
}

LogicalResult NativeLayerNormBackwardOp::inferResultTypes(
    Adaptor adaptor, EmitErrorFn emitError, SmallVectorImpl<Type> &types) {
  auto input = tensorType(adaptor.getInput());
  auto grad = tensorType(adaptor.getGradOut());
  ArrayRef<int64_t> normalized = adaptor.getNormalizedShape();
  if (grad != input)
    return emitError() << "grad_out " << grad << " does not match input "
                       << input;
  auto axis = normalizedAxis(input, normalized, emitError);
  if (failed(axis))
    return failure();
  RankedTensorType stats = statsType(input, *axis);
  for (auto [name, v] : {std::pair<StringRef, Value>{"mean", adaptor.getMean()},
                         {"rstd", adaptor.getRstd()}})
    if (tensorType(v).getShape() != stats.getShape())
      return emitError() << name << " " << tensorType(v) << " must be "
                         << stats;
  if (failed(expectAffine(adaptor.getWeight(), input, normalized, "weight",
                          emitError)) ||
      failed(expectAffine(adaptor.getBias(), input, normalized, "bias",
                          emitError)))
    return failure();
  if (adaptor.getOutputMask().size() != 3)
    return emitError() << "output_mask must have 3 entries, got "
                       << adaptor.getOutputMask().size();
  types.push_back(input);
  types.push_back(input.clone(normalized));
  types.push_back(input.clone(normalized));
  return success();
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

double spmd::aten::detail::attentionScale(std::optional<APFloat> scale,
                                          Type query) {
  if (scale)
    return scale->convertToDouble();
  return 1.0 / std::sqrt(static_cast<double>(
                   llvm::cast<RankedTensorType>(query).getShape().back()));
}

/// The element type of attention's logsumexp: ATen's accumulation type
/// (at::opmath_type), f32 for f16 and bf16, else query's.
static Type statsElementType(RankedTensorType query) {
  Type elem = query.getElementType();
  if (elem.isF16() || elem.isBF16())
    return Float32Type::get(elem.getContext());
  return elem;
}

/// Checks query [B, H, L, E], key [B, H, S, E], value [B, H, S, E] (the CPU
/// kernel's checks: 4-D, one dtype, one head size), `dropout_p` == 0 and an
/// `attn_mask` of query's dtype, 2-D or 4-D, that broadcasts to
/// [B, H, L, S] (ATen's sdp_utils and the flash CPU kernel's checks).
/// Returns the types of output [B, H, L, E] and logsumexp [B, H, L].
static FailureOr<std::pair<RankedTensorType, RankedTensorType>>
checkAttention(Value queryValue, Value keyValue, Value valueValue, Value mask,
               APFloat dropout, EmitErrorFn emitError) {
  auto query = tensorType(queryValue), key = tensorType(keyValue),
       value = tensorType(valueValue);
  if (failed(expectRank(query, 4, "query", emitError)) ||
      failed(expectRank(key, 4, "key", emitError)) ||
      failed(expectRank(value, 4, "value", emitError)) ||
      failed(expectSameElementType(query, key, "query and key", emitError)) ||
      failed(expectSameElementType(query, value, "query and value", emitError)))
    return failure();
  ArrayRef<int64_t> q = query.getShape(), k = key.getShape(),
                    v = value.getShape();
  if (k[0] != q[0] || k[1] != q[1] || v[0] != q[0] || v[1] != q[1])
    return emitError() << "query " << query << ", key " << key << " and value "
                       << value << " must have one batch size and one number "
                       << "of heads";
  if (v[2] != k[2])
    return emitError() << "key " << key << " and value " << value
                       << " must have one sequence length";
  if (k[3] != q[3] || v[3] != q[3])
    return emitError() << "query " << query << ", key " << key << " and value "
                       << value << " must have one head size (ATen's CPU "
                       << "attention kernel)";
  if (!dropout.isZero())
    return emitError() << "dropout_p must be 0, got "
                       << dropout.convertToDouble()
                       << ": ATen's CPU attention kernel has no dropout";
  if (mask) {
    auto maskType = tensorType(mask);
    if (failed(expectSameElementType(query, maskType, "query and attn_mask",
                                     emitError)))
      return failure();
    if (maskType.getRank() != 2 && maskType.getRank() != 4)
      return emitError() << "attn_mask must be 2-D or 4-D, got " << maskType;
    if (failed(expectBroadcastsTo(maskType, {q[0], q[1], q[2], k[2]},
                                  "attn_mask", emitError)))
      return failure();
  }
  return std::make_pair(
      query, RankedTensorType::get(q.drop_back(), statsElementType(query)));
}

LogicalResult ScaledDotProductFlashAttentionForCpuOp::inferResultTypes(
    Adaptor adaptor, EmitErrorFn emitError, SmallVectorImpl<Type> &types) {
  auto results =
      checkAttention(adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(),
                     adaptor.getAttnMask(), adaptor.getDropoutP(), emitError);
  if (failed(results))
    return failure();
  types.push_back(results->first);
  types.push_back(results->second);
  return success();
}

LogicalResult ScaledDotProductFlashAttentionForCpuBackwardOp::inferResultTypes(
    Adaptor adaptor, EmitErrorFn emitError, SmallVectorImpl<Type> &types) {
  auto forward =
      checkAttention(adaptor.getQuery(), adaptor.getKey(), adaptor.getValue(),
                     adaptor.getAttnMask(), adaptor.getDropoutP(), emitError);
  if (failed(forward))
    return failure();
  for (auto [name, v, expected] :
       {std::tuple<StringRef, Value, RankedTensorType>{
            "grad_out", adaptor.getGradOut(), forward->first},
        {"out", adaptor.getOut(), forward->first},
        {"logsumexp", adaptor.getLogsumexp(), forward->second}})
    if (tensorType(v) != expected)
      return emitError() << name << " " << tensorType(v) << " must be "
                         << expected;
  for (Value v : {adaptor.getQuery(), adaptor.getKey(), adaptor.getValue()})
    types.push_back(v.getType());
  return success();
}

LogicalResult EmbeddingOp::inferResultTypes(Adaptor adaptor,
                                            EmitErrorFn emitError,
                                            SmallVectorImpl<Type> &types) {
  auto weight = tensorType(adaptor.getWeight());
  auto indices = tensorType(adaptor.getIndices());
  if (failed(expectRank(weight, 2, "weight", emitError)))
    return failure();
  SmallVector<int64_t> shape(indices.getShape());
  shape.push_back(weight.getDimSize(1));
  types.push_back(weight.clone(shape));
  return success();
}

LogicalResult EmbeddingDenseBackwardOp::inferResultTypes(
    Adaptor adaptor, EmitErrorFn emitError, SmallVectorImpl<Type> &types) {
  auto grad = tensorType(adaptor.getGradOutput());
  auto indices = tensorType(adaptor.getIndices());
  if (grad.getRank() != indices.getRank() + 1 ||
      grad.getShape().drop_back() != indices.getShape())
    return emitError() << "grad_output " << grad
                       << " must be indices.shape + [D] for indices "
                       << indices;
  // I64Attr getters return uint64_t.
  int64_t numWeights = adaptor.getNumWeights();
  if (numWeights < 0)
    return emitError() << "num_weights must be non-negative, got "
                       << numWeights;
  types.push_back(grad.clone({numWeights, grad.getShape().back()}));
  return success();
}

/// Checks nll_loss operands; returns the batch size (-1 for a 1-D input).
static FailureOr<int64_t> checkNllLoss(RankedTensorType self,
                                       RankedTensorType target, Value weight,
                                       int64_t reduction,
                                       EmitErrorFn emitError) {
  if (self.getRank() < 1 || self.getRank() > 2)
    return emitError() << "input must be 1-D or 2-D, got " << self;
  int64_t batch = self.getRank() == 2 ? self.getDimSize(0) : -1;
  bool targetOk = self.getRank() == 2
                      ? (target.getRank() == 1 && target.getDimSize(0) == batch)
                      : target.getRank() == 0;
  if (!targetOk)
    return emitError() << "target " << target << " does not match input "
                       << self;
  int64_t classes = self.getShape().back();
  if (weight && tensorType(weight).getShape() != ArrayRef<int64_t>{classes})
    return emitError() << "weight " << tensorType(weight) << " must be ["
                       << classes << "]";
  if (reduction < 0 || reduction > 2)
    return emitError() << "reduction must be 0 (none), 1 (mean) or 2 (sum), "
                          "got "
                       << reduction;
  return batch;
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

/// The window arguments of a convolution or pooling over `spatial` dims:
/// one entry each (an empty `stride` of max_pool2d is its kernel_size),
/// strides and dilations positive, paddings non-negative.
static LogicalResult expectWindow(int64_t spatial, ArrayRef<int64_t> stride,
                                  ArrayRef<int64_t> padding,
                                  ArrayRef<int64_t> dilation,
                                  EmitErrorFn emitError) {
  for (auto [name, list, least] :
       {std::tuple<StringRef, ArrayRef<int64_t>, int64_t>{"stride", stride, 1},
        {"padding", padding, 0},
        {"dilation", dilation, 1}}) {
    if (static_cast<int64_t>(list.size()) != spatial)
      return emitError() << name << " needs " << spatial
                         << " entries (one per spatial dim), got "
                         << list.size();
    if (llvm::any_of(list, [least = least](int64_t v) { return v < least; }))
      return emitError() << name << " entries must be at least " << least;
  }
  return success();
}

/// The shape of a convolution's result, after checking its operands
/// (`aten.convolution` and `aten.convolution_backward` share it).
static FailureOr<SmallVector<int64_t>> inferConvolution(
    RankedTensorType input, RankedTensorType weight, ArrayRef<int64_t> stride,
    ArrayRef<int64_t> padding, ArrayRef<int64_t> dilation, bool transposed,
    ArrayRef<int64_t> outputPadding, int64_t groups, EmitErrorFn emitError) {
  if (transposed || llvm::any_of(outputPadding, [](int64_t v) { return v; }))
    return emitError() << "transposed convolution is not supported: write it "
                          "as the convolution it is the adjoint of "
                          "(spmd-capture does)";
  int64_t rank = input.getRank(), spatial = rank - 2;
  if (spatial < 1 || spatial > 3)
    return emitError() << "input must be [N, C, spatial...] with 1 to 3 "
                          "spatial dims, got "
                       << input;
  if (failed(expectRank(weight, rank, "weight", emitError)) ||
      failed(expectSameElementType(input, weight, "input and weight",
                                   emitError)) ||
      failed(expectWindow(spatial, stride, padding, dilation, emitError)))
    return failure();
  int64_t channels = input.getDimSize(1), outChannels = weight.getDimSize(0);
  if (groups < 1 || channels % groups != 0 || outChannels % groups != 0 ||
      weight.getDimSize(1) * groups != channels)
    return emitError() << "weight " << weight << " does not fit " << channels
                       << " input channels in " << groups << " groups";
  SmallVector<int64_t> shape = {input.getDimSize(0), outChannels};
  for (int64_t d = 0; d < spatial; ++d) {
    int64_t size = spmd::rt::windowOutputSize(
        input.getDimSize(2 + d), weight.getDimSize(2 + d), stride[d],
        padding[d], dilation[d], false);
    if (size < 1)
      return emitError() << "the kernel " << weight << " does not fit input "
                         << input << " along spatial dim " << d;
    shape.push_back(size);
  }
  return shape;
}

LogicalResult ConvolutionOp::inferResultTypes(Adaptor adaptor,
                                              EmitErrorFn emitError,
                                              SmallVectorImpl<Type> &types) {
  auto input = tensorType(adaptor.getInput());
  auto shape = inferConvolution(
      input, tensorType(adaptor.getWeight()), adaptor.getStride(),
      adaptor.getPadding(), adaptor.getDilation(), adaptor.getTransposed(),
      adaptor.getOutputPadding(), adaptor.getGroups(), emitError);
  if (failed(shape))
    return failure();
  if (Value bias = adaptor.getBias()) {
    auto b = tensorType(bias);
    if (b.getShape() != ArrayRef<int64_t>((*shape)[1]) ||
        b.getElementType() != input.getElementType())
      return emitError() << "bias " << b << " is not one "
                         << input.getElementType() << " per output channel ("
                         << (*shape)[1] << ")";
  }
  types.push_back(input.clone(*shape));
  return success();
}

LogicalResult
ConvolutionBackwardOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                        SmallVectorImpl<Type> &types) {
  auto input = tensorType(adaptor.getInput());
  auto weight = tensorType(adaptor.getWeight());
  auto grad = tensorType(adaptor.getGradOutput());
  auto shape = inferConvolution(
      input, weight, adaptor.getStride(), adaptor.getPadding(),
      adaptor.getDilation(), adaptor.getTransposed(),
      adaptor.getOutputPadding(), adaptor.getGroups(), emitError);
  if (failed(shape))
    return failure();
  if (grad != input.clone(*shape))
    return emitError() << "grad_output " << grad
                       << " is not the convolution's result "
                       << input.clone(*shape);
  ArrayRef<bool> mask = adaptor.getOutputMask();
  if (mask.size() != 3 || mask[2])
    return emitError() << "the bias gradient is not computed here "
                          "(output_mask[2] must be false, of 3 entries): it "
                          "is the sum of grad_output over all dims but 1, "
                          "aten.sum.dim_IntList";
  types.append({input, weight});
  return success();
}

/// The pooled shape of `self` [*B, H, W] (`aten.max_pool2d_with_indices`,
/// `aten.avg_pool2d` and their backward ops).
static FailureOr<SmallVector<int64_t>>
inferPool2d(RankedTensorType self, ArrayRef<int64_t> kernelSize,
            ArrayRef<int64_t> stride, ArrayRef<int64_t> padding,
            ArrayRef<int64_t> dilation, bool ceilMode, EmitErrorFn emitError) {
  int64_t rank = self.getRank();
  if (rank != 3 && rank != 4)
    return emitError() << "self must be [C, H, W] or [N, C, H, W], got "
                       << self;
  if (stride.empty())
    stride = kernelSize;
  if (failed(expectWindow(2, kernelSize, padding, dilation, emitError)) ||
      failed(expectWindow(2, stride, padding, dilation, emitError)))
    return failure();
  SmallVector<int64_t> shape(self.getShape().drop_back(2));
  for (int64_t d = 0; d < 2; ++d) {
    if (2 * padding[d] > kernelSize[d])
      return emitError() << "padding " << padding[d]
                         << " is more than half of kernel_size "
                         << kernelSize[d];
    int64_t size = spmd::rt::windowOutputSize(
        self.getDimSize(rank - 2 + d), kernelSize[d], stride[d], padding[d],
        dilation[d], ceilMode);
    if (size < 1)
      return emitError() << "the window does not fit " << self << " along dim "
                         << rank - 2 + d;
    shape.push_back(size);
  }
  return shape;
}

LogicalResult
MaxPool2dWithIndicesOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                         SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto shape = inferPool2d(self, adaptor.getKernelSize(), adaptor.getStride(),
                           adaptor.getPadding(), adaptor.getDilation(),
                           adaptor.getCeilMode(), emitError);
  if (failed(shape))
    return failure();
  types.append({self.clone(*shape),
                self.clone(*shape, IntegerType::get(self.getContext(), 64))});
  return success();
}

LogicalResult MaxPool2dWithIndicesBackwardOp::inferResultTypes(
    Adaptor adaptor, EmitErrorFn emitError, SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto shape = inferPool2d(self, adaptor.getKernelSize(), adaptor.getStride(),
                           adaptor.getPadding(), adaptor.getDilation(),
                           adaptor.getCeilMode(), emitError);
  if (failed(shape))
    return failure();
  auto grad = tensorType(adaptor.getGradOutput());
  auto indices = tensorType(adaptor.getIndices());
  if (grad != self.clone(*shape) || indices.getShape() != ArrayRef(*shape))
    return emitError() << "grad_output " << grad << " and indices " << indices
                       << " are not the pooled shape of " << self;
  types.push_back(self);
  return success();
}

/// Checks that `grad` is the pooled `shape` of `self`'s element type.
static LogicalResult expectPooledGrad(RankedTensorType grad,
                                      RankedTensorType self,
                                      ArrayRef<int64_t> shape,
                                      EmitErrorFn emitError) {
  if (grad != self.clone(shape))
    return emitError() << "grad_output " << grad
                       << " is not the pooled shape of " << self;
  return success();
}

static constexpr int64_t kNoDilation[] = {1, 1};

LogicalResult AvgPool2dOp::inferResultTypes(Adaptor adaptor,
                                            EmitErrorFn emitError,
                                            SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto shape = inferPool2d(self, adaptor.getKernelSize(), adaptor.getStride(),
                           adaptor.getPadding(), kNoDilation,
                           adaptor.getCeilMode(), emitError);
  if (failed(shape))
    return failure();
  if (adaptor.getDivisorOverrideAttr().getInt() < 0)
    return emitError() << "divisor_override must be positive (0: none)";
  types.push_back(self.clone(*shape));
  return success();
}

LogicalResult
AvgPool2dBackwardOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                      SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto shape = inferPool2d(self, adaptor.getKernelSize(), adaptor.getStride(),
                           adaptor.getPadding(), kNoDilation,
                           adaptor.getCeilMode(), emitError);
  if (failed(shape) ||
      failed(expectPooledGrad(tensorType(adaptor.getGradOutput()), self, *shape,
                              emitError)))
    return failure();
  types.push_back(self);
  return success();
}

LogicalResult
AdaptiveAvgPool2dOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                      SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  ArrayRef<int64_t> size = adaptor.getOutputSize();
  if (self.getRank() != 3 && self.getRank() != 4)
    return emitError() << "self must be [C, H, W] or [N, C, H, W], got "
                       << self;
  if (size.size() != 2 || llvm::any_of(size, [](int64_t v) { return v < 1; }))
    return emitError() << "output_size needs 2 positive entries";
  SmallVector<int64_t> shape(self.getShape().drop_back(2));
  llvm::append_range(shape, size);
  types.push_back(self.clone(shape));
  return success();
}

LogicalResult AdaptiveAvgPool2dBackwardOp::inferResultTypes(
    Adaptor adaptor, EmitErrorFn emitError, SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto grad = tensorType(adaptor.getGradOutput());
  if (grad.getRank() != self.getRank() || self.getRank() < 3 ||
      grad.getElementType() != self.getElementType() ||
      grad.getShape().drop_back(2) != self.getShape().drop_back(2))
    return emitError() << "grad_output " << grad << " is not a pooled shape of "
                       << self;
  types.push_back(self);
  return success();
}

LogicalResult NllLossForwardOp::inferResultTypes(Adaptor adaptor,
                                                 EmitErrorFn emitError,
                                                 SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto batch =
      checkNllLoss(self, tensorType(adaptor.getTarget()), adaptor.getWeight(),
                   adaptor.getReduction(), emitError);
  if (failed(batch))
    return failure();
  if (adaptor.getReduction() == 0 && *batch >= 0)
    types.push_back(self.clone({*batch}));
  else
    types.push_back(self.clone(ArrayRef<int64_t>{}));
  types.push_back(self.clone(ArrayRef<int64_t>{}));
  return success();
}

LogicalResult
NllLossBackwardOp::inferResultTypes(Adaptor adaptor, EmitErrorFn emitError,
                                    SmallVectorImpl<Type> &types) {
  auto self = tensorType(adaptor.getSelf());
  auto batch =
      checkNllLoss(self, tensorType(adaptor.getTarget()), adaptor.getWeight(),
                   adaptor.getReduction(), emitError);
  if (failed(batch))
    return failure();
  auto grad = tensorType(adaptor.getGradOutput());
  bool gradOk = adaptor.getReduction() == 0 && *batch >= 0
                    ? grad.getShape() == ArrayRef<int64_t>{*batch}
                    : grad.getRank() == 0;
  if (!gradOk)
    return emitError() << "grad_output " << grad
                       << " does not match the loss of input " << self;
  if (tensorType(adaptor.getTotalWeight()).getRank() != 0)
    return emitError() << "total_weight must be 0-D, got "
                       << tensorType(adaptor.getTotalWeight());
  types.push_back(self);
  return success();
}
