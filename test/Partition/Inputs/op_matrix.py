"""The per-op differential test matrix (DTensor's OpInfo test, for spmd).

Every sharding strategy of every `aten` op, run sharded on several ranks,
must equal the unsharded op computed by PyTorch. The matrix is built in two
phases around `spmd-opt --spmd-test-print-strategies`, the compiler's own
list of the strategies of each op on the mesh:

  op_matrix.py cases  --mesh 4|2x2 --sizes even|uneven --out DIR [--only OP...]
                      [--part K/N]
      DIR/cases.mlir  `spmd.mesh @mesh` and one `func.func @case_<i>` per
                      case: one aten op on the function arguments, returning
                      all of its results; no layouts.
      DIR/cases.json  each case: op, operands (name, shape, dtype, .npy file),
                      attributes, results (type; dropped from the check or not).
      DIR/inputs/     the global (unsharded) operands of every case.

  op_matrix.py expand --mesh M --sizes S --out DIR --strategies FILE [--only OP...]
      FILE is the printer's stdout: per function, `@case_<i> aten.<op>`, then
      `  <k>: [<placements>] ... -> [<placements>] ...`, one bracketed list
      per operand, `->`, one per result; one placement per mesh dim.
      DIR/matrix.mlir one `func.func @train_step` holding an instance of every
                      (case, strategy k): its operands are arguments
                      `%c<j>_<n>` {spmd.fqn = "c<j>.in<n>", spmd.role = "input",
                      spmd.layout = the strategy's operand placements with
                      Partial read as Replicate}; an operand the strategy wants
                      Partial goes through `spmd.redistribute` Replicate ->
                      Partial (local) first; the op carries `spmd.strategy = k`;
                      each checked result is returned as "c<j>.out<n>" with
                      the strategy's placements, Partial read as Replicate
                      (the compiler inserts the reduction).
      DIR/bundle/     the spmd-run bundle (docs/capture.md): every argument's
                      global value, PyTorch's results of the unsharded op in
                      float32 (results/) and float64 (results64/, the exact
                      answer spmd-run's tolerance is measured against).

Sizes: "even" divides every shardable dim by 4; "uneven" uses 3, 5, 6, 7, 9
so that shards are ragged and some ranks hold an empty one. The random ops
(bernoulli.p, native_dropout, uniform, exponential) are not in the matrix:
PyTorch's generator is not the reference for them (the dropout,
stochastic-depth and PhiMoE runs check them).

Run with the project's Python (scripts/setup.sh: PyTorch, numpy). The lit test:

  RUN: %python %S/Inputs/op_matrix.py cases --mesh 4 --sizes uneven --out %t
  RUN: spmd-opt %t/cases.mlir --spmd-test-print-strategies -o /dev/null > %t/strategies.txt
  RUN: %python %S/Inputs/op_matrix.py expand --mesh 4 --sizes uneven --out %t --strategies %t/strategies.txt
  RUN: spmd-opt %t/matrix.mlir --spmd-propagate --spmd-partition -o %t/dist.mlir
  RUN: spmd-run --np 4 %t/dist.mlir --bundle %t/bundle --check
"""
import argparse
import json
import os
import re
import sys

import numpy as np
import torch

MESHES = {"4": ([4], ["dp"]), "2x2": ([2, 2], ["dp", "tp"])}
SIZES = {"even": dict(B=4, S=8, D=12, K=16, N=8, C=8, V=12, P=8),
         "uneven": dict(B=5, S=3, D=7, K=6, N=5, C=7, V=9, P=3)}
SKIPPED = {"bernoulli.p": "random: checked by the dropout runs",
           "native_dropout": "random: checked by the dropout runs",
           "uniform": "random: checked by the stochastic-depth runs",
           "exponential": "random: checked by the PhiMoE runs"}
# Optional operands, printed `weight %w` instead of after a comma.
KEYWORD_OPERANDS = {"native_layer_norm": ("weight", "bias"), "convolution": ("bias",),
                    "native_layer_norm_backward": ("weight", "bias"),
                    "nll_loss_forward": ("weight",), "nll_loss_backward": ("weight",),
                    "_scaled_dot_product_flash_attention_for_cpu": ("attn_mask",),
                    "_scaled_dot_product_flash_attention_for_cpu_backward": ("attn_mask",)}
# Optional schema arguments the dialect requires, with its value for None.
DIALECT_NONE = {"avg_pool2d": {"divisor_override": 0},
                "avg_pool2d_backward": {"divisor_override": 0}}
NP_DTYPES = {"float32": "f32", "float64": "f64", "int64": "i64", "int32": "i32", "bool": "i1"}
TORCH_DTYPES = {"f32": torch.float32, "f64": torch.float64, "i64": torch.int64,
                "i32": torch.int32, "i1": torch.bool}
# The aten dialect's op list (the generated op definitions come from it).
ATEN_OPS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "..", "..", "..", "tools", "aten-ods-gen", "aten_ops.py")

#===----------------------------------------------------------------------===#
# The table of cases
#===----------------------------------------------------------------------===#


class In:
    """How to make one operand: kind randn | pos | index | mask | derived."""

    def __init__(self, kind, shape=(), dtype="float32", hi=None, put=None, fn=None, desc=None):
        self.kind, self.shape, self.dtype = kind, list(shape), dtype
        self.hi, self.put, self.fn, self.desc = hi, put or {}, fn, desc or kind

    def make(self, rng, earlier):
        """The global value; `earlier` maps earlier operand names to tensors."""
        if self.kind == "randn":
            a = rng.standard_normal(self.shape)
        elif self.kind == "pos":  # sqrt, reciprocal, denominators
            a = rng.uniform(0.5, 2.0, self.shape)
        elif self.kind == "index":
            a = rng.integers(0, self.hi, self.shape)
        elif self.kind == "mask":
            a = rng.random(self.shape) < 0.8
        else:
            a = self.fn(earlier, rng).detach().numpy()
        a = np.array(a, dtype=self.dtype if self.kind != "derived" else a.dtype)
        for pos, value in self.put.items():
            a.flat[pos % a.size] = value
        return a


class Dt:
    """A dtype attribute (TypeAttr: `dtype = f32`)."""

    def __init__(self, name):
        self.name = name


def C(op, drop=None, keep=None, **kw):
    """A case: operands (In, or a list of In for `tensors`) and attributes by
    ATen schema name, in the op's operand order; `drop` maps result indices
    whose value is undefined to the reason; `keep`: the dialect's op has only
    the first `keep` of PyTorch's results (convolution_backward's bias
    gradient is a sum of its own)."""
    operands, attrs = [], {}
    for name, v in kw.items():
        if isinstance(v, In) or (isinstance(v, list) and v and isinstance(v[0], In)):
            operands += [(name, x) for x in (v if isinstance(v, list) else [v])]
        else:
            attrs[name] = v
    return {"op": op, "operands": operands, "attrs": attrs, "drop": drop or {}, "keep": keep}


