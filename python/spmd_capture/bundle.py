"""PyTorch's own results of the step, and the bundle that holds them.

The reference is one eager step of the factory's nn.Module with torch.optim
(not the traced graph), so a capture that misread the step shows up as a
mismatch. The traced graph is also run on the same values and must agree
with it: that guards the capture itself.

Bundle layout (docs/capture.md):
  manifest.json            positions -> fqn, role, dtype, shape, file
  args/<fqn>.npy           every argument of @train_step
  results/<fqn>.npy        PyTorch's results: `loss`, then the updated values
  results64/<fqn>.npy      the same step in float64 (the exact answer, nearly)

Each result's manifest entry also records its fp32 rounding noise: the
largest distance from the float64 step among PyTorch's fp32 step and
NOISE_DRAWS more under random rounding (_RandomRounding), the allowance
of spmd-run --check and of the trace check.
"""
import collections
import contextlib
import copy
import json
import math
import os

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from . import CaptureError
from .emit import op_name
from .trace import FLOAT64_BY_DECOMPOSITION, Run, forward, loss_of, micro_steps

# Tolerance of the trace check: both sides are fp32 on the same CPU; only
# the order of a few reductions and the optimizer's scalar math differ.
TRACE_RTOL, TRACE_ATOL = 1e-4, 1e-6
# The float64 trace check's: float64 steps of the same math in another
# order, but the graph's scalars are fp32 (lr 0.1 is 0.10000000149): SGD's
# updates move by 1.5e-8 of their magnitude, Adam's by 5e-8.
TRACE64_RTOL, TRACE64_ATOL = 1e-6, 1e-12
# The float64 reference's dtypes, and the wide dtype of each narrower one.
WIDE = (torch.float64, torch.complex128)
NARROW = {torch.float32: torch.float64, torch.float16: torch.float64,
          torch.bfloat16: torch.float64, torch.complex64: torch.complex128}
RANDOM_OPS = {"aten.bernoulli.p", "aten.native_dropout", "aten.uniform", "aten.exponential"}


# Eager fp32 steps under random rounding that estimate each result's noise
# (reference_and_noise), draw k with 2**k roundings' worth of perturbation.
NOISE_DRAWS = 4


