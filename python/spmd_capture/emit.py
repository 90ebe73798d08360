"""Write a traced step as `func.func @train_step` in the `aten` dialect.

Ops are written in MLIR's generic syntax straight from their ATen schema:
tensor arguments become operands (in schema order), the other arguments
become attributes of the same name, and `spmd-opt` then verifies the module
and prints it in the dialect's own syntax. The few spellings that differ from
the traced graph are normalised here:

- dropout's `bernoulli.p` (the functional `bernoulli_`) of an `empty_like(x)`
  is `aten.bernoulli.p` of `x`: only the shape and type are read;
- any other `empty_like(x)` is `full_like(x, 0)`: its contents are
  undefined;
- `add/sub/mul/div.Tensor` with a Python number is the `.Scalar` overload;
- `scalar_tensor(v)` (a 0-dim tensor made from a number, as `where`'s
  backward writes its zero) is a constant;
- `lift_fresh_copy` of a constant is the constant itself, and `alias` (what
  autograd saves of an output) and `detach_` its operand: identities on values,
  as is the functional `copy(dst, src)` of a src of dst's shape and dtype.

Every op of the graph that the dialect lacks is collected, and one error
lists them all with the modules and phases where they occur.

Every op carries the FQN of its module and its phase (forward, loss, backward
or optimizer) as the `spmd.module` and `spmd.phase` attributes, which the
passes read; its location, `loc("<module FQN>")` (`loc("train_step")` for the
top level), is for diagnostics only.
"""
import math
import operator

import torch

from . import CaptureError
from .trace import describe

aten = torch.ops.aten

DTYPES = {torch.float32: "f32", torch.float64: "f64", torch.float16: "f16",
          torch.bfloat16: "bf16", torch.int64: "i64", torch.int32: "i32", torch.bool: "i1"}
# Schema arguments with no meaning in value semantics on one device.
DROPPED_ARGS = {"layout", "device", "pin_memory", "memory_format", "generator", "non_blocking"}
# Scalars the dialect stores as f64 whatever their Python type (Aten_ScaleAttr).
SCALE_ARGS = {"alpha", "beta", "value"}
SCALAR_OVERLOADS = {getattr(aten, op).Tensor: getattr(aten, op).Scalar
                    for op in ("add", "sub", "mul", "div")}
# The same with the number first (decompositions write `rsub(x, n)` as
# `sub(n, x)`): the operands swap; `n + alpha * x` swaps only with alpha 1.
SWAPPED_OVERLOADS = {aten.sub.Tensor: aten.rsub.Scalar, aten.mul.Tensor: aten.mul.Scalar,
                     aten.add.Tensor: aten.add.Scalar}
PASS_THROUGH = {aten.lift_fresh_copy.default, aten.alias.default, aten.detach_.default}
# Factories of uninitialized tensors, emitted as zeros of their shape and
# dtype.
UNINITIALIZED = {aten.empty.memory_format, aten.empty_strided.default,
                 aten.new_empty.default, aten.new_empty_strided.default}
# Modules named per unsupported op in the error.
MAX_PLACES = 4


def op_name(overload):
    """aten::foo.default -> aten.foo, aten::foo.bar -> aten.foo.bar."""
    name, ovl = overload._schema.name.split("::")[1], overload._overloadname
    return "aten." + name + ("" if ovl == "default" else "." + ovl)


def meta(node):
    """The traced value(s) of a node (meta tensors, trace._Record)."""
    return node.meta["val"]


def tensor_type(value, where):
    """`tensor<AxBxf32>` of a tensor."""
    if not isinstance(value, torch.Tensor):
        raise CaptureError("%s is a %s, not a tensor" % (where, type(value).__name__))
    if value.dtype not in DTYPES:
        raise CaptureError("%s has dtype %s, which the aten dialect does not support"
                           % (where, value.dtype))
    return "tensor<%s>" % "x".join([str(d) for d in value.shape] + [DTYPES[value.dtype]])


