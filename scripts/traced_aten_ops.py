#!/usr/bin/python3
"""List the ATen ops PyTorch 1.13 traces for our reference training steps and
check that the `aten` dialect (AtenOps.td) defines each of them.

Each config is a whole training step (forward, loss, torch.autograd.grad, then
functional SGD / SGD+momentum / Adam) of a small model, traced in two stages:
g = make_fx(step) records autograd's backward ops but keeps views and in-place
updates; make_fx(functionalize(Interpreter(g).run, remove='mutations_and_views'))
gives the functional graph the dialect must cover. Op names follow the dialect:
`aten.<op>` for `.default`, else `aten.<op>.<overload>`; `<view>_copy` maps back
to the view op, the dropout mask `empty_like` + `bernoulli_.float` to
`aten.bernoulli.p`, add/sub/mul/div `.Tensor` on a Python number to `.Scalar`.

Usage (Debian's /usr/bin/python3 has torch 1.13):  traced_aten_ops.py --print
(sorted names, one per line) | --check AtenOps.td (exit 1 if any op is missing)
"""
import argparse
import itertools
import operator
import re

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim._functional as OF
from functorch import functionalize
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils.stateless import functional_call

aten = torch.ops.aten
D, HEADS, FFN, VOCAB, SEQ, BATCH = 64, 4, 128, 100, 8, 2


def encoder_layer(norm_first, dropout):  # post-norm relu or pre-norm gelu
    return nn.TransformerEncoderLayer(D, HEADS, FFN, dropout, "gelu" if norm_first else "relu",
                                      batch_first=True, norm_first=norm_first)


def causal_mask(t):
    return torch.triu(torch.full((t, t), float("-inf")), 1)


class TinyGPT(nn.Module):
    """token+position embedding -> 2 pre-norm gelu layers (causal) -> LN -> head."""
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, D), nn.Embedding(SEQ, D)
        self.layers = nn.ModuleList([encoder_layer(True, 0.1) for _ in range(2)])
        self.ln_f, self.head = nn.LayerNorm(D), nn.Linear(D, VOCAB)

    def forward(self, idx):
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        mask = causal_mask(idx.shape[1])
        for layer in self.layers:
            h = layer(h, src_mask=mask)
        return self.head(self.ln_f(h))

    @staticmethod
    def loss(logits, targets):
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def models():
    """Yield (name, model, inputs, targets, loss_fn)."""
    yield "mlp", nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)), \
        [torch.randn(4, 16)], [], torch.sum
    for norm_first, p, masked in itertools.product((False, True), (0.1, 0.0), (False, True)):
        name = "tel_%s_p%s_%s" % ("pre_gelu" if norm_first else "post_relu",
                                  str(p).replace(".", ""), "causal" if masked else "nomask")
        inputs = [torch.randn(BATCH, SEQ, D)] + ([causal_mask(SEQ)] if masked else [])
        yield name, encoder_layer(norm_first, p), inputs, [], torch.sum
    yield "gpt", TinyGPT(), [torch.randint(0, VOCAB, (BATCH, SEQ))], \
        [torch.randint(0, VOCAB, (BATCH, SEQ))], TinyGPT.loss


def optimizer_state(opt, params):
    """Steady-state state: SGD momentum buffers; Adam exp_avg, exp_avg_sq, 0-dim step."""
    if opt == "adam":
        exp_avg = [torch.randn(p.shape).abs() * 1e-3 for p in params]
        exp_avg_sq = [torch.rand(p.shape) * 1e-4 for p in params]
        return exp_avg + exp_avg_sq + [torch.tensor(3.0) for _ in params]
    return [torch.randn(p.shape) * 0.01 for p in params] if opt == "sgdm" else []


def update(opt, params, grads, state):
    """In-place functional optimizer step (foreach=False) on params/state."""
    n = len(params)
    if opt in ("sgd", "sgdm"):
        OF.sgd(params, grads, state if opt == "sgdm" else [None] * n, foreach=False,
               weight_decay=0.0, momentum=0.9 if opt == "sgdm" else 0.0, lr=0.1,
               dampening=0.0, nesterov=False, maximize=False)
    else:  # differentiable=True keeps `step` a tensor (the default path calls .item())
        OF.adam(params, grads, state[:n], state[n:2 * n], [], state[2 * n:], foreach=False,
                differentiable=True, amsgrad=False, beta1=0.9, beta2=0.999, lr=1e-3,
                weight_decay=0.0, eps=1e-8, maximize=False)


