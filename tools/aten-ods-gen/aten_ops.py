"""The aten dialect's ops: one entry per ATen overload.

aten_ods_gen.py reads each overload's schema from PyTorch
(`torch.ops.aten.<op>.<overload>._schema`) and writes its ODS definition
into include/spmd/Dialect/Aten/GeneratedAtenOps.td as an instance of the
family class named here (include/spmd/Dialect/Aten/AtenOps.td). An entry
says only what the schema cannot:

  family     the ODS family class and its template arguments after the
             mnemonic, e.g. 'Aten_PointwiseOp<"{{0, 1}}">'.
  kernel     the runtime kernel (`spmd_rt_<kernel>`) when the op has one
             and its family does not name it; its arguments are then
             generated (`kernel_args`).
  infer      the family's result-type rule to use instead of its default
             (an `Aten_Infer*` defvar of AtenOps.td), or "" when the op
             defines inferResultTypes in AtenOps.cpp.
  rule       "" when the op defines getShardingRule in AtenSharding.cpp.
  tensor     the element constraint of every tensor ("Aten_Tensor" or
             "Aten_FloatTensor"); `types` overrides it per argument/result.
  required   optional schema arguments that the dialect requires.
  nodefault  schema defaults the dialect does not take.
  results    names of unnamed results.
  values     the values a `str` argument may take (in kernel order).
  kernel_args  the kernel's arguments after the results, when they are not
             the schema's tensors and numbers in schema order: a schema
             argument's name, `=<number>` (a constant), `#<name>` (the
             length of an int list), `^<name>` (a dim normalized against the
             result's rank), `@<method>` (an int list the op computes:
             count and array), `$<method>` (an integer the op computes),
             `%<method>` (a double the op computes), `?<name>` (whether the
             optional argument `name` is given: 1 or 0). An optional Scalar
             that is absent passes 0 (its `?<name>` says so).
  optional_results  results the kernel takes NULL for and then does not
             compute (ATen's `output_mask`); the lowering passes NULL for
             one that has no use.
  doc        the description.

Arguments that mean nothing in value semantics (layout, device,
pin_memory, memory_format, non_blocking, generator) are dropped.
"""


class Op:
    def __init__(self, name, family, kernel="", infer=None, rule=None,
                 tensor="Aten_Tensor", types=None, required=(), nodefault=(),
                 results=None, values=None, kernel_args=None, optional_results=(),
                 doc=""):
        self.name = name
        self.family = family
        self.kernel = kernel
        self.infer = infer
        self.rule = rule
        self.tensor = tensor
        self.types = types or {}
        self.required = set(required)
        self.nodefault = set(nodefault)
        self.results = results
        self.values = values or {}
        self.kernel_args = kernel_args
        self.optional_results = list(optional_results)
        self.doc = doc


FLOAT = "Aten_FloatTensor"
SAME_ELEMENTS = ["Aten_SameElementsView", "Aten_Rearrangement"]