class _RandomRounding(TorchDispatchMode):
    """Monte Carlo arithmetic (Parker's random rounding) on ATen's
    kernels: every floating-point tensor an op writes (its fresh results
    and the arguments it updates in place; never a view) is multiplied by
    1 + d, d uniform in [-r eps/2, r eps/2] of its dtype, r `roundings`
    (r = 1: one rounding, 2**-24 in fp32). A step under it is another valid
    fp32 run of the same step, with different roundings: its distance from
    the float64 step is a draw of the fp32 noise. Where the step is chaotic
    (a ReLU whose input is within rounding of zero keeps or drops that
    element's gradient, BatchNorm over a few values), PyTorch's one eager
    run is not enough to know the noise. The draws come from their own generator, so dropout
    masks stay the eager step's."""

    # The factors are windows at random offsets into a pool of POOL
    # independent ones per dtype (drawing fresh ones for every tensor made
    # a draw of ResNet-18's step 6 times slower than the step).
    POOL = 1 << 22

    def __init__(self, seed, roundings=1):
        super().__init__()
        self.generator = torch.Generator().manual_seed(seed)
        self.roundings = roundings
        self.pools = {}

    def _factors(self, dtype, n):
        pool = self.pools.get(dtype)
        if pool is None:
            pool = torch.rand(2 * self.POOL, generator=self.generator)
            pool = self.pools[dtype] = pool.sub_(0.5).mul_(
                self.roundings * torch.finfo(dtype).eps).add_(1)
        if n > self.POOL:
            return pool[:self.POOL].repeat(-(-n // self.POOL))[:n]
        start = int(torch.randint(self.POOL, (), generator=self.generator))
        return pool[start:start + n]

    def _perturb(self, value):
        for t in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() and \
                    t.dtype != torch.float64 and not t.is_meta:
                factors = self._factors(t.dtype, t.numel()).view(t.shape)
                if t.dtype == torch.float32:
                    t.mul_(factors)
                else:
                    t.copy_(factors * t)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        schema = func._schema
        for i, a in enumerate(schema.arguments):
            if a.alias_info is not None and a.alias_info.is_write:
                self._perturb(args[i] if i < len(args) else kwargs.get(a.name))
        returns = out if isinstance(out, tuple) else (out,)
        for r, value in zip(schema.returns, returns):
            if r.alias_info is None:
                self._perturb(value)
        return out


class _Float64Kernels(TorchDispatchMode):
    """Ops whose ATen CPU kernels refuse float64 (_grouped_mm takes fp32,
    bf16 and fp16 only) computed, in the float64 reference step, by spmd's
    own decomposition of them (trace.FLOAT64_BY_DECOMPOSITION), the same
    formula the captured graph runs. A cast of a float64 (complex128) tensor
    to a narrower floating type keeps float64: code that computes a part in
    float32 on purpose (`hidden.float()` before a router whose weight is
    float32) stays in one dtype in the widened copy. A cast of an integer or
    bool tensor to a narrower floating type makes float64 too: ATen's
    float64 kernels compute source positions in float64, and the traced
    decompositions of interpolation write them as `arange(n).to(float32)`
    (a float32 position near 256 is off by 1e-5, a weight as much)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.ops.aten._to_copy.default and kwargs.get("dtype") in NARROW:
            source, target = args[0].dtype, kwargs["dtype"]
            if source in WIDE and source.is_complex == target.is_complex:
                kwargs = dict(kwargs, dtype=source)
            elif source in WIDE or not (source.is_floating_point or source.is_complex):
                kwargs = dict(kwargs, dtype=NARROW[target])
        decomposition = FLOAT64_BY_DECOMPOSITION.get(func)
        if decomposition is not None and any(
                isinstance(a, torch.Tensor) and a.dtype == torch.float64 for a in args):
            out = decomposition(*args, **kwargs)
            if out is not NotImplemented:
                return out
        return func(*args, **kwargs)


class _Float64Graph(_Float64Kernels):
    """_Float64Kernels for a traced graph, whose factories and reductions
    name their dtype: a narrower floating `dtype` argument is widened too
    (`zeros(..., dtype=float32)` makes float64)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not torch.ops.aten._to_copy.default and kwargs.get("dtype") in NARROW:
            kwargs = dict(kwargs, dtype=NARROW[kwargs["dtype"]])
        return super().__torch_dispatch__(func, types, args, kwargs)


class _DrawStrides(TorchDispatchMode):
    """Appends to `strides` the strides of each tensor that a bernoulli_
    call fills (dropout's `empty_like(x)`), in call order."""

    def __init__(self, strides):
        super().__init__()
        self.strides = strides

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.bernoulli_.float:
            self.strides.append(tuple(args[0].stride()))
        return func(*args, **(kwargs or {}))


def redraw(step, seed, eager_draws):
    """Where the eager step's dropout masks (`eager_draws`, eager_step's
    `draws`) were laid out otherwise than the traced graph's (Step.draws),
    reruns the graph for step.outputs drawing in eager's layouts and
    returns them (for traced_float64); else None. PyTorch's generator
    fills in memory order, and eager kernels and PyTorch's decompositions
    can lay a value out differently: ATen's upsampling of a 1x1 map is
    contiguous, the decomposition's channels-last."""
    if len(eager_draws) != len(step.draws) or tuple(eager_draws) == step.draws:
        return None
    torch.manual_seed(seed)
    step.outputs = list(Run(step.graph_module, eager_draws).run(
        *[a.value.clone() for a in step.args]))
    return eager_draws


def traced_float64(step, seed, draws=None):
    """The traced graph's results on float64 copies of the floating-point
    arguments, under _Float64Graph after torch.manual_seed(seed), drawing
    its masks in `draws` (redraw) or the graph's layouts; None where the
    graph does not run that way (an op without a float64 kernel or
    decomposition, a dtype the graph bitcasts)."""
    values = [a.value.double() if a.value.is_floating_point() else a.value.clone()
              for a in step.args]
    torch.manual_seed(seed)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        with _Float64Graph():
            return list(Run(step.graph_module, draws).run(*values))
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return None
    finally:
        torch.set_default_dtype(default)


def eager_step(factory, optimizer, step, seed, float64=False, accumulate=1,
               mixed_precision=None, draws=None):
    """(See _eager_step.) The float64 step runs under _Float64Kernels, with
    float64 the default dtype, so that what the model makes in forward
    follows its copy (XGLM's `torch.full((), finfo(dtype).min)` would not fit
    a float32). `draws`: a list the strides of the step's dropout masks are
    appended to (_DrawStrides)."""
    with _DrawStrides(draws) if draws is not None else contextlib.nullcontext():
        if not float64:
            return _eager_step(factory, optimizer, step, seed, False, accumulate,
                               mixed_precision)
        default = torch.get_default_dtype()
        torch.set_default_dtype(torch.float64)
        try:
            with _Float64Kernels():
                return _eager_step(factory, optimizer, step, seed, True, accumulate,
                                   mixed_precision)
        finally:
            torch.set_default_dtype(default)


def _copy_model(model):
    """A deep copy of `model`. Tensors a forward left on the modules
    (RecurrentGemma's recurrent states, RAFT's list of correlation volumes)
    are not leaves, which deepcopy refuses: the copy shares them detached
    (the next forward replaces them)."""
    left = {id(v): v.detach() for m in model.modules()
            for v in torch.utils._pytree.tree_leaves(list(vars(m).values()))
            if isinstance(v, torch.Tensor) and not v.is_leaf}
    return copy.deepcopy(model, left)


def reference_and_noise(factory, optimizer, step, seed, reference64, accumulate=1,
                        mixed_precision=None, draws=NOISE_DRAWS):
    """PyTorch's fp32 step (eager_step) and each result's fp32 rounding
    noise, in its units: the largest element-wise distance from
    `reference64` among that step and `draws` eager steps under
    _RandomRounding, each on a copy of the factory's model as it was before
    (the reference step, last, updates the model itself). Draw k perturbs
    by 2**k roundings: a ReLU input within one rounding of zero flips in
    about half of the runs, one a few roundings from it only now and then
    (ShuffleNetV2's step: in 1 of 16 one-rounding draws, and in spmd's run
    of it on 3 ranks), and the coarser draws flip those too; where the step
    is not chaotic the noise comes out at most 2**(draws-1) times one
    run's, far below rtol. Returns
    (results, noise): noise one float per result of step.results, 0 for
    integer results."""
    runs = []
    model = factory.model
    for draw in range(draws):
        factory.model = _copy_model(model)
        try:
            with _RandomRounding(seed * 1000003 + draw + 1, roundings=2 ** draw):
                runs.append(_eager_step(factory, optimizer, step, seed, False, accumulate,
                                        mixed_precision))
        finally:
            factory.model = model
    reference = eager_step(factory, optimizer, step, seed, accumulate=accumulate,
                           mixed_precision=mixed_precision)
    # A run that overflows (a draw pushes a router's logits past a top-k
    # tie into an expert that diverges) says nothing about the noise.
    noise = [max([d for d in (_distance(run[i], r64) for run in runs + [reference])
                  if math.isfinite(d)], default=0.0)
             for i, r64 in enumerate(reference64)]
    return reference, noise


def _distance(got, want):
    """Largest element-wise |got - want| of a floating-point result (0 for
    integers and empty tensors)."""
    if not got.is_floating_point() and not got.is_complex() or got.numel() == 0:
        return 0.0
    wide = torch.complex128 if got.is_complex() else torch.float64
    return (got.to(wide) - want.to(wide)).abs().max().item()


def _eager_step(factory, optimizer, step, seed, float64=False, accumulate=1,
                mixed_precision=None):
    """One eager training step; returns the tensors of step.results, in order.
    The factory's model takes the step, or with `float64` a float64 copy of
    it on float64 copies of the floating-point inputs and targets. With
    `accumulate` K: K backward passes of loss / K on the micro-batches of
    step.args, then one optimizer step (PyTorch's gradient accumulation),
    after clip_grad_norm_ when the optimizer clips. With `mixed_precision`
    (trace.MixedPrecision) forward and backward run on the parameters cast
    to its param_dtype (torch.func.functional_call), which is what FSDP2's
    policy computes; the optimizer updates the fp32 parameters."""
    model = factory.model
    def wide(t):
        if float64 and t.is_complex():
            return t.to(torch.complex128)
        return t.double() if float64 and t.is_floating_point() else t
    if float64:
        model = _copy_model(model).double()._apply(wide)
    params, buffers = dict(model.named_parameters()), dict(model.named_buffers())
    opt, clip = optimizer.eager([p for p in params.values() if p.requires_grad])
    values = [wide(a.restored(a.value)) for a in step.args]
    torch.manual_seed(seed)
    opt.zero_grad()
    loss = None
    def call(a, kw):
        if mixed_precision is None:
            return model(*a, **kw)
        cast = mixed_precision.params(params, model)
        with mixed_precision.forward_inputs(model):
            return torch.func.functional_call(model, cast, tuple(a), kw, tie_weights=True)
    for inputs, targets in micro_steps(step.args, accumulate):
        micro = loss_of(factory, forward(factory, call, values, inputs), values, targets)
        if accumulate > 1:
            micro = micro / accumulate
        micro.backward()
        loss = micro.detach() if loss is None else loss + micro.detach()
    if clip:
        clip()
    opt.step()
    results = []
    for result in step.results:
        arg = None if result.updates is None else step.args[result.updates]
        if arg is None:
            results.append(loss)
        elif arg.role == "param":
            results.append(arg.carried(params[arg.fqn]))
        elif arg.role == "buffer":
            results.append(arg.carried(buffers[arg.fqn]))
        else:
            param, _, key = arg.fqn.rpartition(".")
            results.append(arg.carried(opt.state[params[param]][key]))
    return [v.detach().clone() for v in results]


def max_errors(got, want):
    """(max abs error, max relative error) over the elements, in float64."""
    got, want = got.double(), want.double()
    err = (got - want).abs()
    if err.numel() == 0:
        return 0.0, 0.0
    rel = err / want.abs().clamp_min(1e-30)
    return err.max().item(), torch.where(err == 0, torch.zeros_like(rel), rel).max().item()


def tolerance(reference64, noise, rtol=TRACE_RTOL, noise_factor=2):
    """How far an fp32 result may be from the float64 reference: rtol of the
    tensor's magnitude, plus `noise_factor` times its rounding noise
    (reference_and_noise: large where the step amplifies noise, as Adam does
    for gradients that are zero up to rounding)."""
    r64 = reference64.double()
    if r64.numel() == 0:
        return 0.0
    return rtol * r64.abs().max().item() + noise_factor * noise


def adam_allowance(optimizer, moments, moments64, t):
    """Per element, what Adam makes of a deviation of the moments `moments`
    (exp_avg, exp_avg_sq of this run) from the exact `moments64`: twice lr *
    (|dm^| / (sqrt(v^) + eps) + |m^| |dv^| / (2 sqrt(v^) (sqrt(v^) +
    eps)^2)) with bias-corrected moments of the exact step t, Adam's
    first-order error (spmd-run's --check allows the same). Where a gradient
    is zero up to rounding, v^ is near eps^2 and a rounding difference in the
    gradient turns into an update of order lr."""
    (m, v), (m64, v64) = [[x.double() for x in pair] for pair in (moments, moments64)]
    beta1, beta2 = optimizer.betas
    c1, c2 = 1 - beta1 ** t, 1 - beta2 ** t
    mh, vh = m64 / c1, (v64 / c2).clamp_min(0)
    dm, dv = (m - m64).abs() / c1, (v - v64).abs() / c2
    root = vh.sqrt()
    denom = root + optimizer.eps
    second = torch.where(root > 0, mh.abs() * dv / (2 * root.clamp_min(1e-300) * denom ** 2),
                         torch.zeros_like(root))
    return 2 * optimizer.lr * (dm / denom + second)


def check_trace(step, reference, reference64, noise, optimizer, mixed_precision=False,
                traced64=None):
    """Compares the traced graph's results with the eager ones; raises
    CaptureError on a mismatch.

    `traced64` (traced_float64, when the graph runs in float64) is the
    sharp test of what the graph computes: each result must be within
    TRACE64_RTOL of its magnitude of PyTorch's float64 step, where rounding
    is 2**29 times finer than fp32's and a chaotic step (a ReLU flip,
    BatchNorm over a few values) stays within it. The traced fp32 results
    (step.outputs) must then be within tolerance() of the float64 step with
    16 times their rounding `noise` (reference_and_noise), spmd-run
    --check's test. Without `traced64` the fp32 test is the only one and
    takes twice the noise; under mixed precision the traced ops and
    PyTorch's fused eager kernels round bf16 intermediates differently, and
    it takes 16 times. An Adam-updated parameter may also differ by
    `adam_allowance` of its own moments, element by element."""
    index = {r.fqn: i for i, r in enumerate(step.results)}
    counts = [a for a in step.args if a.role == "step"]
    t = counts[0].value.item() + 1 if counts else None

    def within(i, values, like, bound):
        value, want64 = values[i], reference64[i]
        if value.shape != want64.shape or value.dtype != like[i].dtype:
            return False
        err = (value.double() - want64.double()).abs()
        if err.numel() == 0 or err.max().item() <= bound:
            return True
        result = step.results[i]
        keys = [index.get("%s.%s" % (result.fqn, k)) for k in ("exp_avg", "exp_avg_sq")]
        if optimizer.name not in ("adam", "adamw") or t is None or result.updates is None or \
                None in keys:
            return False
        allowance = adam_allowance(optimizer, [values[k] for k in keys],
                                   [reference64[k] for k in keys], t)
        return allowance.shape == err.shape and bool((err <= bound + allowance).all())

    for i, result in enumerate(step.results):
        if traced64 is None or within(i, traced64, reference64, tolerance(
                reference64[i], 0.0, rtol=TRACE64_RTOL) + TRACE64_ATOL):
            continue
        raise CaptureError(
            "the traced step run in float64 does not reproduce PyTorch's float64 step for "
            "'%s' (shape %s vs %s, max abs/rel error %.3g/%.3g): the traced graph computes "
            "something else than the model (a forward that changes from call to call, or a "
            "capture bug)" % (
                result.fqn, tuple(traced64[i].shape), tuple(reference64[i].shape),
                *max_errors(traced64[i], reference64[i])))
    factor = 16 if mixed_precision or traced64 is not None else 2
    for i, result in enumerate(step.results):
        if within(i, step.outputs, reference, tolerance(reference64[i], noise[i],
                                                        noise_factor=factor) +
                  TRACE_ATOL):
            continue
        value, want, want64 = step.outputs[i], reference[i], reference64[i]
        message = ("the traced step does not reproduce PyTorch's eager step for '%s' "
                   "(shape %s vs %s, max abs/rel error %.3g/%.3g" % (
                       result.fqn, tuple(value.shape), tuple(want.shape),
                       *max_errors(value, want)))
        if value.shape == want.shape:
            # Where eager float32 is itself far from float64, the step
            # amplifies rounding (BatchNorm over a few values).
            message += ("; from the float64 step: traced %.3g, PyTorch's float32 %.3g, "
                        "its rounding noise %.3g" % (max_errors(value, want64)[0],
                                                      max_errors(want, want64)[0], noise[i]))
        raise CaptureError(message + ")")


def random_ops(step):
    """Counts of the random ops in the graph, by dialect name."""
    counts = collections.Counter(
        op_name(n.target) for n in step.graph_module.graph.nodes
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload))
    return {name: counts[name] for name in sorted(RANDOM_OPS) if counts[name]}


def _file_names(fqns):
    """`<fqn>.npy`, or `<index>.<fqn>.npy` for all when two would clash."""
    if len(set(fqns)) == len(fqns):
        return ["%s.npy" % f for f in fqns]
    return ["%d.%s.npy" % (i, f) for i, f in enumerate(fqns)]


def _save(path, tensor):
    """fp32 values for bf16/f16 (.npy has no bf16; widening is exact)."""
    array = tensor.float() if tensor.dtype in (torch.bfloat16, torch.float16) else tensor
    np.save(path, array.contiguous().numpy())


def _entry(index, fqn, role, tensor, file):
    return {"index": index, "fqn": fqn, "role": role, "dtype": str(tensor.dtype)[6:],
            "shape": list(tensor.shape), "file": file}


def write_bundle(directory, step, reference, reference64, noise, meta):
    """Writes the .npy files and manifest.json into `directory` (must exist).
    Without `reference` (capture --no-reference) results have no files;
    arguments on the meta device (capture --meta) have none either."""
    manifest = dict(meta, format="spmd-bundle", version=1, function="train_step",
                    random_ops=random_ops(step))
    manifest["args"], manifest["results"] = [], []
    os.makedirs(os.path.join(directory, "args"))
    if reference is not None:
        os.makedirs(os.path.join(directory, "results"))
        os.makedirs(os.path.join(directory, "results64"))
    names = _file_names([a.fqn for a in step.args])
    for i, (arg, name) in enumerate(zip(step.args, names)):
        entry = _entry(i, arg.fqn, arg.role, arg.value, "args/" + name)
        if arg.value.is_meta:  # capture --meta: shapes only
            del entry["file"]
        else:
            _save(os.path.join(directory, "args", name), arg.value)
        manifest["args"].append(entry)
    names = _file_names([r.fqn for r in step.results])
    for i, (res, name) in enumerate(zip(step.results, names)):
        role = "loss" if res.updates is None else "update"
        if reference is None:
            # The traced graph's own outputs give the dtype and shape.
            entry = _entry(i, res.fqn, role, step.outputs[i], None)
            del entry["file"]
        else:
            _save(os.path.join(directory, "results", name), reference[i])
            np.save(os.path.join(directory, "results64", name),
                    reference64[i].contiguous().numpy())
            entry = _entry(i, res.fqn, role, reference[i], "results/" + name)
            entry["file_fp64"] = "results64/" + name
            entry["noise"] = noise[i]
        entry["updates"] = res.updates
        manifest["results"].append(entry)
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
