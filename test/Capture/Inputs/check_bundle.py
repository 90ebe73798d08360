"""Checks a capture's bundle against its module and against PyTorch.

  check_bundle.py MODULE.mlir BUNDLE_DIR

- manifest.json lists @train_step's arguments and results in order, with the
  FQN, role, shape and dtype the module declares, and every .npy file holds
  an array of that shape and dtype;
- the argument values are the factory's initial state: rebuilding the model
  with the manifest's seed gives the same parameters, buffers and inputs;
- the results are PyTorch's: an eager step of the rebuilt model with
  torch.optim, starting from the bundle's values, gives them (bit for bit:
  same code, same seed, same CPU).
Prints `bundle ok: <n> args, <m> results` or exits non-zero with the reason.
"""
import json
import os
import re
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "python"))
from spmd_capture.trace import load_factory  # noqa: E402

MLIR_DTYPES = {"f32": "float32", "f64": "float64", "i64": "int64", "i32": "int32", "i1": "bool"}
ARG = re.compile(r'%arg\d+: tensor<([^>]*)> \{spmd.fqn = "([^"]*)", spmd.role = "([^"]*)"\}')
RESULT = re.compile(r'tensor<([^>]*)> \{spmd\.(?:role = "loss"|fqn = "([^"]*)", '
                    r'spmd\.updates = (\d+) : i64)\}')


def fail(message):
    print("bundle check failed: " + message)
    sys.exit(1)


def parse_type(text):
    *dims, dtype = text.split("x")
    return [int(d) for d in dims], MLIR_DTYPES[dtype]


def split(entries):
    """A factory's inputs or targets (a tensor, tuple or dict) as (key, value) pairs."""
    if isinstance(entries, torch.Tensor):
        entries = (entries,)
    return list(entries.items()) if isinstance(entries, dict) else list(enumerate(entries))


def call(fn, first, entries, values):
    """fn(*first, *positional, **keyword) with tensor entries replaced from `values`."""
    args, kwargs = list(first), {}
    for key, value in entries:
        value = values.get(key, value)
        if isinstance(key, int):
            args.append(value)
        else:
            kwargs[key] = value
    return fn(*args, **kwargs)


def rebuild(manifest):
    """The factory's model and data rebuilt with the manifest's seed: (the
    raw factory result as (model, inputs, loss_fn, targets), per micro-step
    ({input key: tensor}, {target key: tensor}), {argument fqn: initial
    value})."""
    torch.manual_seed(manifest["seed"])
    factory = load_factory(manifest["model"])
    model = factory.model
    inputs = [(k, v) for k, v in factory.inputs if isinstance(v, torch.Tensor)]
    targets = [(k, v) for k, v in factory.targets if isinstance(v, torch.Tensor)]
    initial = dict(model.named_parameters(), **dict(model.named_buffers()))
    initial.update(("input.%s" % k, t) for k, t in inputs)
    initial.update(("target.%s" % k, t) for k, t in targets)
    # --accumulate K: micro-batch k of every tensor batched like input 0.
    accumulate = manifest.get("accumulate", 1)
    batch = inputs[0][1].shape[0]
    micro = [({}, {}) for _ in range(accumulate)]
    for role, tensors, which in (("input", inputs, 0), ("target", targets, 1)):
        for k, t in tensors:
            batched = accumulate > 1 and t.dim() > 0 and t.shape[0] == batch
            for m, chunk in enumerate(t.chunk(accumulate) if batched else [t] * accumulate):
                micro[m][which][k] = chunk
                if batched:
                    initial["micro%d.%s.%s" % (m, role, k)] = chunk
    return factory, micro, initial