OPS = [
    # Pointwise, broadcasting.
    Op("add.Tensor", 'Aten_PointwiseOp<"{{0, 1}}">', "add_tensor",
       doc="`self + alpha * other`, broadcasting."),
    Op("sub.Tensor", 'Aten_PointwiseOp<"{{0, 1}}">', "sub_tensor",
       doc="`self - alpha * other`, broadcasting."),
    Op("mul.Tensor", 'Aten_PointwiseOp<"{{0}, {1}}">', "mul_tensor"),
    Op("div.Tensor", 'Aten_PointwiseOp<"{{0}}">', "div_tensor",
       infer="Aten_InferTrueDivide",
       doc="True division: integer operands give the default float dtype "
           "(f32)."),
    Op("div.Tensor_mode", "Aten_PointwiseOp", "div_tensor_mode",
       tensor="Aten_NumericTensor", required=["rounding_mode"],
       values={"rounding_mode": ["trunc", "floor"]},
       doc="`self / other` rounded toward zero (`trunc`) or down (`floor`, "
           "Python's `//`), broadcasting, in the promoted dtype "
           "(`torch.div(..., rounding_mode=...)`). Integers divide exactly; "
           "an integer division by zero gives 0 (ATen raises)."),
    Op("fmod.Tensor", "Aten_PointwiseOp", "fmod_tensor",
       tensor="Aten_NumericTensor",
       doc="The remainder of `self / other` with the sign of `self` (C's "
           "`fmod`, `torch.fmod`), broadcasting, in the promoted dtype. An "
           "integer remainder by zero gives 0 (ATen raises)."),
    Op("remainder.Tensor", "Aten_PointwiseOp", "remainder_tensor",
       tensor="Aten_NumericTensor",
       doc="The remainder of `self / other` with the sign of `other` "
           "(Python's `%`, `torch.remainder`), broadcasting, in the promoted "
           "dtype. An integer remainder by zero gives 0 (ATen raises)."),
    Op("addcmul", 'Aten_PointwiseOp<"{{0, 1}, {0, 2}}">', "addcmul",
       doc="`self + value * tensor1 * tensor2`, broadcasting."),
    Op("addcdiv", 'Aten_PointwiseOp<"{{0, 1}}">', "addcdiv",
       doc="`self + value * tensor1 / tensor2`, broadcasting."),
    Op("threshold_backward", 'Aten_PointwiseOp<"{{0}}">', "threshold_backward",
       doc="`self <= threshold ? 0 : grad_output` (relu backward)."),
    Op("maximum", 'Aten_PointwiseOp<"{{0, 1}, {0}, {1}}", reduce = "Max">',
       "maximum",
       doc="The larger of `self` and `other`, broadcasting; NaN where either "
           "is NaN (`torch.maximum`). Partial(max) operands give a "
           "Partial(max) result, alone or together (DTensor's rule)."),
    Op("minimum", 'Aten_PointwiseOp<"{{0, 1}, {0}, {1}}", reduce = "Min">',
       "minimum",
       doc="The smaller of `self` and `other`, broadcasting; NaN where either "
           "is NaN (`torch.minimum`). Partial(min) operands give a "
           "Partial(min) result, alone or together (DTensor's rule)."),
    Op("bitwise_and.Tensor", "Aten_PointwiseOp", "bitwise_and",
       tensor="Aten_IntegralTensor",
       doc="`self & other` of integers, `self and other` of bools, "
           "broadcasting (attention masks combined)."),
    Op("bitwise_or.Tensor", "Aten_PointwiseOp", "bitwise_or",
       tensor="Aten_IntegralTensor",
       doc="`self | other` of integers, `self or other` of bools, "
           "broadcasting."),
    Op("eq.Tensor", "Aten_PointwiseOp", "eq_tensor", infer="Aten_InferBroadcastBool",
       doc="Whether `self == other`, broadcasting; compared in the operands' "
           "promoted dtype."),
    Op("ne.Tensor", "Aten_PointwiseOp", "ne_tensor", infer="Aten_InferBroadcastBool",
       doc="Whether `self != other`, broadcasting; compared in the operands' "
           "promoted dtype."),
    Op("lt.Tensor", "Aten_PointwiseOp", "lt_tensor", infer="Aten_InferBroadcastBool",
       doc="Whether `self < other`, broadcasting; compared in the operands' "
           "promoted dtype."),
    Op("le.Tensor", "Aten_PointwiseOp", "le_tensor", infer="Aten_InferBroadcastBool",
       doc="Whether `self <= other`, broadcasting; compared in the operands' "
           "promoted dtype."),
    Op("gt.Tensor", "Aten_PointwiseOp", "gt_tensor", infer="Aten_InferBroadcastBool",
       doc="Whether `self > other`, broadcasting; compared in the operands' "
           "promoted dtype."),
    Op("ge.Tensor", "Aten_PointwiseOp", "ge_tensor", infer="Aten_InferBroadcastBool",
       doc="Whether `self >= other`, broadcasting; compared in the operands' "
           "promoted dtype."),
    # Pointwise with a Scalar.
    Op("add.Scalar", "Aten_PointwiseOp", "add_scalar",
       infer="Aten_InferWithScalar"),
    Op("mul.Scalar", 'Aten_PointwiseOp<"{{0}}">', "mul_scalar",
       infer="Aten_InferWithScalar"),
    Op("div.Scalar", 'Aten_PointwiseOp<"{{0}}">', "div_scalar", infer="",
       doc="True division: an integer or bool `self` gives the default "
           "float dtype (f32)."),
    Op("sub.Scalar", "Aten_PointwiseOp", "sub_scalar",
       infer="Aten_InferWithScalar", doc="`self - alpha * other`."),
    Op("rsub.Scalar", "Aten_PointwiseOp", "rsub_scalar",
       infer="Aten_InferWithScalar", doc="`other - alpha * self`."),
    Op("pow.Scalar", "Aten_PointwiseOp", "pow_scalar", infer="",
       doc="`self ** exponent` for a scalar base."),
    Op("pow.Tensor_Scalar", "Aten_PointwiseOp", "pow_tensor_scalar", infer="",
       doc="`self ** exponent` for a scalar exponent, computed as ATen does "
           "for its special exponents (2: `self * self`, 0.5: `sqrt`, ...). "
           "An integer `self` with a negative integer exponent is an error, "
           "as in ATen."),
    Op("pow.Tensor_Tensor", "Aten_PointwiseOp", "pow_tensor_tensor",
       doc="`self ** exponent`, broadcasting (BLOOM's ALiBi slopes)."),
    Op("clamp", "Aten_PointwiseOp", "clamp", infer="",
       kernel_args=["self", "min", "max", "?min", "?max"],
       doc="`self` limited to `[min, max]`; either bound may be absent, not "
           "both. `max` wins where `min > max`; NaN in `self` or in a bound "
           "gives NaN, as in ATen. The bounds take part in type promotion "
           "(an integer `self` with a float bound gives f32)."),
    # Pointwise unary.
    Op("neg", 'Aten_PointwiseOp<"{{0}}">', "neg", infer="Aten_InferSame"),
    Op("abs", "Aten_PointwiseOp", "abs", infer="Aten_InferSame",
       tensor="Aten_NumericTensor",
       doc="`|self|`: -0 gives 0, NaN stays NaN; bool is rejected, as in "
           "ATen."),
    Op("reciprocal", "Aten_PointwiseOp", "reciprocal", infer="Aten_InferFloat",
       doc="An integer or bool `self` gives the default float dtype (f32)."),
    Op("sqrt", "Aten_PointwiseOp", "sqrt", infer="Aten_InferFloat",
       doc="An integer or bool `self` gives the default float dtype (f32)."),
    Op("relu", "Aten_PointwiseOp", "relu", infer="Aten_InferSame"),
    Op("rsqrt", "Aten_PointwiseOp", "rsqrt", infer="Aten_InferFloat",
       doc="`1 / sqrt(self)`. An integer or bool `self` gives the default "
           "float dtype (f32)."),
    Op("exp", "Aten_PointwiseOp", "exp", infer="Aten_InferFloat",
       doc="An integer or bool `self` gives the default float dtype (f32)."),
    Op("log", "Aten_PointwiseOp", "log", infer="Aten_InferFloat",
       doc="The natural logarithm: -inf at 0, NaN below. An integer or bool "
           "`self` gives the default float dtype (f32)."),
    Op("log1p", "Aten_PointwiseOp", "log1p", infer="Aten_InferFloat",
       doc="`log(1 + self)`, accurate near 0 (the softplus of Mamba's time "
           "step). An integer or bool `self` gives the default float dtype "
           "(f32)."),
    Op("expm1", "Aten_PointwiseOp", "expm1", infer="Aten_InferFloat",
       doc="`exp(self) - 1`, accurate near 0 (xIELU's activation). An "
           "integer or bool `self` gives the default float dtype (f32)."),
    Op("floor", "Aten_PointwiseOp", "floor", infer="Aten_InferSame",
       tensor="Aten_NumericTensor",
       doc="Rounds down (stochastic depth's keep mask, `floor(keep + "
           "rand)`); an integer `self` is returned unchanged, as in ATen."),
    Op("ceil", "Aten_PointwiseOp", "ceil", infer="Aten_InferSame",
       tensor="Aten_NumericTensor",
       doc="Rounds up; an integer `self` is returned unchanged."),
    Op("trunc", "Aten_PointwiseOp", "trunc", infer="Aten_InferSame",
       tensor="Aten_NumericTensor",
       doc="Rounds toward zero; an integer `self` is returned unchanged."),
    Op("round", "Aten_PointwiseOp", "round", infer="Aten_InferSame",
       tensor="Aten_NumericTensor",
       doc="Rounds to the nearest integer, halves to even (ATen's "
           "`nearbyint`); an integer `self` is returned unchanged."),
    Op("sign", "Aten_PointwiseOp", "sign", infer="Aten_InferSame",
       tensor="Aten_NumericTensor",
       doc="-1, 0 or 1 by the sign of `self`; 0 for NaN and for -0 (ATen's "
           "CPU kernel, `(0 < self) - (self < 0)`)."),
    Op("cos", "Aten_PointwiseOp", "cos", infer="Aten_InferFloat",
       doc="An integer or bool `self` gives the default float dtype (f32)."),
    Op("sin", "Aten_PointwiseOp", "sin", infer="Aten_InferFloat",
       doc="An integer or bool `self` gives the default float dtype (f32)."),
    Op("sigmoid", "Aten_PointwiseOp", "sigmoid", infer="Aten_InferFloat",
       doc="`1 / (1 + exp(-self))`. An integer or bool `self` gives the "
           "default float dtype (f32)."),
    Op("sigmoid_backward", 'Aten_PointwiseOp<"{{0}}">', "sigmoid_backward",
       tensor=FLOAT, doc="`grad_output * (1 - output) * output`."),
    Op("tanh", "Aten_PointwiseOp", "tanh", infer="Aten_InferFloat"),
    Op("hardtanh", "Aten_PointwiseOp", "hardtanh", infer="Aten_InferSame",
       tensor="Aten_NumericTensor",
       doc="`self` limited to `[min_val, max_val]` (ReLU6: `[0, 6]`); NaN "
           "stays NaN."),
    Op("lerp.Scalar", 'Aten_PointwiseOp<"{{0, 1}}">', "lerp_scalar",
       tensor=FLOAT, kernel_args=["self", "end", "weight"],
       doc="`self + weight * (end - self)`, broadcasting (Adam's moment "
           "updates)."),
    Op("where.self", 'Aten_PointwiseOp<"{{1, 2}}">', "where_self", infer="",
       types={"condition": "Aten_BoolTensor"},
       doc="`condition ? self : other`, the three broadcast; the dtype is "
           "`self`'s and `other`'s promoted."),
    # Truth values: i1 results.
    Op("eq.Scalar", "Aten_PointwiseOp", "eq_scalar", infer="Aten_InferBool",
       doc="Whether each element of `self` equals `other`."),
    Op("ne.Scalar", "Aten_PointwiseOp", "ne_scalar", infer="Aten_InferBool",
       doc="Whether each element of `self` differs from `other`."),
    Op("lt.Scalar", "Aten_PointwiseOp", "lt_scalar", infer="Aten_InferBool",
       doc="Whether each element of `self` is less than `other`."),
    Op("le.Scalar", "Aten_PointwiseOp", "le_scalar", infer="Aten_InferBool",
       doc="Whether each element of `self` is at most `other`."),
    Op("gt.Scalar", "Aten_PointwiseOp", "gt_scalar", infer="Aten_InferBool",
       doc="Whether each element of `self` is greater than `other`."),
    Op("ge.Scalar", "Aten_PointwiseOp", "ge_scalar", infer="Aten_InferBool",
       doc="Whether each element of `self` is at least `other`."),
    Op("logical_not", "Aten_PointwiseOp", "logical_not",
       infer="Aten_InferBool", doc="Whether each element of `self` is zero."),
    Op("tanh_backward", 'Aten_PointwiseOp<"{{0}}">', "tanh_backward",
       tensor=FLOAT, doc="`grad_output * (1 - output^2)`."),
    Op("gelu", "Aten_PointwiseOp", "gelu", infer="", tensor=FLOAT,
       values={"approximate": ["none", "tanh"]},
       doc="`approximate` is `none` (erf) or `tanh`."),
    Op("gelu_backward", 'Aten_PointwiseOp<"{{0}}">', "gelu_backward",
       infer="", tensor=FLOAT, values={"approximate": ["none", "tanh"]}),
    Op("silu", "Aten_PointwiseOp", "silu", tensor=FLOAT,
       doc="`self * sigmoid(self)` (swish)."),
    Op("silu_backward", 'Aten_PointwiseOp<"{{0}}">', "silu_backward",
       tensor=FLOAT,
       doc="`grad_output * s * (1 + self * (1 - s))` with "
           "`s = sigmoid(self)`."),
    Op("triu", "Aten_PointwiseOp", "triu", infer="", rule="",
       doc="Zeroes the elements below the `diagonal`-th diagonal of the "
           "last two dims."),
    Op("_to_copy", "Aten_PointwiseOp", "copy", infer="", rule="",
       required=["dtype"],
       doc="`self` converted to element type `dtype` (`Tensor.to(dtype)`), "
           "with ATen's casts: to a float type rounds to nearest even, a "
           "float to an integer truncates toward zero, to `i1` is "
           "\"nonzero\". A narrowing cast rounds each value, so a Partial "
           "is reduced first; a widening float cast (bf16 or f16 to f32, "
           "f32 to f64) is exact, so a Partial(sum) passes through and is "
           "reduced in the wider type (FSDP2's `reduce_dtype`). Also the "
           "casts of ddp's bf16 communication hook and of mixed precision."),
    Op("clone", 'Aten_PointwiseOp<"{{0}}", [Aten_SameElementsView, '
       'Aten_Rearrangement]>', infer="Aten_InferSame",
       doc="A copy; memory formats do not exist in value semantics."),
    Op("detach", 'Aten_PointwiseOp<"{{0}}", [Aten_SameElementsView, '
       'Aten_Rearrangement]>', infer="Aten_InferSame",
       doc="Identity on values (detach / detach_copy)."),
    Op("native_dropout_backward", 'Aten_PointwiseOp<"{{0}}">',
       "native_dropout_backward", infer="", tensor=FLOAT,
       types={"mask": "Aten_BoolTensor"}),
    # Random.
    Op("bernoulli.p", "Aten_RandomLikeOp", "bernoulli_p",
       infer="", tensor=FLOAT, nodefault=["p"], kernel_args=["p"],
       doc="A tensor shaped and typed like `self` whose elements are 1 with "
           "probability `p` and 0 otherwise (the values of `self` are not "
           "read). Dropout's `empty_like` + `bernoulli_(1 - p)` pair is "
           "captured as this op."),
    Op("native_dropout", "Aten_RandomOp", "native_dropout", infer="",
       tensor=FLOAT, required=["train"], results=["output", "mask"],
       types={"mask": "Aten_BoolTensor"},
       doc="Zeroes each element with probability `p` and scales the kept "
           "ones by `1 / (1 - p)`; also returns the boolean keep mask."),
    Op("uniform", "Aten_RandomLikeOp", "uniform_range", infer="Aten_InferSame",
       tensor=FLOAT, kernel_args=["from", "to"],
       doc="A tensor shaped and typed like `self` of numbers drawn uniformly "
           "from `[from, to)` (the values of `self` are not read): "
           "`torch.rand` and `rand_like` (stochastic depth's keep mask) are "
           "captured as this op of a zero tensor of their shape."),
    Op("exponential", "Aten_RandomLikeOp", "exponential", infer="Aten_InferSame",
       tensor=FLOAT, kernel_args=["lambd"],
       doc="A tensor shaped and typed like `self` of numbers drawn from the "
           "exponential distribution of rate `lambd`, `-log1p(-u) / lambd` "
           "of a uniform draw `u` (the values of `self` are not read): the "
           "Gumbel noise `-log(exponential)` PhiMoE's router samples its "
           "experts with."),
    # Factories.
    Op("full_like", "Aten_FactoryOp", "fill", infer="",
       kernel_args=["fill_value"],
       doc="`fill_value` shaped like `self`, of `dtype` when given, else "
           "`self`'s dtype."),
    Op("ones_like", "Aten_FactoryOp", "fill", infer="",
       kernel_args=["=1"],
       doc="Ones shaped like `self`, of `dtype` when given, else `self`'s "
           "dtype."),
    Op("full", "Aten_FactoryOp<[Aten_ResultSizeAttr]>", "fill", infer="",
       required=["dtype"],
       doc="A tensor of shape `size` filled with `fill_value`, of element "
           "type `dtype`."),
    Op("arange", "Aten_FactoryOp", "arange", infer="", rule="",
       required=["dtype"], kernel_args=["=0", "=1"],
       doc="`[0, 1, ..., ceil(end) - 1]` of element type `dtype`."),
    Op("arange.start_step", "Aten_FactoryOp", "arange", infer="", rule="",
       required=["dtype"], nodefault=["step"], kernel_args=["start", "step"],
       doc="`start + i * step` for `i < ceil((end - start) / step)`, of "
           "element type `dtype`."),
    # Matrix products.
    Op("mm", "Aten_MatmulOp<0, 0>", infer="", tensor=FLOAT,
       doc="`[n, k] x [k, m] -> [n, m]`."),
    Op("addmm", "Aten_MatmulOp<0, 1>", infer="", tensor=FLOAT,
       doc="`beta * self + alpha * (mat1 @ mat2)`; `self` broadcasts to "
           "`[n, m]`."),
    Op("bmm", "Aten_MatmulOp<1, 0>", infer="", tensor=FLOAT,
       doc="`[b, n, k] x [b, k, m] -> [b, n, m]`."),
    Op("baddbmm", "Aten_MatmulOp<1, 1>", infer="", tensor=FLOAT,
       doc="`beta * self + alpha * bmm(batch1, batch2)`; `self` broadcasts "
           "to `[b, n, m]`."),
    # Views, rearrangements.
    Op("view", "Aten_ViewOp<[Aten_ResultSizeAttr]>",
       infer="Aten_InferReshape"),
    Op("_unsafe_view", "Aten_ViewOp<[Aten_ResultSizeAttr]>",
       infer="Aten_InferReshape"),
    Op("_reshape_alias", "Aten_ViewOp<[Aten_ResultSizeAttr]>",
       infer="Aten_InferReshape",
       doc="A reshape to `size`; `stride` is memory layout, kept for "
           "fidelity and ignored."),
    Op("unsqueeze", "Aten_ViewOp", infer=""),
    Op("squeeze.dims", "Aten_ViewOp", infer="",
       doc="Removes the listed dims, which must have size 1 (capture drops "
           "the others, which ATen leaves in place)."),
    Op("select.int", "Aten_SelectOp", "slice",
       kernel_args=["self", "$getSelectedDim", "$getSelectedIndex", "=1"],
       doc="Element `index` of dim `dim`, which the result drops."),
    Op("slice.Tensor", "Aten_OtherOp", "slice", infer="", rule="",
       required=["start", "end"],
       kernel_args=["self", "^dim", "start", "step"],
       doc="Elements `start, start + step, ...` below `end` along `dim` "
           "(`self[..., start:end:step]`). `start` and `end` are normalized "
           "(0 <= start <= end <= size; capture resolves None, negative and "
           "out-of-range bounds as Python slicing does); `step` >= 1. The "
           "sliced dim stays whole unless the slice takes all of it "
           "(DTensor's slice rule); the others shard through."),
    Op("slice_scatter", "Aten_OtherOp", "slice_scatter", infer="", rule="",
       required=["start", "end"],
       kernel_args=["self", "src", "^dim", "start", "step"],
       doc="`self` with its slice `start:end:step` along `dim` replaced by "
           "`src` (the backward of `aten.slice.Tensor`); bounds as there. "
           "Linear in `self` and `src` together; the sliced dim stays "
           "whole."),
    Op("constant_pad_nd", "Aten_OtherOp", "constant_pad_nd", infer="",
       rule="", kernel_args=["self", "@getPad", "value"],
       doc="Pads the last `len(pad) / 2` dims with `value`: `pad` is (before, "
           "after) of the last dim, then of the one before it, ...; a "
           "negative amount crops (`torch.nn.functional.pad`, constant "
           "mode). The padded dims stay whole."),
    Op("t", "Aten_PermuteOp", "permute", infer="",
       kernel_args=["self", "@getPermutation"],
       doc="Transposes a 2-D tensor; 0-D and 1-D tensors are returned as "
           "is."),
    Op("transpose.int", "Aten_PermuteOp", "permute", infer="",
       kernel_args=["self", "@getPermutation"]),
    Op("permute", "Aten_PermuteOp", "permute", infer="",
       kernel_args=["self", "@getPermutation"]),
    Op("expand", 'Aten_PointwiseOp<"{{0}}", [Aten_Rearrangement, '
       'Aten_ResultSizeAttr]>', "expand", infer="", kernel_args=["self"],
       doc="Broadcasts `self` to `size`; -1 keeps a dim; new dims are "
           "prepended. New leading dims and dims broadcast from 1 exist "
           "only in the result: sharding them is a local slice."),
    # Concatenation and splits.
    Op("cat", "Aten_OtherOp", "cat", infer="", rule="",
       kernel_args=["tensors", "^dim"]),
    Op("split.Tensor", "Aten_SplitOp", infer="",
       results=["results"],
       doc="Pieces of `split_size` along `dim`, the last one possibly "
           "smaller."),
    Op("split_with_sizes", "Aten_SplitOp", infer="",
       results=["results"],
       doc="Consecutive pieces of `split_sizes[i]` elements along `dim`; "
           "the sizes must add up to the dim's length. DDP's gradient "
           "buckets use it to take the reduced flat buffer apart."),
    # Reductions.
    Op("sum", 'Aten_ReductionOp<"Sum", withDims = 0, promotes = 1>', "sum",
       kernel_args=["self", "@getReducedDims"],
       doc="Sum of all elements, a 0-D tensor (integer inputs sum to i64)."),
    Op("sum.dim_IntList", 'Aten_ReductionOp<"Sum", promotes = 1>', "sum",
       required=["dim"], kernel_args=["self", "@getReducedDims"],
       doc="Integer and bool inputs sum to i64 unless `dtype` is given."),
    Op("mean.dim", 'Aten_ReductionOp<"Avg">', "mean", tensor=FLOAT,
       required=["dim"], kernel_args=["self", "@getReducedDims"],
       doc="The sum over the number of reduced elements. Over a sharded "
           "dim the result is Partial(avg), which needs equal shards."),
    Op("any.dim", 'Aten_ReductionOp<"Max", withDtype = 0, singleDim = 1>',
       "any", tensor="Aten_BoolTensor",
       kernel_args=["self", "@getReducedDims"],
       doc="Whether some element along `dim` is true. Over a sharded dim "
           "the result is Partial(max)."),
    Op("amax", 'Aten_ReductionOp<"Max", withDtype = 0>', "amax",
       tensor="Aten_NumericTensor", kernel_args=["self", "@getReducedDims"],
       doc="The largest element (NaN when there is one). Over a sharded "
           "dim the result is Partial(max); an empty shard holds the "
           "lowest value."),
    # Scans.
    Op("cumsum", "Aten_OtherOp", "cumsum", infer="", rule="",
       kernel_args=["self", "^dim"],
       doc="Running sums along `dim`; integer and bool inputs sum to i64 "
           "unless `dtype` is given. The scanned dim stays whole; linear, so "
           "a Partial(sum) passes through."),
    # Softmax.
    Op("_softmax", "Aten_SoftmaxOp", "softmax", tensor=FLOAT,
       kernel_args=["self", "^dim"]),
    Op("_log_softmax", "Aten_SoftmaxOp", "log_softmax", tensor=FLOAT,
       kernel_args=["self", "^dim"]),
    Op("_softmax_backward_data", "Aten_SoftmaxBackwardOp",
       "softmax_backward_data", tensor=FLOAT,
       kernel_args=["grad_output", "output", "^dim"]),
    Op("_log_softmax_backward_data", "Aten_SoftmaxBackwardOp",
       "log_softmax_backward_data", tensor=FLOAT,
       kernel_args=["grad_output", "output", "^dim"]),
    # Normalization.
    Op("native_layer_norm", "Aten_OtherOp<[AttrSizedOperandSegments]>", "native_layer_norm", infer="",
       rule="", tensor=FLOAT, results=["output", "mean", "rstd"],
       kernel_args=["input", "weight", "bias", "#normalized_shape", "eps"],
       doc="Normalizes over the trailing `normalized_shape` dims. Results: "
           "the output (shaped like `input`), and the mean and reciprocal "
           "standard deviation, shaped like `input` with the normalized "
           "dims set to 1."),
    Op("native_layer_norm_backward",
       "Aten_OtherOp<[AttrSizedOperandSegments]>",
       "native_layer_norm_backward", infer="", rule="", tensor=FLOAT,
       results=["grad_input", "grad_weight", "grad_bias"],
       kernel_args=["grad_out", "input", "mean", "rstd", "weight", "bias",
                    "#normalized_shape"],
       optional_results=["grad_input", "grad_weight", "grad_bias"],
       doc="Gradients of the input (shaped like `input`), the weight and "
           "the bias (shaped `normalized_shape`). A result whose "
           "`output_mask` entry is false is not computed by ATen (None); "
           "here it is typed but has no use, and the kernel skips it."),
    # Attention.
    Op("_scaled_dot_product_flash_attention_for_cpu", "Aten_AttentionOp",
       "attention", tensor=FLOAT, results=["output", "logsumexp"],
       kernel_args=["query", "key", "value", "attn_mask", "is_causal",
                    "%getScaleValue"],
       doc="`softmax(query @ key^T * scale + mask) @ value` per batch and "
           "head: query `[B, H, L, E]`, key and value `[B, H, S, E]` (ATen's "
           "CPU kernel wants one head size), output `[B, H, L, E]`, and "
           "logsumexp `[B, H, L]`, the log of each row's softmax "
           "denominator in the scaled and masked scores (f32 for f16 and "
           "bf16 inputs, else query's dtype). `scale` defaults to "
           "`1 / sqrt(E)`. `is_causal`: query i sees keys j <= i (top-left "
           "aligned when L != S). `attn_mask`, of query's dtype, 2-D or "
           "4-D, broadcasts to `[B, H, L, S]` and is added to the scores (a "
           "boolean mask is captured as a `where` to 0 / -inf); a row that "
           "sees no key gives zeros and logsumexp 0, as ATen. `dropout_p` "
           "must be 0: ATen's CPU kernel has no dropout."),
    Op("_scaled_dot_product_flash_attention_for_cpu_backward",
       "Aten_AttentionOp<1>", "attention_backward", tensor=FLOAT,
       kernel_args=["grad_out", "query", "key", "value", "out", "logsumexp",
                    "attn_mask", "is_causal", "%getScaleValue"],
       doc="The gradients of query, key and value (shaped like them) from "
           "the forward's `out` and `logsumexp`, which recompute the "
           "probabilities without storing them; operands as in "
           "`aten._scaled_dot_product_flash_attention_for_cpu`."),
    # Indexing.
    Op("embedding", "Aten_OtherOp", "embedding", infer="", rule="",
       tensor=FLOAT, types={"indices": "Aten_IndexTensor"},
       kernel_args=["weight", "indices", "padding_idx"],
       doc="Rows of `weight` [V, D] picked by `indices`: shape "
           "`indices.shape + [D]`."),
    Op("embedding_dense_backward", "Aten_OtherOp", "embedding_dense_backward",
       infer="", rule="", tensor=FLOAT, types={"indices": "Aten_IndexTensor"},
       kernel_args=["grad_output", "indices", "padding_idx",
                    "scale_grad_by_freq"],
       doc="Scatter-adds `grad_output` rows into a `[num_weights, D]` "
           "gradient."),
    Op("gather", "Aten_OtherOp", "gather", infer="", rule="",
       types={"index": "Aten_IndexTensor"},
       kernel_args=["self", "^dim", "index"],
       doc="`out[i][j] = self[index[i][j]][j]` for `dim` 0, and so on: `out` "
           "is shaped like `index`, which is no larger than `self` outside "
           "`dim` (`torch.gather`). `dim` stays whole; other dims shard "
           "through where `index` and `self` have one size."),
    Op("index.Tensor", "Aten_OtherOp", "index", infer="", rule="",
       types={"indices": "Aten_IndexTensor"},
       kernel_args=["self", "indices"],
       doc="Advanced indexing of the leading dims: `self[indices[0], ..., "
           "indices[k-1]]`. The indices broadcast to one shape `I`; the "
           "result is `I + self.shape[k:]` (the capture writes a `None` "
           "index, a slice before an indexed dim, as permutes around this "
           "op). Negative indices count "
           "from the end. The indexed dims stay whole; the trailing dims "
           "and the indices' broadcast dims shard through."),
    Op("scatter.src", "Aten_OtherOp", "scatter", infer="", rule="",
       types={"index": "Aten_IndexTensor"},
       kernel_args=["self", "^dim", "index", "src", "=0"],
       doc="`self` with `out[...][index[i][j]][...] = src[i][j]` along `dim` "
           "for every position of `index` (`torch.Tensor.scatter`; the "
           "backward of `topk`). `index` has `self`'s rank and is no larger "
           "than `src` anywhere nor than `self` outside `dim`. Repeated "
           "indices: the last position in row-major order wins, as ATen's "
           "CPU kernel. Linear in `self` and `src` together; the dims other "
           "than `dim` where `self`, `index` and `src` have one size shard "
           "through, `dim` stays whole."),
    Op("scatter_add", "Aten_OtherOp", "scatter", infer="", rule="",
       types={"index": "Aten_IndexTensor"},
       kernel_args=["self", "^dim", "index", "src", "=1"],
       doc="`self` with `out[...][index[i][j]][...] += src[i][j]` along "
           "`dim` (`torch.Tensor.scatter_add`; the backward of `gather`): "
           "repeated indices sum. Shapes and sharding as `aten.scatter.src`."),
    Op("sort.stable", "Aten_OtherOp", "sort", infer="", rule="",
       results=["values", "indices"], types={"indices": "Aten_IndexTensor"},
       required=["stable"], kernel_args=["self", "^dim", "descending"],
       doc="`self` sorted along `dim`, ascending or `descending`, and the "
           "elements' positions (i64): always stable (equal values keep "
           "their order, which `stable = false` allows), NaN above every "
           "number (`torch.sort`; the capture writes `sort.default` as this "
           "op with `stable = false`). A mixture-of-experts layer's tokens "
           "sorted by expert. `dim` stays whole; the other dims shard "
           "through."),
    Op("topk", "Aten_OtherOp", "topk", infer="", rule="",
       results=["values", "indices"], types={"indices": "Aten_IndexTensor"},
       kernel_args=["self", "k", "^dim", "largest"],
       doc="The `k` largest (`largest`) or smallest elements of `self` along "
           "`dim` and their positions (i64), in order: descending for "
           "`largest`, else ascending, equal values by position, NaN above "
           "every number (`torch.topk`; ATen leaves ties unordered). The "
           "results are always sorted, which `sorted = false` allows. A "
           "mixture-of-experts router's choice of experts. `dim` stays "
           "whole; the other dims shard through."),
    # Convolution and pooling (channels first: [N, C, spatial...]).
    Op("convolution", "Aten_OtherOp", "convolution", infer="", rule="",
       tensor=FLOAT,
       kernel_args=["input", "weight", "bias", "@getStride", "@getPadding",
                    "@getDilation", "groups"],
       doc="`input` `[N, C, *S]` (1 to 3 spatial dims) correlated with "
           "`weight` `[O, C / groups, *K]`, plus `bias` `[O]`: the result is "
           "`[N, O, *P]` with `P = (S + 2 * padding - dilation * (K - 1) - "
           "1) / stride + 1` (`torch.nn.functional.conv2d`). `groups` "
           "splits the channels into independent groups (depthwise: "
           "`groups == C`). `transposed` must be false and `output_padding` "
           "zeros. Sharding: the batch; the output channels (weight and bias "
           "Shard(0)); the input channels (weight Shard(1): a Partial(sum) "
           "result) when `groups` is 1; the channels of a depthwise "
           "convolution (one input channel per group; evenly when a group "
           "has several outputs). The spatial dims stay whole."),
    Op("convolution_backward", "Aten_OtherOp", "convolution_backward",
       infer="", rule="", tensor=FLOAT,
       results=["grad_input", "grad_weight"],
       kernel_args=["grad_output", "input", "weight", "@getStride",
                    "@getPadding", "@getDilation", "groups"],
       optional_results=["grad_input", "grad_weight"],
       doc="The gradients of `aten.convolution`'s input (shaped like "
           "`input`) and weight (shaped like `weight`) from `grad_output`; "
           "arguments as there. The bias gradient, the sum of `grad_output` "
           "over all dims but 1, is captured as `aten.sum.dim_IntList`, so "
           "`output_mask[2]` must be false and the op has two results (a "
           "result whose mask entry is false is typed but has no use, and "
           "the kernel skips it: the first layer's input gradient, a "
           "frozen weight's gradient). "
           "Sharded as the convolution: the batch (a Partial(sum) weight "
           "gradient), output channels (a Partial(sum) input gradient), "
           "input channels."),
    Op("max_pool2d_with_indices", "Aten_OtherOp", "max_pool2d_with_indices",
       infer="", rule="", results=["output", "indices"],
       types={"indices": "Aten_IndexTensor", "self": "Aten_NumericTensor",
              "output": "Aten_NumericTensor"},
       kernel_args=["self", "@getKernelSize", "@getStride", "@getPadding",
                    "@getDilation", "ceil_mode"],
       doc="The largest element of each `kernel_size` window of the last two "
           "dims of `self` `[*B, H, W]`, and its position `h * W + w` in "
           "its plane (i64); padding is -inf, never picked "
           "(`torch.nn.functional.max_pool2d`). `stride` is `kernel_size` "
           "when empty. Windows that start in the padding are dropped with "
           "`ceil_mode`, as in ATen. The pooled dims stay whole; the leading "
           "ones shard through."),
    Op("max_pool2d_with_indices_backward", "Aten_OtherOp",
       "max_pool2d_with_indices_backward", infer="", rule="",
       types={"indices": "Aten_IndexTensor", "self": "Aten_NumericTensor",
              "grad_output": "Aten_NumericTensor",
              "result": "Aten_NumericTensor"},
       kernel_args=["grad_output", "indices"],
       doc="`grad_output` scatter-added into a tensor shaped like `self` at "
           "the positions `indices` of `aten.max_pool2d_with_indices` "
           "picked; the other arguments are the forward's. Linear in "
           "`grad_output`; the pooled dims stay whole."),
    Op("avg_pool2d", "Aten_OtherOp", "avg_pool2d", infer="", rule="",
       tensor=FLOAT, required=["divisor_override"],
       kernel_args=["self", "@getKernelSize", "@getStride", "@getPadding",
                    "ceil_mode", "count_include_pad", "divisor_override"],
       doc="The mean of each `kernel_size` window of the last two dims of "
           "`self` `[*B, H, W]` (`torch.nn.functional.avg_pool2d`): the sum "
           "of its elements inside the plane over `divisor_override` when "
           "it is not 0 (the schema's None; ATen refuses 0), else over the "
           "window's size, padding included with `count_include_pad`. "
           "`stride` is `kernel_size` when empty; output sizes as "
           "`max_pool2d_with_indices`. Linear; the pooled dims stay whole."),
    Op("avg_pool2d_backward", "Aten_OtherOp", "avg_pool2d_backward",
       infer="", rule="", tensor=FLOAT, required=["divisor_override"],
       kernel_args=["grad_output", "@getKernelSize", "@getStride",
                    "@getPadding", "ceil_mode", "count_include_pad",
                    "divisor_override"],
       doc="The gradient of `aten.avg_pool2d` (shaped like `self`): each "
           "window's `grad_output` over its divisor added to the window's "
           "elements; arguments as there."),
    Op("_adaptive_avg_pool2d", "Aten_OtherOp", "adaptive_avg_pool2d",
       infer="", rule="", tensor=FLOAT, kernel_args=["self"],
       doc="The mean of `self` `[*B, H, W]` over `output_size` windows: "
           "window `i` of a dim of `n` elements pooled to `m` spans "
           "`[floor(i * n / m), ceil((i + 1) * n / m))` "
           "(`torch.nn.functional.adaptive_avg_pool2d`). Linear; the pooled "
           "dims stay whole."),
    Op("_adaptive_avg_pool2d_backward", "Aten_OtherOp",
       "adaptive_avg_pool2d_backward", infer="", rule="", tensor=FLOAT,
       kernel_args=["grad_output"],
       doc="The gradient of `aten._adaptive_avg_pool2d` (shaped like "
           "`self`)."),
    # Losses.
    Op("nll_loss_forward", "Aten_OtherOp", "nll_loss_forward", infer="",
       rule="", tensor=FLOAT, types={"target": "Aten_TargetTensor"},
       doc="`self` is `[N, C]` (or `[C]`) log-probabilities, `target` `[N]` "
           "(or `[]`) class indices, `weight` optional `[C]`. `reduction` is "
           "0 (none: output `[N]`), 1 (mean) or 2 (sum) (0-D output). "
           "`total_weight` is 0-D. The classes may be sharded "
           "(loss_parallel): each rank sums the targets it holds, a "
           "Partial(sum) of the loss and of `total_weight`."),
    Op("nll_loss_backward", "Aten_OtherOp", "nll_loss_backward", infer="",
       rule="", tensor=FLOAT, types={"target": "Aten_TargetTensor"},
       kernel_args=["grad_output", "self", "target", "weight", "total_weight",
                    "reduction", "ignore_index"],
       doc="The gradient of `self`; operands as in `aten.nll_loss_forward`."),
]