def fmt_float(value):
    """An f64 literal MLIR parses back to the same double."""
    if not math.isfinite(value):
        return {math.inf: "0x7FF0000000000000", -math.inf: "0xFFF0000000000000"}.get(
            value, "0x7FF8000000000000")
    text = repr(float(value))
    return text if "." in text and "e" not in text else "%.17e" % value


def string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def provenance(node):
    """The `spmd.module` and `spmd.phase` attributes of a node's op, and
    `spmd.replicated` where it computes on whole values."""
    return ["spmd.module = %s" % string(node.meta.get("spmd_fqn", "")),
            "spmd.phase = %s" % string(node.meta.get("spmd_phase", "forward"))] + \
        (["spmd.replicated"] if node.meta.get("spmd_replicated") else [])


def location(node):
    """`loc("<module FQN>")`, the step's own name for the top level."""
    return "loc(%s)" % string(node.meta.get("spmd_fqn", "") or "train_step")


def _array(element, values):
    """A dense array attribute; `array<i64>` when empty."""
    return "array<%s%s>" % (element, ": " + ", ".join(values) if values else "")


def _attribute(arg, value, where):
    """The MLIR attribute of a non-tensor schema argument."""
    ty = str(arg.type).replace("Optional[", "").rstrip("]")
    if isinstance(value, torch.dtype):
        if value not in DTYPES:
            raise CaptureError("%s: dtype %s is not supported" % (where, value))
        return DTYPES[value]
    if ty == "number" and isinstance(value, bool):
        return "%d : i64" % value  # a Scalar True or False is the integer 1 or 0
    if isinstance(value, bool) or ty == "bool":
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        if ty.startswith("List[bool"):
            return _array("i1", ["true" if v else "false" for v in value])
        if all(isinstance(v, int) for v in value):
            return _array("i64", [str(v) for v in value])
    elif isinstance(value, str):
        return string(value)
    elif isinstance(value, int) and ty != "float" and arg.name not in SCALE_ARGS:
        return "%d : i64" % value
    elif isinstance(value, (int, float)):
        return "%s : f64" % fmt_float(float(value))
    raise CaptureError("%s: argument '%s' = %r is not supported" % (where, arg.name, value))


def _filled(name, arg, node):
    """A value for an omitted optional argument the dialect requires."""
    if arg.name == "dtype" and name in ("aten.full", "aten.arange", "aten.arange.start_step",
                                        "aten._to_copy"):
        return meta(node).dtype
    if arg.name == "train" and name == "aten.native_dropout":
        return True  # ATen: train=None means training
    if arg.name == "dim" and name == "aten.sum.dim_IntList":
        return list(range(len(meta(node.args[0]).shape)))
    if arg.name == "divisor_override" and name in ("aten.avg_pool2d",
                                                   "aten.avg_pool2d_backward"):
        return 0  # the dialect's "none" (ATen refuses a divisor of 0)
    return None


def _slice_bounds(node):
    """(dim, start, end, whole) of a slice.Tensor or slice_scatter node:
    start and end normalized as Python slicing does (None, negative and
    out-of-range bounds), `whole` when the slice is all of the dim."""
    bound = dict(zip(("self", "dim", "start", "end", "step") if node.target is aten.slice.Tensor
                     else ("self", "src", "dim", "start", "end", "step"), node.args))
    bound.update(node.kwargs)
    shape = meta(bound["self"]).shape
    dim = bound.get("dim", 0)
    dim = dim + len(shape) if dim < 0 else dim
    size, step = shape[dim], bound.get("step", 1)

    def normalized(value, default):
        if value is None:
            return default
        value = value + size if value < 0 else value
        return min(max(value, 0), size)
    start = normalized(bound.get("start"), 0)
    end = max(normalized(bound.get("end"), size), start)
    return dim, start, end, start == 0 and end == size and step == 1