def torch_optimizer(manifest, model):
    """torch.optim's optimizer the manifest describes, over the model's
    trainable parameters, and its gradient clipping (or None)."""
    opt = manifest["optimizer"]
    trainable = [p for p in model.parameters() if p.requires_grad]
    if opt["name"] == "sgd":
        optimizer = torch.optim.SGD(trainable, lr=opt["lr"], momentum=opt["momentum"],
                                    dampening=opt["dampening"], nesterov=opt["nesterov"],
                                    weight_decay=opt["weight_decay"], foreach=opt["foreach"])
    else:
        adam = torch.optim.AdamW if opt["name"] == "adamw" else torch.optim.Adam
        optimizer = adam(trainable, lr=opt["lr"], betas=tuple(opt["betas"]), eps=opt["eps"],
                         weight_decay=opt["weight_decay"], amsgrad=opt["amsgrad"],
                         foreach=opt["foreach"])
    clip = None
    if "clip_grad_norm" in opt:
        clip = lambda: torch.nn.utils.clip_grad_norm_(
            trainable, opt["clip_grad_norm"], float(opt["clip_norm_type"]), foreach=opt["foreach"])
    return optimizer, clip


def eager_step(factory, micro, optimizer, clip, accumulate):
    """One eager step of the factory's model with torch.optim; returns the loss."""
    loss = 0
    optimizer.zero_grad()
    for inputs, targets in micro:
        output = call(factory.model, (), factory.inputs, inputs)
        if factory.loss_fn:
            part = call(factory.loss_fn, (output,), factory.targets, targets)
        else:
            part = output.sum() if isinstance(output, torch.Tensor) else output["loss"]
        part = part / accumulate if accumulate > 1 else part
        part.backward()
        loss = part.detach() if isinstance(loss, int) else loss + part.detach()
    if clip:
        clip()
    optimizer.step()
    return loss


def main(module_path, bundle):
    with open(module_path) as f:
        signature = next(line for line in f if "func.func @train_step" in line)
    params, _, results = signature.partition(") -> (")
    manifest = json.load(open(os.path.join(bundle, "manifest.json")))
    values = {}
    for kind, declared in (("args", [(m[1], m[2], parse_type(m[0])) for m in ARG.findall(params)]),
                           ("results", [(m[1] or "loss", "update" if m[1] else "loss",
                                         parse_type(m[0])) for m in RESULT.findall(results)])):
        entries = manifest[kind]
        if [(e["fqn"], e["role"], (e["shape"], e["dtype"])) for e in entries] != \
                [(f, r, (s, d)) for f, r, (s, d) in declared]:
            fail("manifest %s differ from the module's:\n%s\n%s" % (kind, entries, declared))
        for i, e in enumerate(entries):
            array = np.load(os.path.join(bundle, e["file"]))
            if e["index"] != i or list(array.shape) != e["shape"] or str(array.dtype) != e["dtype"]:
                fail("%s[%d] (%s): file holds %s %s" % (kind, i, e["fqn"], array.dtype,
                                                         array.shape))
            values[kind, i] = torch.from_numpy(array)

    factory, micro, initial = rebuild(manifest)
    model, args = factory.model, manifest["args"]
    for i, e in enumerate(args):
        want = torch.zeros(e["shape"]) if e["role"] in ("optim_state", "step") else \
            torch.tensor(manifest["optimizer"]["lr"]) if e["role"] == "lr" else initial[e["fqn"]]
        if not torch.equal(values["args", i], want.detach()):
            fail("argument %s is not the factory's initial value" % e["fqn"])

    optimizer, clip = torch_optimizer(manifest, model)
    torch.manual_seed(manifest["seed"])
    loss = eager_step(factory, micro, optimizer, clip, manifest.get("accumulate", 1))
    params = dict(model.named_parameters())
    after = dict(params, **dict(model.named_buffers()), loss=loss)
    for p_fqn, p in params.items():
        for key, t in optimizer.state[p].items():
            after["%s.%s" % (p_fqn, key)] = t
    for i, e in enumerate(manifest["results"]):
        if e["updates"] is not None and args[e["updates"]]["fqn"] != e["fqn"]:
            fail("result %d updates %s but is named %s" % (i, args[e["updates"]]["fqn"], e["fqn"]))
        if not torch.equal(values["results", i], after[e["fqn"]].detach()):
            fail("result %s is not PyTorch's" % e["fqn"])
    print("bundle ok: %d args, %d results" % (len(args), len(manifest["results"])))


if __name__ == "__main__":
    main(*sys.argv[1:])
