"""spmd.compile's guard and its errors, on a small MLP.

  guard.py recompile   a batch of another size at call 3 recompiles, call 5
                       (the first size again) switches back to the kept
                       program; every call's loss matches PyTorch's
                       single-device training
  guard.py uncached    the same with cache_size=1: every switch recompiles
  guard.py error       the same call raises with on_recompile="error"
  guard.py move        the state moved between two programs that lay it out
                       differently (fsdp's, ddp's) is gathered and re-split
  guard.py misuse      train_steps that spmd.compile refuses, each message
  guard.py ranks       rank 1 passes a batch of another size: every rank
                       gets an error, none waits for the others
  guard.py dlpack      NumPy batches (through DLPack) given as keyword
                       arguments; losses match PyTorch's
  guard.py constants   tensors the step reads that are neither the model's
                       nor the batch (class weights, a frozen teacher, both
                       globals) are constants; an in-place change to one
                       recompiles, and so does rebinding the global to
                       another tensor; losses match PyTorch's
  guard.py containers  batches in containers, as DataLoaders give them: a
                       dict, transformers' BatchEncoding, an (x, y) tuple
                       in a list, a keyword dict; losses (and an eval
                       step's) match PyTorch's
"""
import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import spmd


def model_and_data():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(b, 6, generator=g), torch.randint(0, 3, (b,), generator=g))
               for b in (8, 8, 6, 6, 8, 6)]
    return model, batches


def with_reference():
    """The model, its batches, an eager copy, and an Adam for each."""
    model, batches = model_and_data()
    reference = copy.deepcopy(model)
    return (model, batches, reference, torch.optim.Adam(model.parameters(), lr=1e-2),
            torch.optim.Adam(reference.parameters(), lr=1e-2))