def _same_type(a, b):
    """Whether nodes `a` and `b` give tensors of one shape and dtype."""
    va, vb = meta(a), getattr(b, "meta", {}).get("val")
    return isinstance(vb, torch.Tensor) and va.shape == vb.shape and va.dtype == vb.dtype


class Emitter:
    """Converts one functional FX graph into the body of @train_step."""

    def __init__(self, dialect_ops):
        self.dialect_ops = dialect_ops
        self.names, self.lines = {}, []
        # empty_like chains that only feed a bernoulli.p (dropout mask)
        self.absorbed = set()
        # Ops the dialect lacks: name -> [(module FQN, phase)], first seen first.
        self.missing = {}

    def unsupported(self, node, what):
        """Records an op the dialect lacks; its results get a name so that
        the walk goes on and finds the others."""
        where = (node.meta.get("spmd_fqn", ""), node.meta.get("spmd_phase", "forward"))
        places = self.missing.setdefault(what, [])
        if where not in places:
            places.append(where)
        self.names[node] = "%%missing%d" % len(self.names)

    def check_missing(self):
        """One error for every op the dialect lacks: one op in one place on
        one line, else a line per op with its modules (and their phases);
        past MAX_PLACES modules a count, so that a deep model's error stays
        readable."""
        if not self.missing:
            return
        if len(self.missing) == 1 and len(next(iter(self.missing.values()))) == 1:
            (what, [(fqn, phase)]), = self.missing.items()
            raise CaptureError("unsupported ATen op %s in %s (%s): the aten dialect has no "
                               "such op" % (what, describe(fqn), phase))
        lines = []
        for what, places in self.missing.items():
            phases = {}
            for fqn, phase in places:
                phases.setdefault(fqn, []).append(phase)
            shown = ["%s (%s)" % (describe(fqn), ", ".join(p))
                     for fqn, p in list(phases.items())[:MAX_PLACES]]
            if len(phases) > MAX_PLACES:
                more = len(phases) - MAX_PLACES
                shown.append("and %d more module%s" % (more, "s" if more > 1 else ""))
            lines.append("  %s in %s" % (what, ", ".join(shown)))
        raise CaptureError("%d ATen ops of the step are unsupported (the aten dialect has no "
                           "such op):\n%s" % (len(self.missing), "\n".join(lines)))

    def value(self, node):
        return self.names[node]

    def emit(self, step):
        graph, gm = step.graph_module.graph, step.graph_module
        for node in graph.nodes:
            src = node.args[0] if node.target is aten.bernoulli.p else None
            while getattr(src, "target", None) is aten.empty_like.default and len(src.users) == 1:
                self.absorbed.add(src)
                src = src.args[0]
        # Any other uninitialized tensor has no defined contents: zeros will
        # do (a tensor every element of which is then written, `inv[perm] =
        # ...`; the buffer an autograd formula fills with new_empty_strided).
        for node in graph.nodes:
            if node.target is aten.empty_like.default and node not in self.absorbed:
                node.target, node.args = aten.full_like.default, (node.args[0], 0)
            elif node.target in UNINITIALIZED and node.users:
                node.target, node.args, node.kwargs = aten.full.default, (
                    list(meta(node).shape), 0), {"dtype": meta(node).dtype}
        args, out = [], None
        for node in graph.nodes:
            if node.op == "placeholder":
                self.names[node] = "%%arg%d" % len(args)
                args.append(node)
            elif node.op == "get_attr":
                self.constant(node, getattr(gm, node.target))
            elif node.target is aten.scalar_tensor.default:
                self.constant(node, torch.scalar_tensor(node.args[0], dtype=meta(node).dtype))
            elif node.op == "output":
                out = node.args[0]
            elif node.target is operator.getitem:
                self.names[node] = "%s#%d" % (self.value(node.args[0]), node.args[1])
            elif node.target in PASS_THROUGH:
                self.names[node] = self.value(node.args[0])
            elif node.target is aten.slice.Tensor and _slice_bounds(node)[3]:
                # A slice of a whole dim (`x[:, :]`) is its input: as an op
                # it would keep a sharded dim from sharding through.
                self.names[node] = self.value(node.args[0])
            elif node.target is aten.copy.default and _same_type(node, node.args[1]):
                # The functional copy_(dst, src) of a like-typed src is src.
                self.names[node] = self.value(node.args[1])
            elif node not in self.absorbed:
                self.op(node)
        self.check_missing()
        return args, out

    def constant(self, node, tensor):
        ty = tensor_type(tensor, "constant '%s'" % node.target)
        if tensor.is_meta and tensor.numel():
            raise CaptureError(
                "a %s constant of shape %s in %s (%s) was made on the meta device and has no "
                "value (--meta builds the model without data): make it a buffer, or capture "
                "without --meta" % (tensor.dtype, tuple(tensor.shape),
                                    describe(node.meta.get("spmd_fqn", "")),
                                    node.meta.get("spmd_phase", "forward")))
        if tensor.numel() == 0:
            data = ""
        elif tensor.dtype == torch.bool:
            data = str(tensor.tolist()).replace("True", "true").replace("False", "false")
        else:
            data = '"0x%s"' % tensor.contiguous().numpy().tobytes().hex().upper() \
                if tensor.dtype != torch.bfloat16 else \
                '"0x%s"' % tensor.view(torch.int16).numpy().tobytes().hex().upper()
        name = "%%c%d" % len(self.lines)
        self.names[node] = name
        self.lines.append('%s = "arith.constant"() <{value = dense<%s> : %s}> {%s} : () -> %s %s'
                          % (name, data, ty, ", ".join(provenance(node)), ty, location(node)))

    def op(self, node):
        target = node.target
        if not isinstance(target, torch._ops.OpOverload):
            return self.unsupported(node, getattr(target, "__name__", str(target)))
        args = node.args
        if target in SCALAR_OVERLOADS and not isinstance(args[1], torch.fx.Node):
            target = SCALAR_OVERLOADS[target]
        elif target in SWAPPED_OVERLOADS and not isinstance(args[0], torch.fx.Node) and (
                target is not aten.add.Tensor or node.kwargs.get("alpha", 1) == 1):
            target, args = SWAPPED_OVERLOADS[target], (args[1], args[0]) + args[2:]
        schema_args = target._schema.arguments
        name = op_name(target)
        what = "%s%s (%s)" % (target._schema.name, "" if target._overloadname == "default"
                              else "." + target._overloadname, name)
        if name not in self.dialect_ops:
            return self.unsupported(node, what)
        where = "%s in %s" % (name, describe(node.meta.get("spmd_fqn", "")))
        bound = dict(zip((a.name for a in schema_args), args))
        bound.update(node.kwargs)
        operands, types, segments, attrs = [], [], [], []
        for arg in schema_args:
            value = bound.get(arg.name, arg.default_value if arg.has_default_value() else None)
            ty = str(arg.type)
            if "Tensor" in ty:
                while isinstance(value, torch.fx.Node) and value in self.absorbed:
                    value = value.args[0]
                tensors = [] if value is None else list(value) if isinstance(value, (list, tuple)) \
                    else [value]
                if any(t is None for t in tensors):
                    return self.unsupported(node, "%s with a None in '%s' (a slice before an "
                                            "indexed dim)" % (what, arg.name))
                if not all(isinstance(t, torch.fx.Node) for t in tensors):
                    return self.unsupported(node, "%s with a number as its tensor '%s'"
                                            % (what, arg.name))
                segments.append(len(tensors))
                for t in tensors:
                    operands.append(self.value(t))
                    types.append(tensor_type(meta(t), where))
                continue
            if arg.name in DROPPED_ARGS:
                continue
            if arg.name in ("start", "end") and name in ("aten.slice.Tensor",
                                                        "aten.slice_scatter"):
                value = _slice_bounds(node)[1 if arg.name == "start" else 2]
            if value is None:
                value = _filled(name, arg, node)
                if value is None:
                    continue
            if arg.name == "dim" and name == "aten.squeeze.dims":
                # Only size-1 dims: the others are no-ops in PyTorch, and a
                # shard of size 1 must not be squeezed on its rank.
                shape = meta(bound["self"]).shape
                value = [d for d in value if shape[d] == 1]
            attrs.append("%s = %s" % (arg.name, _attribute(arg, value, where)))
        if sum(1 for a in schema_args if str(a.type) in ("Optional[Tensor]", "List[Tensor]")) > 1:
            attrs.append("operandSegmentSizes = array<i32: %s>" % ", ".join(map(str, segments)))
        val = meta(node)
        val = val if isinstance(val, (list, tuple)) else [val]
        if node.target is aten.native_layer_norm_backward.default:  # output_mask's None results
            like = [bound["input"]] + [bound[n] if bound[n] is not None else None
                                       for n in ("weight", "bias")]
            shape, dtype = bound["normalized_shape"], meta(bound["input"]).dtype
            val = [v if v is not None else meta(x) if x is not None else
                   torch.empty(shape, dtype=dtype, device="meta") for v, x in zip(val, like)]
        if node.target is aten.convolution_backward.default:
            # The dialect's op has no bias gradient (capture sums
            # grad_output); a gradient output_mask skips is typed as its
            # operand.
            val = [v if v is not None else meta(bound[x])
                   for v, x in zip(val[:2], ("input", "weight"))]
        results = [tensor_type(v, where) for v in val]
        res = "%%%d" % len(self.lines)
        self.names[node] = res
        self.lines.append('%s%s = "%s"(%s)%s {%s} : (%s) -> %s %s' % (
            res, ":%d" % len(results) if len(results) > 1 else "", name, ", ".join(operands),
            " <{%s}>" % ", ".join(attrs) if attrs else "", ", ".join(provenance(node)),
            ", ".join(types), results[0] if len(results) == 1 else "(%s)" % ", ".join(results),
            location(node)))