def trace_step(model, inputs, targets, loss_fn, opt):
    """Return the functionalized FX graph of one training step."""
    names = [name for name, _ in model.named_parameters()]
    params = [p.detach().clone().requires_grad_() for p in model.parameters()]
    state = optimizer_state(opt, params)
    n, m, k = len(params), len(state), len(inputs)

    def step(*flat):
        ps = list(flat[:n])
        loss = loss_fn(functional_call(model, dict(zip(names, ps)), tuple(flat[n + m:n + m + k])),
                       *flat[n + m + k:])
        grads = torch.autograd.grad(loss, ps)
        with torch.no_grad():
            new_p, new_s = [p.clone() for p in ps], [s.clone() for s in flat[n:n + m]]
            update(opt, new_p, list(grads), new_s)
        return (loss, *new_p, *new_s)

    flat = params + state + inputs + targets
    raw = make_fx(step)(*flat)
    return make_fx(functionalize(torch.fx.Interpreter(raw).run,
                                 remove="mutations_and_views"))(*[t.detach() for t in flat])


# The mnemonic of a `def Aten_...Op : Aten_...<"mnemonic", ...` record in AtenOps.td.
TD_MNEMONIC = re.compile(r'^\s*def\s+Aten_\w*Op\s*:\s*Aten_\w*<\s*"([^"]+)"', re.M)
# `.Tensor` overloads whose Python-number operand makes them the `.Scalar` overload
SCALAR_OVERLOADS = {getattr(aten, op).Tensor: "aten.%s.Scalar" % op
                    for op in ("add", "sub", "mul", "div")}


def op_name(overload):
    """aten::foo.default -> aten.foo; aten::t_copy -> aten.t (view ops only)."""
    name, ovl = overload._schema.name.split("::")[1], overload._overloadname
    base = getattr(getattr(aten, name[:-5], None), ovl, None) if name.endswith("_copy") else None
    if base is not None and any(r.alias_info is not None for r in base._schema.returns):
        name = name[:-5]
    return "aten." + name + ("" if ovl == "default" else "." + ovl)


def graph_ops(graph):
    """Dialect names of the ops in a functionalized graph."""
    nodes = [n for n in graph.nodes if n.op == "call_function" and n.target is not operator.getitem]
    absorbed = set()  # empty_like chains that only feed a bernoulli_ (dropout mask)
    for node in nodes:
        src = node.args[0] if node.target is aten.bernoulli_.float else None
        while getattr(src, "target", None) is aten.empty_like.default and len(src.users) == 1:
            absorbed.add(src)
            src = src.args[0]
    ops = set()
    for node in (n for n in nodes if n not in absorbed):
        t = node.target
        if t is aten.bernoulli_.float:
            ops.add("aten.bernoulli.p")
        elif t in SCALAR_OVERLOADS and not isinstance(node.args[1], torch.fx.Node):
            ops.add(SCALAR_OVERLOADS[t])
        elif isinstance(t, torch._ops.OpOverload):
            ops.add(op_name(t))
        else:  # not an ATen op: keep it visible so --check flags it
            ops.add("%s.%s" % (getattr(t, "__module__", "?"), getattr(t, "__name__", t)))
    return ops


def traced_ops():
    """Map each traced op name to the configs (model_optimizer) whose graph has it."""
    where = {}
    for name, model, inputs, targets, loss_fn in models():  # modules default to train()
        for opt in ("sgd", "sgdm", "adam"):
            for op in graph_ops(trace_step(model, inputs, targets, loss_fn, opt).graph):
                where.setdefault(op, []).append(name + "_" + opt)
    # Once more for the tiny GPT (last model) with F.dropout patched to at::dropout's
    # CUDA branch, native_dropout (this torch is CPU-only; a fake-CUDA trace fails).
    def native_dropout(x, p=0.5, training=True, inplace=False):  # 0 < p < 1 here
        return aten.native_dropout(x, p, training)[0]
    cpu_dropout, F.dropout = F.dropout, native_dropout
    for op in graph_ops(trace_step(model, inputs, targets, loss_fn, "sgd").graph):
        where.setdefault(op, []).append(name + "_sgd_native_dropout")
    F.dropout = cpu_dropout
    return where


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--print", action="store_true", help="print the traced op names")
    mode.add_argument("--check", metavar="TD_FILE", help="check AtenOps.td covers them")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    where = traced_ops()
    if args.print:
        print("\n".join(sorted(where)))
        return 0
    with open(args.check) as f:
        missing = sorted(set(where) - {"aten." + m for m in TD_MNEMONIC.findall(f.read())})
    for op in missing:
        print("missing aten op: %s (traced in: %s)" % (op, ", ".join(where[op])))
    if not missing:
        print("all %d traced aten ops are in the dialect" % len(where))
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