def step_fn(model, optimizer, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss


def guard(on_recompile, cache_size=8):
    model, batches, reference, opt, ref_opt = with_reference()
    step = spmd.compile(parallel_mode="fsdp", on_recompile=on_recompile,
                        cache_size=cache_size)(step_fn)
    for k, (x, y) in enumerate(batches):
        try:
            loss = step(model, opt, x, y).item()
        except spmd.SpmdError as e:
            print("call %d: SpmdError: %s" % (k + 1, e))
            return
        ref = step_fn(reference, ref_opt, x, y).item()
        if spmd.rank() == 0:
            print("call %d: batch %d, compiled %d time(s), loss %s PyTorch's" % (
                k + 1, len(x), step.compiles,
                "matches" if abs(loss - ref) <= 1e-5 * abs(ref) else "DIFFERS FROM"))


def misuse():
    model, batches = model_and_data()
    x, y = batches[0]

    def no_backward(model, optimizer, x, y):
        loss = F.cross_entropy(model(x), y)
        optimizer.step()
        return loss

    def two_steps(model, optimizer, x, y):
        step_fn(model, optimizer, x, y)
        optimizer.step()

    def item(model, optimizer, x, y):
        loss = F.cross_entropy(model(x), y)
        if loss.item() > 0:
            loss.backward()
        optimizer.step()

    scaler = torch.amp.GradScaler("cpu")

    def grad_scaler(model, optimizer, x, y):
        loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss

    ema = copy.deepcopy(model).requires_grad_(False)

    def outside_ema(model, optimizer, x, y):
        loss = step_fn(model, optimizer, x, y)
        with torch.no_grad():
            for e, p in zip(ema.parameters(), model.parameters()):
                e.lerp_(p, 0.1)
        return loss

    cases = [("no backward", no_backward, torch.optim.SGD(model.parameters(), lr=0.1), {}),
             ("two optimizer steps", two_steps, torch.optim.SGD(model.parameters(), lr=0.1), {}),
             ("a value read", item, torch.optim.SGD(model.parameters(), lr=0.1), {}),
             ("GradScaler", grad_scaler, torch.optim.SGD(model.parameters(), lr=0.1), {}),
             ("Rprop", step_fn, torch.optim.Rprop(model.parameters()), {}),
             ("an EMA outside the model", outside_ema,
              torch.optim.SGD(model.parameters(), lr=0.1), {}),
             ("a mesh of 3", step_fn, torch.optim.SGD(model.parameters(), lr=0.1),
              {"mesh": [3]}),
             ("a plan that names no module", step_fn,
              torch.optim.SGD(model.parameters(), lr=0.1),
              {"parallel_mode": "tp", "plan": sys.argv[2] if len(sys.argv) > 2 else None})]
    print_refusals(cases, model, x, y)


def print_refusals(cases, model, x, y):
    """For each (name, train_step, optimizer, spmd.compile's keyword
    arguments) of `cases`, its first call on (x, y): `name: no error`, or
    the exception's type and the last line of its message."""
    for name, fn, opt, kwargs in cases:
        try:
            spmd.compile(**kwargs)(fn)(model, opt, x, y)
            print("%s: no error" % name)
        except Exception as e:  # noqa: BLE001 - the test prints what it got
            first = str(e).strip().splitlines()
            print("%s: %s: %s" % (name, type(e).__name__, first[-1] if first else ""))


def move():
    model, batches, reference, opt, ref_opt = with_reference()
    fsdp = spmd.compile(parallel_mode="fsdp")(step_fn)
    ddp = spmd.compile(parallel_mode="ddp")(step_fn)
    fsdp(model, opt, *batches[0])
    step_fn(reference, ref_opt, *batches[0])
    # ddp's own first step (another batch) leaves other values, which the
    # move replaces.
    ddp(model, opt, *batches[4])
    ddp._program.take_state(fsdp._program)
    loss = ddp(model, opt, *batches[1]).item()
    ref = step_fn(reference, ref_opt, *batches[1]).item()
    params = ddp.state_dict()
    same = all(torch.allclose(params[n], p, rtol=1e-5, atol=1e-6)
               for n, p in reference.named_parameters())
    try:
        fsdp.state_dict()
        left = "still set"
    except spmd.SpmdError as e:
        left = str(e)
    if spmd.rank() == 0:
        print("moved %s -> %s; loss %s PyTorch's, parameters %s; fsdp's: %s" % (
            fsdp.layouts()["0.weight"], ddp.layouts()["0.weight"],
            "matches" if abs(loss - ref) <= 1e-5 * abs(ref) else "DIFFERS FROM",
            "match" if same else "DIFFER", left))


CLASS_WEIGHTS = torch.tensor([1.0, 2.0, 0.5])
TEACHER = nn.Linear(6, 3).requires_grad_(False)


def distilled(model, optimizer, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits, y, weight=CLASS_WEIGHTS) + \
        F.mse_loss(logits, TEACHER(x))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss


def constants():
    global CLASS_WEIGHTS
    model, batches, reference, opt, ref_opt = with_reference()
    step = spmd.compile(parallel_mode="fsdp")(distilled)
    for k, (x, y) in enumerate(batches[:2] * 3):
        if k == 2:
            CLASS_WEIGHTS[0] = 3.0  # in place: the next call recompiles
        if k == 4:  # the name bound to another tensor: so does this one
            CLASS_WEIGHTS = torch.tensor([0.5, 1.0, 4.0])
        loss = step(model, opt, x, y).item()
        ref = distilled(reference, ref_opt, x, y).item()
        if spmd.rank() == 0:
            print("call %d: compiled %d time(s), loss %s PyTorch's" % (
                k + 1, step.compiles,
                "matches" if abs(loss - ref) <= 1e-5 * abs(ref) else "DIFFERS FROM"))


def containers():
    from transformers import BatchEncoding
    model, batches, reference, opt, ref_opt = with_reference()

    def dict_step(model, optimizer, batch):
        return step_fn(model, optimizer, batch["x"], batch["y"])

    def pairs_step(model, optimizer, pairs, scale=1.0):
        (x, y), = pairs
        return step_fn(model, optimizer, x * scale, y)

    def keyword_step(model, optimizer, *, batch):
        return step_fn(model, optimizer, batch["x"], batch["y"])

    def evaluate(model, batch):
        return {"loss": F.cross_entropy(model(batch["x"]), batch["y"])}

    x, y = batches[0]
    cases = [("a dict", spmd.compile(parallel_mode="fsdp")(dict_step), dict_step,
              ({"x": x, "y": y},), {}),
             ("a BatchEncoding", spmd.compile(parallel_mode="fsdp")(dict_step), dict_step,
              (BatchEncoding({"x": x, "y": y}),), {}),
             ("a list of a tuple", spmd.compile(parallel_mode="ddp")(pairs_step), pairs_step,
              ([(x, y)], 0.5), {}),
             ("a keyword dict", spmd.compile(parallel_mode="fsdp")(keyword_step), keyword_step,
              (), {"batch": {"x": x, "y": y}})]
    for name, step, fn, args, kwargs in cases:
        loss = step(model, opt, *args, **kwargs).item()
        ref = fn(reference, ref_opt, *args, **kwargs).item()
        if spmd.rank() == 0:
            print("%s: loss %s PyTorch's; inputs %s" % (
                name, "matches" if abs(loss - ref) <= 1e-5 * abs(ref) else "DIFFERS FROM",
                " ".join(sorted(k for k in step.layouts() if k.startswith("input.")))))
        step.sync(model, opt)
    got = step.eval_step(evaluate)(model, {"x": x, "y": y})["loss"]
    with torch.no_grad():
        want = evaluate(reference, {"x": x, "y": y})["loss"]
    if spmd.rank() == 0:
        print("an eval step on a dict: loss %s PyTorch's" % (
            "matches" if abs(got - want) <= 1e-5 * abs(want) else "DIFFERS FROM"))


def ranks():
    model, batches = model_and_data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    step = spmd.compile(parallel_mode="ddp")(step_fn)
    x, y = batches[0] if spmd.rank() != 1 else batches[2]
    try:
        step(model, opt, x, y)
        said = "no error"
    except spmd.SpmdError as e:
        said = "SpmdError: %s" % e
    # The job goes on: the next call with agreeing batches runs.
    loss = step(model, opt, *batches[0]).item()
    # One write per rank: mpirun interleaves the ranks' output.
    sys.stdout.write("rank %d: %s; then loss %.4f\n" % (spmd.rank(), said, loss))
    sys.stdout.flush()


def dlpack():
    model, batches = model_and_data()
    reference = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    step = spmd.compile(parallel_mode="ddp")(step_fn)
    for k, (x, y) in enumerate(batches[:2]):
        loss = step(model, opt, x=x.numpy(), y=y.numpy()).item()
        ref = step_fn(reference, ref_opt, x, y).item()
        if spmd.rank() == 0:
            print("call %d: numpy keyword batch, loss %s PyTorch's" % (
                k + 1, "matches" if abs(loss - ref) <= 1e-5 * abs(ref) else "DIFFERS FROM"))


if __name__ == "__main__":
    {"recompile": lambda: guard("recompile"), "error": lambda: guard("error"),
     "uncached": lambda: guard("recompile", cache_size=1), "move": move,
     "misuse": misuse, "ranks": ranks, "dlpack": dlpack,
     "containers": containers, "constants": constants}[sys.argv[1]]()