def build_cases(z):
    """Every case on the sizes `z`: realistic shapes from MLP, Transformer,
    embedding and cross-entropy steps, with broadcasting and optional operands."""
    B, S, D, K, N, C_, V, P = (z[k] for k in "BSDKNCVP")
    f = lambda *s: In("randn", s)
    pos = lambda *s: In("pos", s)
    mask = lambda *s: In("mask", s, "bool")
    idx = lambda hi, *s, dtype="int64", put=None: In("index", s, dtype, hi=hi, put=put)
    target = lambda: idx(C_, N, put={1: -100})  # one ignored sample
    logp = lambda *s: In("derived", fn=lambda v, r: torch.from_numpy(
        r.standard_normal(s).astype(np.float32)).log_softmax(-1), desc="log_softmax(randn)")
    soft = lambda log, dim, *s: In("derived", fn=lambda v, r: getattr(torch.from_numpy(
        r.standard_normal(s).astype(np.float32)), "log_softmax" if log else "softmax")(dim),
        desc="softmax output")
    ln_stat = lambda ns, k: In("derived", fn=lambda v, r: torch.ops.aten.native_layer_norm(
        v["input"], ns, None, None, 1e-5)[k], desc=("mean", "rstd")[k - 1] + " of input")
    total_weight = lambda red: In("derived", fn=lambda v, r: torch.ops.aten.nll_loss_forward(
        v["self"], v["target"], v.get("weight"), red, -100)[1], desc="total_weight of self")
    undefined = {1: "total_weight is not defined for reduction none"}
    # Attention: an additive mask drawn from its own seed, so that the
    # backward's out and logsumexp (PyTorch's forward, operands before the
    # mask) see the mask the case passes.
    sdpa = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    amask = lambda *s: torch.from_numpy(np.random.default_rng(7).standard_normal(s)
                                        .astype(np.float32))
    sdpa_out = lambda k, causal, scale=None, m=None: In("derived", fn=lambda v, r: sdpa(
        v["query"], v["key"], v["value"], 0.0, causal,
        attn_mask=None if m is None else amask(*m), scale=scale)[k],
        desc=("out", "logsumexp")[k] + " of the forward")
    return [
        # Elementwise, with broadcasting (a [D] bias, '1' dims on both sides, 0-D).
        C("add.Tensor", self=f(B, S, D), other=f(D)),
        C("add.Tensor", self=f(B, D), other=f(B, D), alpha=2.0),
        C("add.Tensor", self=f(B, D), other=f()),
        C("sub.Tensor", self=f(B, S, 1), other=f(B, 1, D)),
        C("sub.Tensor", self=f(B, D), other=f(1, D), alpha=2.0),
        C("mul.Tensor", self=f(B, S, D), other=f(B, S, D)),
        C("mul.Tensor", self=f(B, S, D), other=mask(B, S, D)),
        C("div.Tensor", self=f(D), other=pos(B, D)),
        C("div.Tensor_mode", self=f(B, D), other=In("derived", fn=lambda v, r: torch.from_numpy(
            r.uniform(0.5, 2.0, (B, D)) * r.choice([-1.0, 1.0], (B, D))).float(),
            desc="+-[0.5, 2)"), rounding_mode="floor"),
        C("div.Tensor_mode", self=In("derived", fn=lambda v, r: torch.from_numpy(
            r.integers(-20, 20, (B, S))), desc="integers"), other=In(
            "derived", fn=lambda v, r: torch.from_numpy(r.integers(1, 4, (S,)) * r.choice(
                [-1, 1], (S,))), desc="nonzero integers"), rounding_mode="floor"),
        C("div.Tensor_mode", self=f(B, S, D), other=pos(D), rounding_mode="trunc"),
        C("addcmul", self=f(B, D), tensor1=f(B, D), tensor2=f(D), value=0.5),
        C("addcdiv", self=f(B, D), tensor1=f(B, D), tensor2=pos(B, D), value=-0.1),
        C("threshold_backward", grad_output=f(B, S, D), self=f(B, S, D), threshold=0),
        C("maximum", self=f(B, S, D), other=f(D)),
        C("maximum", self=f(B, 1), other=idx(3, B, D)),
        C("maximum", self=f(B, D), other=f()),
        C("minimum", self=f(B, S, D), other=f(D)),
        C("minimum", self=f(B, 1), other=idx(3, B, D)),
        C("bitwise_and.Tensor", self=mask(B, S, D), other=mask(S, D)),
        C("bitwise_and.Tensor", self=idx(K, B, D), other=idx(K, B, 1)),
        C("bitwise_or.Tensor", self=mask(B, 1, D), other=mask(B, S, 1)),
        C("bitwise_or.Tensor", self=idx(K, B, D, dtype="int32"), other=idx(K, D)),
        # Comparisons of two tensors, in their promoted dtype (masks of the
        # language models: positions against positions).
        C("eq.Tensor", self=idx(3, B, S), other=idx(3, S)),
        C("ne.Tensor", self=f(B, D), other=f(B, D)),
        C("lt.Tensor", self=idx(K, B, 1), other=f(D)),
        C("le.Tensor", self=idx(S, S, 1), other=idx(S, 1, S)),
        C("gt.Tensor", self=f(B, S, D), other=f()),
        C("ge.Tensor", self=idx(S, B, S, 1), other=idx(S, S, dtype="int32")),
        C("add.Scalar", self=f(B, D), other=1, alpha=2.0),
        C("sub.Scalar", self=idx(K, B, S), other=1),
        C("sub.Scalar", self=f(B, D), other=0.5, alpha=2.0),
        C("mul.Scalar", self=f(B, D), other=0.9),
        C("div.Scalar", self=f(B, S, D), other=8.0),
        C("rsub.Scalar", self=f(B, D), other=1),
        C("pow.Scalar", self=0.9, exponent=f(B, D)),
        C("pow.Scalar", self=0.9, exponent=pos()),
        # pow.Tensor_Scalar: linalg_vector_norm's x ** 2 and s ** 0.5, an
        # exponent with no special case, an integer power.
        C("pow.Tensor_Tensor", self=pos(B, S, D), exponent=f(D)),
        C("pow.Tensor_Tensor", self=idx(K, B, D), exponent=idx(3, B, 1)),
        C("pow.Tensor_Scalar", self=f(B, S, D), exponent=2.0),
        C("pow.Tensor_Scalar", self=pos(), exponent=0.5),
        C("pow.Tensor_Scalar", self=pos(B, D), exponent=-1.5),
        C("pow.Tensor_Scalar", self=idx(5, B, D), exponent=3),
        # clamp: clip_grad_norm_'s clamp(coef, max=1.0), both bounds, an
        # integer self with an integer and with a float bound.
        C("clamp", self=pos(), max=1.0),
        C("clamp", self=f(B, S, D), min=-0.5, max=0.5),
        C("clamp", self=idx(K, B, D), min=3),
        C("clamp", self=idx(K, B, D), min=1, max=K - 2.5),
        C("neg", self=f(B, D)),
        C("abs", self=f(B, S, D)),
        C("abs", self=In("derived", fn=lambda v, r: torch.from_numpy(
            r.integers(-9, 9, (B, D), dtype=np.int32)), desc="integers in [-9, 9)")),
        C("reciprocal", self=pos(B, D)),
        C("sqrt", self=pos(B, S, D)),
        C("rsqrt", self=pos(B, S, 1)),
        C("exp", self=f(B, S, D)),
        C("log", self=pos(B, S, D)),
        C("log", self=idx(K, B, D, put={0: 0})),
        C("log1p", self=pos(B, S, D)),
        C("log1p", self=idx(K, B, D)),
        C("expm1", self=f(B, S, D)),
        # Halves (and -0.5: round gives -0) where rounding modes differ;
        # integers pass unchanged.
        C("floor", self=f(B, S, D)),
        C("floor", self=idx(K, B, D)),
        C("ceil", self=f(B, S, D)),
        C("trunc", self=f(B, S, D)),
        C("round", self=In("derived", fn=lambda v, r: torch.from_numpy(
            r.integers(-6, 6, (B, D)) / 2.0).float(), desc="multiples of 0.5")),
        C("round", self=idx(K, B, D)),
        C("sign", self=In("randn", (B, S, D), put={0: 0, 1: float("nan")},
                          desc="with a 0 and a NaN")),
        C("sign", self=idx(K, B, D)),
        C("fmod.Tensor", self=f(B, S, D), other=pos(D)),
        C("fmod.Tensor", self=In("derived", fn=lambda v, r: torch.from_numpy(
            r.integers(-20, 20, (B, D))), desc="integers in [-20, 20)"),
          other=In("derived", fn=lambda v, r: torch.from_numpy(
              r.choice([-3, 2, 5], (D,))), desc="divisors of both signs")),
        C("remainder.Tensor", self=f(B, S, D), other=In("derived", fn=lambda v, r:
            torch.from_numpy(r.choice([-1.5, 0.75, 2.0], (S, D))).float(),
            desc="divisors of both signs")),
        C("remainder.Tensor", self=In("derived", fn=lambda v, r: torch.from_numpy(
            r.integers(-20, 20, (B, D))), desc="integers in [-20, 20)"),
          other=In("derived", fn=lambda v, r: torch.from_numpy(
              r.choice([-3, 2, 5], (D,))), desc="divisors of both signs")),
        C("cos", self=f(S, D)),
        C("sin", self=f(B, S, D)),
        C("sigmoid", self=f(B, S, D)),
        C("sigmoid_backward", grad_output=f(B, S, D), output=pos(B, S, D)),
        C("relu", self=f(B, S, D)),
        C("hardtanh", self=f(B, S, D), min_val=0.0, max_val=0.5),
        C("tanh", self=f(B, S, D)),
        C("tanh_backward", grad_output=f(B, S, D), output=f(B, S, D)),
        C("tanh_backward", grad_output=f(B, S, D), output=f(D)),
        C("clone", self=f(B, D)),
        C("detach", self=f(B, D)),
        C("_to_copy", self=f(B, D), dtype=Dt("i64")),
        C("_to_copy", self=idx(K, B, S, D), dtype=Dt("f32")),
        # Widening: a Partial(sum) passes through (mixed precision's
        # gradient cast; bf16 has no .npy, f32 -> f64 is the same rule).
        C("_to_copy", self=f(B, D), dtype=Dt("f64")),
        C("gelu", self=f(B, S, D), approximate="tanh"),
        C("gelu", self=f(B, D)),
        C("gelu_backward", grad_output=f(B, S, D), self=f(B, S, D), approximate="tanh"),
        C("gelu_backward", grad_output=f(B, D), self=f(B, D)),
        C("silu", self=f(B, S, D)),
        C("silu", self=f(B, D)),
        C("silu_backward", grad_output=f(B, S, D), self=f(B, S, D)),
        C("silu_backward", grad_output=f(D), self=f(B, D)),
        C("lerp.Scalar", self=f(B, S, D), end=f(D), weight=0.1),
        C("lerp.Scalar", self=f(B, D), end=f(B, D), weight=0.75),
        C("where.self", condition=mask(S, D), self=f(B, S, D), other=f(D)),
        C("where.self", condition=mask(B, 1), self=f(B, D), other=f()),
        C("eq.Scalar", self=idx(3, B, S), other=1),
        C("eq.Scalar", self=f(B, D), other=0.5),
        C("ne.Scalar", self=idx(3, B, S), other=1),
        C("lt.Scalar", self=f(B, D), other=0.25),
        C("le.Scalar", self=idx(K, B, D), other=2.5),
        C("gt.Scalar", self=idx(K, B, S), other=3),
        C("ge.Scalar", self=f(B, S, D), other=0),
        C("logical_not", self=mask(B, S, D)),
        C("logical_not", self=idx(2, B, D)),
        C("triu", self=f(S, S), diagonal=1),
        C("triu", self=f(B, S, S)),
        C("triu", self=f(N, K), diagonal=-1),
        C("native_dropout_backward", grad_output=f(B, S, D), mask=mask(B, S, D),
          scale=1.1111111111111112),
        # Factories. A finite fill: spmd-run's check reads -inf - -inf as a mismatch.
        C("ones_like", self=f(B, D)),
        C("ones_like", self=f(B, S, D), dtype=Dt("i64")),
        C("full", size=[S, S], fill_value=-3.5, dtype=Dt("f32")),
        C("full", size=[B, D], fill_value=7, dtype=Dt("i64")),
        C("full_like", self=f(B, S, D), fill_value=-2.5),
        C("full_like", self=f(B, D), fill_value=3, dtype=Dt("i64")),
        C("arange.start_step", start=0, end=K, step=1, dtype=Dt("i64")),
        C("arange.start_step", start=-1.5, end=K, step=0.5, dtype=Dt("f32")),
        C("arange", end=K, dtype=Dt("i64")),
        C("arange", end=K - 0.5, dtype=Dt("f32")),
        # Linear algebra: Linear fwd/bwd, attention scores with a broadcast mask.
        C("mm", self=f(B, K), mat2=f(K, N)),
        C("addmm", self=f(N), mat1=f(B, K), mat2=f(K, N)),
        C("addmm", self=f(B, N), mat1=f(B, K), mat2=f(K, N), beta=0.5, alpha=2.0),
        C("bmm", self=f(B, S, K), mat2=f(B, K, N)),
        C("baddbmm", self=f(1, S, N), batch1=f(B, S, K), batch2=f(B, K, N), alpha=0.25),
        C("baddbmm", self=f(B, S, N), batch1=f(B, S, K), batch2=f(B, K, N), beta=0.5),
        # Views: flatten [B,S,D] -> [B*S,D], split it back, split/merge heads.
        C("view", self=f(B, S, D), size=[-1, D]),
        C("view", self=f(B, S, 2 * P), size=[B, S, 2, P]),
        C("view", self=f(B, S, 2, P), size=[B, S, -1]),
        C("_unsafe_view", self=f(B * S, D), size=[B, S, D]),
        C("_reshape_alias", self=f(B, S, D), size=[B * S, D], stride=[D, 1]),
        C("t", self=f(K, N)),
        C("t", self=f(D)),
        C("transpose.int", self=f(B, S, D), dim0=-2, dim1=-1),
        C("transpose.int", self=f(B, S, D), dim0=0, dim1=1),
        C("permute", self=f(B, S, D), dims=[2, 0, 1]),
        C("squeeze.dims", self=f(B, 1, D, 1), dim=[1, -1]),
        C("squeeze.dims", self=f(1, 1, D), dim=[0, 1]),
        C("select.int", self=f(B, S, 3 * P), dim=-1, index=P),
        C("select.int", self=f(3, B, S, D), dim=0, index=-1),
        # Slices (normalized bounds), their scatter, padding and indexing:
        # the language models' label shift, rotary halves, masks, positions.
        C("slice.Tensor", self=f(B, S, D), dim=1, start=1, end=S),
        C("slice.Tensor", self=f(B, S, 2 * P), dim=-1, start=0, end=P),
        C("slice.Tensor", self=f(K, D), dim=0, start=1, end=K, step=2),
        C("slice_scatter", self=f(B, S, 2 * P), src=f(B, S, P), dim=2, start=P, end=2 * P),
        C("slice_scatter", self=f(K, D), src=f(K // 2, D), dim=0, start=0, end=K, step=2),
        C("constant_pad_nd", self=idx(K, B, S), pad=[0, 1], value=-100),
        C("constant_pad_nd", self=f(B, S, D), pad=[1, 2, 0, 1], value=0),
        C("constant_pad_nd", self=f(B, S, D), pad=[-1, 1], value=0.5),
        C("cumsum", self=idx(2, B, S), dim=-1),
        C("cumsum", self=f(B, S, D), dim=1),
        C("cumsum", self=mask(B, S), dim=1, dtype=Dt("i32")),
        C("gather", self=f(B, S, D), dim=1, index=idx(S, B, 2, D)),
        C("gather", self=idx(K, 1, V), dim=1, index=idx(V, 1, S)),
        C("scatter.src", self=f(N, C_), dim=1, index=In(
            "derived", fn=lambda v, r: torch.topk(torch.from_numpy(
                r.standard_normal((N, C_))), 2)[1], desc="topk indices"), src=f(N, 3)),
        C("scatter.src", self=f(B, S, D), dim=1, index=idx(S, B, 3, D),
          src=f(B, 4, D)),
        C("scatter_add", self=f(B, S, D), dim=1, index=idx(S, B, 5, D), src=f(B, 5, D)),
        C("scatter_add", self=idx(K, K, 2), dim=0, index=idx(K, 2 * K, 2), src=idx(9, 2 * K, 2)),
        C("sort.stable", self=f(B, S, D), stable=False, dim=1),
        C("sort.stable", self=In("derived", fn=lambda v, r: torch.from_numpy(
            r.integers(0, 3, (N, C_))), desc="integers with ties"), stable=True, dim=0,
          descending=True),
        C("topk", self=f(B, S, D), k=3),
        C("topk", self=f(N, C_), k=2, dim=0, largest=False),
        C("topk", k=V, dim=1, self=In("derived", fn=lambda v, r: torch.from_numpy(
            np.stack([r.permutation(V) for _ in range(B)])), desc="permutations")),
        C("index.Tensor", self=mask(B, S), indices=[idx(B, B, 1, 1, 1), idx(S, 1, 1, 1, S)]),
        C("index.Tensor", self=f(K, D), indices=[idx(K, B, S, put={0: -1})]),
        C("index.Tensor", self=f(B, S, D), indices=[idx(B, N), idx(S, N)]),
        C("unsqueeze", self=f(B, D), dim=-1),
        C("unsqueeze", self=f(B, D), dim=0),
        C("expand", self=f(D), size=[S, -1]),
        C("expand", self=f(B, 1, D), size=[-1, S, -1]),
        C("cat", tensors=[f(B, D), f(K, D)]),
        C("cat", tensors=[f(B, S, D), f(B, S, P)], dim=-1),
        C("split.Tensor", self=f(B, S, 3 * P), split_size=P, dim=-1),
        C("split.Tensor", self=f(K, D), split_size=4),
        C("split_with_sizes", self=f(B, S, 3 * P), split_sizes=[P, 2 * P], dim=-1),
        C("split_with_sizes", self=f(K * D), split_sizes=[D, (K - 1) * D]),
        # Reductions.
        C("sum", self=f(B, D)),
        C("sum", self=f(B, S, D), dtype=Dt("f64")),
        C("sum.dim_IntList", self=f(B, S, D), dim=[0, 1]),
        C("sum.dim_IntList", self=f(B, S, D), dim=[-1], keepdim=True),
        C("sum.dim_IntList", self=f(B, D), dim=[0], keepdim=False),
        C("sum.dim_IntList", self=f(B, D), dim=[], keepdim=True),
        C("any.dim", self=mask(B, S, D), dim=1),
        C("any.dim", self=mask(B, D), dim=-1, keepdim=True),
        C("mean.dim", self=f(B, S, D), dim=[-1]),
        C("mean.dim", self=f(B, S, D), dim=[0, 1], keepdim=True),
        C("mean.dim", self=f(B, D), dim=[], dtype=Dt("f64")),
        C("amax", self=f(B, S, D), dim=[1]),
        C("amax", self=f(B, S, D), dim=[0, 2], keepdim=True),
        C("amax", self=f(B, D)),
        # Softmax family: attention over the last dim, log-probs over classes.
        C("_softmax", self=f(B, S, S), dim=-1, half_to_float=False),
        C("_softmax", self=f(N, C_), dim=0, half_to_float=False),
        C("_log_softmax", self=f(N, C_), dim=1, half_to_float=False),
        C("_softmax_backward_data", grad_output=f(B, S, S), output=soft(False, -1, B, S, S),
          dim=-1, input_dtype=Dt("f32")),
        C("_log_softmax_backward_data", grad_output=f(N, C_), output=soft(True, 1, N, C_),
          dim=1, input_dtype=Dt("f32")),
        # Layer norm; mean and rstd of the backward are PyTorch's of the input.
        C("native_layer_norm", input=f(B, S, D), weight=f(D), bias=f(D),
          normalized_shape=[D], eps=1e-5),
        C("native_layer_norm", input=f(B, S, D), normalized_shape=[S, D], eps=1e-5),
        C("native_layer_norm_backward", grad_out=f(B, S, D), input=f(B, S, D),
          mean=ln_stat([D], 1), rstd=ln_stat([D], 2), weight=f(D), bias=f(D),
          normalized_shape=[D], output_mask=[True, True, True]),
        C("native_layer_norm_backward", grad_out=f(B, S, D), input=f(B, S, D),
          mean=ln_stat([S, D], 1), rstd=ln_stat([S, D], 2), weight=f(S, D),
          normalized_shape=[S, D], output_mask=[True, True, False],
          drop={2: "output_mask[2] is false: PyTorch returns no grad_bias"}),
        # Scaled-dot-product attention [batch, heads, length, head size]:
        # L != S both ways, causal (top-left) and not, masks 2-D and 4-D.
        C("_scaled_dot_product_flash_attention_for_cpu", query=f(B, N, S, P),
          key=f(B, N, K, P), value=f(B, N, K, P)),
        C("_scaled_dot_product_flash_attention_for_cpu", query=f(B, N, S, P),
          key=f(B, N, S, P), value=f(B, N, S, P), is_causal=True),
        C("_scaled_dot_product_flash_attention_for_cpu", query=f(B, N, K, P),
          key=f(B, N, S, P), value=f(B, N, S, P), is_causal=True, scale=0.5),
        C("_scaled_dot_product_flash_attention_for_cpu", query=f(B, N, S, P),
          key=f(B, N, K, P), value=f(B, N, K, P), attn_mask=f(S, K)),
        C("_scaled_dot_product_flash_attention_for_cpu", query=f(B, N, S, P),
          key=f(B, N, K, P), value=f(B, N, K, P), is_causal=True,
          attn_mask=f(B, 1, S, K)),
        C("_scaled_dot_product_flash_attention_for_cpu_backward", grad_out=f(B, N, S, P),
          query=f(B, N, S, P), key=f(B, N, K, P), value=f(B, N, K, P),
          out=sdpa_out(0, False), logsumexp=sdpa_out(1, False), dropout_p=0.0,
          is_causal=False),
        C("_scaled_dot_product_flash_attention_for_cpu_backward", grad_out=f(B, N, K, P),
          query=f(B, N, K, P), key=f(B, N, S, P), value=f(B, N, S, P),
          out=sdpa_out(0, True, 0.5), logsumexp=sdpa_out(1, True, 0.5), dropout_p=0.0,
          is_causal=True, scale=0.5),
        C("_scaled_dot_product_flash_attention_for_cpu_backward", grad_out=f(B, N, S, P),
          query=f(B, N, S, P), key=f(B, N, K, P), value=f(B, N, K, P),
          out=sdpa_out(0, True, m=(B, 1, S, K)), logsumexp=sdpa_out(1, True, m=(B, 1, S, K)),
          attn_mask=In("derived", fn=lambda v, r: amask(B, 1, S, K), desc="mask"),
          dropout_p=0.0, is_causal=True),
        # Convolution [batch, channels, spatial...]: 2-D with stride,
        # padding and dilation and a bias, 1-D, grouped (groups of 2
        # channels), depthwise with 2 outputs per channel; max pooling with
        # padding and ceil_mode. Its backward's indices are PyTorch's.
        C("convolution", input=f(B, C_, 6, 5), weight=f(D, C_, 3, 3), bias=f(D),
          stride=[2, 1], padding=[1, 0], dilation=[1, 2], transposed=False,
          output_padding=[0, 0], groups=1),
        C("convolution", input=f(B, C_, 9), weight=f(D, C_, 3), stride=[2],
          padding=[1], dilation=[1], transposed=False, output_padding=[0], groups=1),
        C("convolution", input=f(B, 2 * C_, 5, 5), weight=f(2 * C_, 2, 3, 3), bias=f(2 * C_),
          stride=[1, 1], padding=[1, 1], dilation=[1, 1], transposed=False,
          output_padding=[0, 0], groups=C_),
        C("convolution", input=f(B, C_, 5, 5), weight=f(2 * C_, 1, 3, 3),
          stride=[2, 2], padding=[1, 1], dilation=[1, 1], transposed=False,
          output_padding=[0, 0], groups=C_),
        C("convolution_backward", grad_output=f(B, D, 3, 1), input=f(B, C_, 6, 5),
          weight=f(D, C_, 3, 3), bias_sizes=[D], stride=[2, 1], padding=[1, 0],
          dilation=[1, 2], transposed=False, output_padding=[0, 0], groups=1,
          output_mask=[True, True, False], keep=2),
        C("convolution_backward", grad_output=f(B, 2 * C_, 5, 5), input=f(B, 2 * C_, 5, 5),
          weight=f(2 * C_, 2, 3, 3), stride=[1, 1], padding=[1, 1],
          dilation=[1, 1], transposed=False, output_padding=[0, 0], groups=C_,
          output_mask=[True, True, False], keep=2),
        C("max_pool2d_with_indices", self=f(B, C_, 7, 6), kernel_size=[3, 3], stride=[2, 2],
          padding=[1, 1], dilation=[1, 1], ceil_mode=False),
        C("max_pool2d_with_indices", self=f(C_, 5, 5), kernel_size=[2, 2], stride=[],
          padding=[0, 0], dilation=[1, 1], ceil_mode=True),
        C("max_pool2d_with_indices_backward", grad_output=f(B, C_, 4, 3), self=f(B, C_, 7, 6),
          kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], dilation=[1, 1], ceil_mode=False,
          indices=In("derived", fn=lambda v, r: torch.ops.aten.max_pool2d_with_indices(
              v["self"], [3, 3], [2, 2], [1, 1])[1], desc="indices of self")),
        C("avg_pool2d", self=f(B, C_, 7, 6), kernel_size=[3, 3], stride=[2, 2],
          padding=[1, 1], ceil_mode=True, count_include_pad=False),
        C("avg_pool2d", self=f(C_, 5, 4), kernel_size=[2, 2], stride=[], padding=[1, 0],
          divisor_override=3),
        C("avg_pool2d_backward", grad_output=f(B, C_, 4, 4), self=f(B, C_, 7, 6),
          kernel_size=[3, 3], stride=[2, 2], padding=[1, 1], ceil_mode=True,
          count_include_pad=True, divisor_override=None),
        C("_adaptive_avg_pool2d", self=f(B, C_, 7, 5), output_size=[3, 2]),
        C("_adaptive_avg_pool2d_backward", grad_output=f(B, C_, 3, 2), self=f(B, C_, 7, 5)),
        # Embedding: indices in [0, V).
        C("embedding", weight=f(V, D), indices=idx(V, B, S)),
        C("embedding", weight=f(V, D), indices=idx(V, K, dtype="int32", put={0: 0}),
          padding_idx=0),
        C("embedding_dense_backward", grad_output=f(B, S, D), indices=idx(V, B, S),
          num_weights=V, padding_idx=-1, scale_grad_by_freq=False),
        C("embedding_dense_backward", grad_output=f(K, D),
          indices=idx(V, K, dtype="int32", put={0: 0}), num_weights=V, padding_idx=0,
          scale_grad_by_freq=True),
        # NLL loss on log-probs [N, C], int64 targets in [0, C) and one -100.
        C("nll_loss_forward", self=logp(N, C_), target=target(), reduction=1, ignore_index=-100),
        C("nll_loss_forward", self=logp(N, C_), target=target(), reduction=2, ignore_index=-100),
        C("nll_loss_forward", self=logp(N, C_), target=target(), reduction=0, ignore_index=-100,
          drop=undefined),
        C("nll_loss_forward", self=logp(N, C_), target=target(), weight=pos(C_), reduction=1,
          ignore_index=-100),
        C("nll_loss_backward", grad_output=f(), self=logp(N, C_), target=target(),
          total_weight=total_weight(1), reduction=1, ignore_index=-100),
        C("nll_loss_backward", grad_output=f(), self=logp(N, C_), target=target(),
          total_weight=total_weight(2), reduction=2, ignore_index=-100),
        C("nll_loss_backward", grad_output=f(N), self=logp(N, C_), target=target(),
          total_weight=total_weight(0), reduction=0, ignore_index=-100),
        C("nll_loss_backward", grad_output=f(), self=logp(N, C_), target=target(),
          weight=pos(C_), total_weight=total_weight(1), reduction=1, ignore_index=-100),
    ]

#===----------------------------------------------------------------------===#
# Attributes, types and ops in MLIR; the op in PyTorch
#===----------------------------------------------------------------------===#


def decode_attr(v):
    """cases.json's attribute: a dtype is {"dtype": "f32"}."""
    return Dt(v["dtype"]) if isinstance(v, dict) else v


def mlir_float(v):
    """An MLIR float literal: it needs a '.' before any exponent."""
    s = repr(float(v))
    assert re.fullmatch(r"-?[0-9.]+(e[-+]?[0-9]+)?", s), "not a finite float: %r" % v
    if "." not in s:
        s = s.replace("e", ".0e") if "e" in s else s + ".0"
    return s


def mlir_attr(v):
    if isinstance(v, Dt):
        return v.name
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return "%d : i64" % v
    if isinstance(v, float):
        return mlir_float(v) + " : f64"
    if isinstance(v, str):
        return json.dumps(v)
    assert isinstance(v, list), v
    if v and all(isinstance(x, bool) for x in v):
        return "array<i1: %s>" % ", ".join(mlir_attr(x) for x in v)
    return "array<i64%s>" % "".join((": " if i == 0 else ", ") + str(x) for i, x in enumerate(v))


def tensor_type(shape, dtype):
    return "tensor<%s%s>" % ("".join("%dx" % d for d in shape), NP_DTYPES[dtype])


def op_text(case, operands, results, extra=None):
    """`<results> = aten.<op> <operands> {attrs} : (types) -> types`."""
    keywords = KEYWORD_OPERANDS.get(case["op"], ())
    text = ""
    for o, v in zip(case["operands"], operands):
        text += (" %s %s" % (o["name"], v)) if o["name"] in keywords else \
            ((", " if text else " ") + v)
    given = dict(DIALECT_NONE.get(case["op"], {}))
    given.update({k: v for k, v in case["attrs"].items() if v is not None or k not in given})
    attrs = [(k, mlir_attr(decode_attr(v))) for k, v in given.items()]
    attrs += list((extra or {}).items())
    if attrs:
        text += " {%s}" % ", ".join("%s = %s" % kv for kv in attrs)
    rtypes = [r["type"] for r in case["results"]]
    rtext = rtypes[0] if len(rtypes) == 1 else "(%s)" % ", ".join(rtypes)
    return "%s = aten.%s%s : (%s) -> %s" % (results, case["op"], text, ", ".join(
        o["type"] for o in case["operands"]), rtext)


def run_torch(op, names, tensors, attrs, wide=False):
    """torch.ops.aten.<op> on operands and attributes given by schema name, in
    float64 with `wide` (float operands and float dtype attributes widened).
    Returns the list of results (None where PyTorch returns none)."""
    packet, _, name = op.partition(".")
    overload = getattr(getattr(torch.ops.aten, packet), name or "default")
    schema = overload._schema.arguments
    lists = {a.name for a in schema if str(a.type).startswith("List[")}
    values = {}
    for name, t in zip(names, tensors):
        t = t.double() if wide and t.is_floating_point() else t
        if name in lists:  # cat's tensors, index's indices
            values.setdefault(name, []).append(t)
        else:
            values[name] = t
    for name, v in attrs.items():
        if isinstance(v, Dt):
            v = torch.float64 if wide and v.name == "f32" else TORCH_DTYPES[v.name]
        values[name] = v
    positional = [a for a in schema if not a.kwarg_only]
    last = max([i for i, a in enumerate(positional) if a.name in values], default=-1)
    args = [values.pop(a.name) if a.name in values else
            (a.default_value if a.has_default_value() else None) for a in positional[:last + 1]]
    kwargs = {a.name: values.pop(a.name) for a in schema if a.kwarg_only and a.name in values}
    assert not values, "%s: no schema argument named %s" % (op, sorted(values))
    out = overload(*args, **kwargs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def references(out, case):
    """PyTorch's results of the case in float32 and in float64, as arrays."""
    names = [o["name"] for o in case["operands"]]
    attrs = {k: decode_attr(v) for k, v in case["attrs"].items()}
    tensors = [torch.from_numpy(np.load(os.path.join(out, o["file"]))) for o in case["operands"]]
    return [[None if r is None else r.detach().contiguous().numpy()
             for r in run_torch(case["op"], names, tensors, attrs, wide)[:case.get("keep")]]
            for wide in (False, True)]

#===----------------------------------------------------------------------===#
# Phase 1: cases
#===----------------------------------------------------------------------===#


def check_coverage(cases):
    """Every op of the dialect is in the table or skipped, and nothing else."""
    if not os.path.exists(ATEN_OPS):
        print("op_matrix: note: %s not found; op coverage not checked" % ATEN_OPS,
              file=sys.stderr)
        return
    sys.path.insert(0, os.path.dirname(ATEN_OPS))
    from aten_ops import OPS
    dialect = {op.name for op in OPS}
    covered = {c["op"] for c in cases} | set(SKIPPED)
    assert dialect == covered, "ops without a case: %s; cases of unknown ops: %s" % (
        sorted(dialect - covered), sorted(covered - dialect))


def matches_only(op, only):
    return not only or op in only or "aten." + op in only


def skipped_text(only):
    by_reason = {}
    for op, why in SKIPPED.items():
        if matches_only(op, only):
            by_reason.setdefault(why, []).append(op)
    parts = ["%s (%s)" % (", ".join(ops), why) for why, ops in by_reason.items()]
    return "%d skipped%s" % (sum(map(len, by_reason.values())),
                             (": " + "; ".join(parts)) if parts else "")


def mesh_text(mesh):
    shape, names = MESHES[mesh]
    return "spmd.mesh @mesh shape = %s names = %s" % (json.dumps(shape), json.dumps(names))


def in_part(op, ops, part):
    """Whether `op` is in part K of N (`part` "K/N", 1-based) of `ops`, the
    distinct ops in table order: a matrix too large for one program (each
    rank JIT-compiles it) runs as N programs."""
    if not part:
        return True
    k, n = (int(x) for x in part.split("/"))
    return ops.index(op) % n == k - 1


def phase_cases(a):
    table = build_cases(SIZES[a.sizes])
    check_coverage(table)
    ops = list(dict.fromkeys(spec["op"] for spec in table))
    os.makedirs(os.path.join(a.out, "inputs"), exist_ok=True)
    cases, lines = [], [mesh_text(a.mesh), ""]
    for seed, spec in enumerate(table):
        if not matches_only(spec["op"], a.only) or not in_part(spec["op"], ops, a.part):
            continue
        i = len(cases)
        rng = np.random.default_rng(seed)
        earlier, tensors, operands = {}, [], []
        for n, (name, make) in enumerate(spec["operands"]):
            value = make.make(rng, earlier)
            tensors.append(torch.from_numpy(value))
            earlier[name] = tensors[-1]
            file = "inputs/case_%d.in%d.npy" % (i, n)
            np.save(os.path.join(a.out, file), value)
            operands.append({"name": name, "shape": list(value.shape), "dtype": str(value.dtype),
                             "type": tensor_type(value.shape, str(value.dtype)),
                             "file": file, "generator": make.desc})
        outs = run_torch(spec["op"], [o["name"] for o in operands], tensors,
                         spec["attrs"])[:spec["keep"]]
        results = []
        for k, r in enumerate(outs):
            if r is None:  # only layer-norm backward's masked grads: [normalized_shape]
                assert k in spec["drop"], "%s: result %d is None" % (spec["op"], k)
                shape, dtype = spec["attrs"]["normalized_shape"], "float32"
            else:
                shape, dtype = list(r.shape), str(r.dtype)[6:]
            results.append({"shape": shape, "dtype": dtype, "type": tensor_type(shape, dtype),
                            "drop": spec["drop"].get(k)})
        case = {"func": "case_%d" % i, "op": spec["op"], "seed": seed, "operands": operands,
                "attrs": {k: {"dtype": v.name} if isinstance(v, Dt) else v
                          for k, v in spec["attrs"].items()},
                "results": results, "keep": spec["keep"]}
        cases.append(case)
        args = ", ".join("%%a%d: %s" % (n, o["type"]) for n, o in enumerate(operands))
        rtypes = [r["type"] for r in results]
        lines.append("func.func @%s(%s) -> (%s) {" % (case["func"], args, ", ".join(rtypes)))
        rname = "%r" if len(results) == 1 else "%%r:%d" % len(results)
        lines.append("  " + op_text(case, ["%%a%d" % n for n in range(len(operands))], rname))
        refs = ["%r"] if len(results) == 1 else ["%%r#%d" % k for k in range(len(results))]
        lines.append("  return %s : %s" % (", ".join(refs), ", ".join(rtypes)))
        lines.append("}")
    with open(os.path.join(a.out, "cases.mlir"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(a.out, "cases.json"), "w") as f:
        json.dump({"mesh": a.mesh, "sizes": a.sizes, "skipped": SKIPPED, "cases": cases}, f,
                  indent=1)
        f.write("\n")
    print("op_matrix: %d cases of %d ops (%s)" % (
        len(cases), len({c["op"] for c in cases}), skipped_text(a.only)))

#===----------------------------------------------------------------------===#
# Phase 2: expand
#===----------------------------------------------------------------------===#

PLACEMENT = re.compile(r"replicate|shard<(\d+)>|strided_shard<(\d+),\s*(\d+)>|"
                       r"partial<(sum|avg|max|min)>")


def parse_placements(text, where):
    """`[p, p] [p, p]` -> [[p, p], [p, p]], each p canonical text."""
    assert re.fullmatch(r"(\s*\[[^\[\]]*\])*\s*", text), "%s: malformed lists %r" % (where, text)
    lists = []
    for body in re.findall(r"\[([^\[\]]*)\]", text):
        items = [s.strip() for s in re.split(r",(?![^<]*>)", body)] if body.strip() else []
        placements = []
        for item in items:
            m = PLACEMENT.fullmatch(item)
            assert m, "%s: unknown placement %r" % (where, item)
            placements.append(
                "strided_shard<%s, %s>" % (m.group(2), m.group(3)) if m.group(2) else item)
        lists.append(placements)
    return lists


def parse_strategies(path):
    """The printer's output -> {func: (op, [(k, operand lists, result lists)])}."""
    table, current = {}, None
    with open(path) as f:
        for number, line in enumerate(f, 1):
            where = "%s:%d" % (path, number)
            line = line.rstrip("\n")
            if not line.strip():
                continue
            header = re.fullmatch(r"@(\S+) (aten\.\S+)", line)
            strategy = re.fullmatch(r"\s+(\d+):(.*)->(.*)", line)
            if header:
                assert header.group(1) not in table, "%s: %s twice" % (where, header.group(1))
                current = table[header.group(1)] = (header.group(2), [])
            elif strategy and current:
                k = int(strategy.group(1))
                assert k == len(current[1]), "%s: strategy %d out of order" % (where, k)
                current[1].append((k, parse_placements(strategy.group(2), where),
                                   parse_placements(strategy.group(3), where)))
            else:
                raise AssertionError("%s: unexpected line %r" % (where, line))
    return table


def check_strategy(case, k, ins, outs, mesh_rank):
    where = "@%s aten.%s strategy %d" % (case["func"], case["op"], k)
    assert len(ins) == len(case["operands"]) and len(outs) == len(case["results"]), \
        "%s: %d operand and %d result lists for %d operands and %d results" % (
            where, len(ins), len(outs), len(case["operands"]), len(case["results"]))
    for lists, values in ((ins, case["operands"]), (outs, case["results"])):
        for placements, v in zip(lists, values):
            assert len(placements) == mesh_rank, "%s: %s on a rank-%d mesh" % (
                where, placements, mesh_rank)
            for p in placements:
                m = PLACEMENT.fullmatch(p)
                dim = m.group(1) or m.group(2)
                assert dim is None or int(dim) < len(v["shape"]), "%s: %s of a %s" % (
                    where, p, v["type"])


def layout(placements, partial=True):
    ps = [p if partial or not p.startswith("partial") else "replicate" for p in placements]
    return "#spmd.layout<@mesh, [%s]>" % ", ".join(ps)


class Bundle:
    """The bundle spmd-run reads (python/spmd_capture/bundle.py's layout):
    manifest.json, args/<fqn>.npy, results/<fqn>.npy, results64/<fqn>.npy."""

    def __init__(self, directory):
        self.dir = directory
        for sub in ("args", "results", "results64"):
            os.makedirs(os.path.join(directory, sub), exist_ok=True)
        self.manifest = {"format": "spmd-bundle", "version": 1, "function": "train_step",
                         "seed": 0, "random_ops": {}, "args": [], "results": []}

    def add(self, kind, fqn, value, value64=None):
        entries = self.manifest[kind]
        entry = {"index": len(entries), "fqn": fqn, "role": "input" if kind == "args" else
                 "output", "dtype": str(value.dtype), "shape": list(value.shape),
                 "file": "%s/%s.npy" % (kind, fqn), "updates": None}
        np.save(os.path.join(self.dir, entry["file"]), value)
        if value64 is not None:
            entry["file_fp64"] = "results64/%s.npy" % fqn
            np.save(os.path.join(self.dir, entry["file_fp64"]), value64)
        entries.append(entry)

    def write(self):
        with open(os.path.join(self.dir, "manifest.json"), "w") as f:
            json.dump(self.manifest, f, indent=1)
            f.write("\n")


def phase_expand(a):
    with open(os.path.join(a.out, "cases.json")) as f:
        spec = json.load(f)
    assert (spec["mesh"], spec["sizes"]) == (a.mesh, a.sizes), \
        "cases.json is for --mesh %s --sizes %s" % (spec["mesh"], spec["sizes"])
    strategies = parse_strategies(a.strategies)
    cases = {c["func"]: c for c in spec["cases"]}
    unknown = set(strategies) - set(cases)
    assert not unknown, "strategies of functions not in cases.json: %s" % sorted(unknown)
    mesh_rank = len(MESHES[a.mesh][0])
    bundle = Bundle(os.path.join(a.out, "bundle"))
    args, body, results, ops, j = [], [], [], set(), 0
    for case in spec["cases"]:
        if not matches_only(case["op"], a.only):
            continue
        assert case["func"] in strategies, "no strategies printed for @%s" % case["func"]
        op, list_ = strategies[case["func"]]
        assert op == "aten." + case["op"], "@%s is %s, the printer says %s" % (
            case["func"], case["op"], op)
        assert list_, "@%s aten.%s has no strategy" % (case["func"], case["op"])
        ops.add(case["op"])
        inputs = [np.load(os.path.join(a.out, o["file"])) for o in case["operands"]]
        ref32, ref64 = references(a.out, case)
        for k, ins, outs in list_:
            check_strategy(case, k, ins, outs, mesh_rank)
            body.append("  // c%d: @%s aten.%s strategy %d" % (j, case["func"], case["op"], k))
            values = []
            for n, (o, placements, value) in enumerate(zip(case["operands"], ins, inputs)):
                arg = "%%c%d_%d" % (j, n)
                fqn = "c%d.in%d" % (j, n)
                args.append('%s: %s {spmd.fqn = "%s", spmd.role = "input", spmd.layout = %s}' % (
                    arg, o["type"], fqn, layout(placements, partial=False)))
                bundle.add("args", fqn, value)
                if any(p.startswith("partial") for p in placements):
                    # Replicate -> Partial is local: how a Partial operand is made.
                    body.append("  %%c%d_p%d = spmd.redistribute %s : %s from %s to %s" % (
                        j, n, arg, o["type"], layout(placements, partial=False),
                        layout(placements)))
                    arg = "%%c%d_p%d" % (j, n)
                values.append(arg)
            nres = len(case["results"])
            name = "%%c%d_r" % j + ("" if nres == 1 else ":%d" % nres)
            body.append("  " + op_text(case, values, name, {"spmd.strategy": "%d : i64" % k}))
            for n, (r, placements) in enumerate(zip(case["results"], outs)):
                if r["drop"]:  # undefined in PyTorch: not returned, not checked
                    continue
                ref = "%%c%d_r" % j + ("" if nres == 1 else "#%d" % n)
                fqn = "c%d.out%d" % (j, n)
                results.append((ref, '%s {spmd.fqn = "%s", spmd.layout = %s}' % (
                    r["type"], fqn, layout(placements, partial=False)), r["type"]))
                assert list(ref32[n].shape) == r["shape"], "@%s: result %d shape" % (
                    case["func"], n)
                bundle.add("results", fqn, ref32[n], ref64[n])
            j += 1
    lines = [mesh_text(a.mesh), ""]
    lines.append("func.func @train_step(%s)\n    -> (%s) {" % (
        ",\n    ".join(args), ",\n        ".join(r[1] for r in results)))
    lines += body
    lines.append("  return %s : %s" % (", ".join(r[0] for r in results),
                                       ", ".join(r[2] for r in results)))
    lines.append("}")
    with open(os.path.join(a.out, "matrix.mlir"), "w") as f:
        f.write("\n".join(lines) + "\n")
    bundle.write()
    print("op_matrix: %d instances of %d ops (%s)" % (j, len(ops), skipped_text(a.only)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("phase", choices=["cases", "expand"])
    parser.add_argument("--mesh", choices=sorted(MESHES), required=True)
    parser.add_argument("--sizes", choices=sorted(SIZES), required=True)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--strategies", help="expand: spmd-opt --spmd-test-print-strategies")
    parser.add_argument("--only", nargs="+", help="only these ops (e.g. mm or aten.mm)")
    parser.add_argument("--part", help="cases: only part K of N of the ops (K/N, 1-based)")
    a = parser.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.phase == "cases":
        phase_cases(a)
    else:
        if not a.strategies:
            parser.error("expand needs --strategies")
        phase_expand(a)


if __name__ == "__main__":
    main()