def _attr_dict(entries):
    return "{%s}" % ", ".join("%s = %s" % kv for kv in entries)


def emit_module(step, dialect_ops):
    """The text of a module holding @train_step (generic op syntax)."""
    emitter = Emitter(dialect_ops)
    placeholders, outputs = emitter.emit(step)
    sig = []
    for node, arg in zip(placeholders, step.args):
        sig.append("%s: %s %s loc(%s)" % (
            emitter.value(node), tensor_type(arg.value, arg.fqn),
            _attr_dict([("spmd.fqn", string(arg.fqn)), ("spmd.role", string(arg.role))]),
            string(arg.fqn)))
    res_types, res_sig = [], []
    for value, res in zip(outputs, step.results):
        ty = tensor_type(meta(value), "result '%s'" % res.fqn)
        res_types.append(ty)
        res_sig.append("%s %s" % (ty, _attr_dict(
            [("spmd.role", string(res.role))] if res.updates is None else
            [("spmd.fqn", string(res.fqn)), ("spmd.updates", "%d : i64" % res.updates)])))
    body = "\n".join("    " + line for line in emitter.lines)
    modules = _attr_dict([(string(fqn), _attr_dict(
        [("classes", "[%s]" % ", ".join(string(c) for c in classes))] + [(k, "%d : i64" % v) for k, v in sorted(attrs.items())]))
        for fqn, classes, attrs in step.modules])
    return ("module {\n  func.func @train_step(%s) -> (%s) attributes {spmd.modules = %s} {\n%s\n"
            "    \"func.return\"(%s) : (%s) -> () loc(\"train_step\")\n"
            "  } loc(\"train_step\")\n} loc(unknown)\n" % (
                ", ".join(sig), ", ".join(res_sig), modules, body,
                ", ".join(emitter.value(v) for v in outputs), ", ".join(res_types)))
