"""spmd.compile with gradients carried from call to call (gradient
accumulation across iterations, as training scripts and the transformers
Trainer write it), each compiled step run next to the same function in
eager PyTorch (one process, the whole batch of 11, which the meshes do not
divide) on the same calls: every call's loss, the parameters and optimizer
state after the last, and the .grads that sync() writes back must match
(relative 1e-4: a gradient's rounding differs by up to 1.1e-5 on 1 rank
already, its square in Adam's second moment by 2.3e-5).

  accumulate_calls.py MODE cycle    backward() every call, step() and
                                    zero_grad() every 3rd (a Python flag):
                                    8 calls, AdamW, clip_grad_norm_ before
                                    the step; compiles and layouts
  accumulate_calls.py MODE top      zero_grad() in a cycle's first call,
                                    step() in its last (2 calls a cycle)
  accumulate_calls.py MODE late     the same function, zero_grad() in the
                                    first call only, step() in every one:
                                    from call 2 on each adds into the
                                    gradients the first one left, which
                                    needs carry_grads=True
  accumulate_calls.py MODE forever  backward() and step() without zero_grad:
                                    each call adds into all the gradients
                                    before it, as PyTorch does; SGD with
                                    momentum
  accumulate_calls.py MODE zeroed   the gradients zeroed in place after
                                    each step (still set: later calls add
                                    into zeros)
  accumulate_calls.py MODE resume OTHER DIR
                                    a checkpoint in DIR at a step boundary
                                    (call 6 of cycle's 8), resumed by a new
                                    compiled step on mode OTHER: calls 7-8
  accumulate_calls.py MODE late-error
                                    late without carry_grads=True: the error

MODE is ddp, fsdp, tp (tp with mlp.tp.json beside this file) or fsdp-tp
(2x2). `--report` prints each compiled program's collectives (spmd-report);
`--unsharded` compiles with options={"carried-grads": "unsharded"} (fsdp,
fsdp-tp: the carried gradients stay Partial until the call that steps).
"""
import copy
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import spmd

HERE = os.path.dirname(os.path.abspath(__file__))
PLAN = os.path.join(HERE, "mlp.tp.json")


def model_and_data(calls=8):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(11, 6, generator=g), torch.randint(0, 3, (11,), generator=g))
               for _ in range(calls)]
    return model, batches


def cycle(model, optimizer, x, y, sync):
    loss = F.cross_entropy(model(x), y) / 3
    loss.backward()
    if sync:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        optimizer.step()
        optimizer.zero_grad()
    return loss


def top(model, optimizer, x, y, first, last):
    if first:
        optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y) / 2
    loss.backward()
    if last:
        optimizer.step()
    return loss


def forever(model, optimizer, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


def zeroed(model, optimizer, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    for p in model.parameters():
        p.grad.zero_()
    return loss


def flags(case, k):
    """The Python arguments of call k after the batch."""
    if case == "cycle":
        return ((k + 1) % 3 == 0,)
    if case == "top":
        return (k % 2 == 0, k % 2 == 1)
    if case == "late":
        return (k == 0, True)
    return ()


def compiled(mode, **kwargs):
    mesh = [2, 2] if mode == "fsdp-tp" else None
    if "--unsharded" in sys.argv and mode in ("fsdp", "fsdp-tp"):
        kwargs["options"] = {"carried-grads": "unsharded"}
    return spmd.compile(parallel_mode=mode, mesh=mesh,
                        plan=PLAN if mode in ("tp", "fsdp-tp") else None, **kwargs)


def rel(a, b):
    return (a - b).norm().item() / max(b.norm().item(), 1e-30)


def optimizer_of(case, model):
    if case == "forever":
        return torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    return torch.optim.AdamW(model.parameters(), lr=0.05)


def compare(mode, case):
    fn = {"cycle": cycle, "top": top, "late": top, "forever": forever, "zeroed": zeroed}[case]
    model, batches = model_and_data()
    reference = copy.deepcopy(model)
    opt, ref_opt = optimizer_of(case, model), optimizer_of(case, reference)
    step = compiled(mode, carry_grads=case == "late", report="--report" in sys.argv)(fn)
    worst = 0.0
    for k, (x, y) in enumerate(batches):
        got = step(model, opt, x, y, *flags(case, k)).item()
        want = fn(reference, ref_opt, x, y, *flags(case, k)).item()
        worst = max(worst, abs(got - want) / abs(want))
    layout = step.layouts()["0.weight.grad"]
    step.sync(model, opt)
    params = max(rel(p, q) for p, q in zip(model.parameters(), reference.parameters()))
    state = max(rel(opt.state[p][key], ref_opt.state[q][key])
                for p, q in zip(model.parameters(), reference.parameters())
                for key in ref_opt.state[q] if key != "step")
    grads = [(p.grad is None, q.grad is None) for p, q in
             zip(model.parameters(), reference.parameters())]
    grad = max([rel(p.grad, q.grad) for p, q in zip(model.parameters(), reference.parameters())
                if p.grad is not None and q.grad is not None], default=0.0)
    if spmd.rank() == 0:
        print("%s %s: losses %s, parameters %s, optimizer state %s, .grads %s; "
              "%d compiles, %d steps; 0.weight.grad %s" % (
                  mode, case, verdict(worst), verdict(params), verdict(state),
                  "match" if all(a == b for a, b in grads) and grad <= 1e-4
                  else "DIFFER (%s, %.2g)" % (grads, grad),
                  step.compiles, step.steps, layout))


def verdict(x):
    return "match" if x <= 1e-4 else "DIFFER (%.2g)" % x


def late_without_option(mode):
    model, batches = model_and_data()
    opt = torch.optim.AdamW(model.parameters(), lr=0.05)
    step = compiled(mode)(top)
    try:
        for k, (x, y) in enumerate(batches[:2]):
            step(model, opt, x, y, *flags("late", k))
        print("late without carry_grads: no error")
    except spmd.SpmdError as e:
        if spmd.rank() == 0:
            print("late without carry_grads: SpmdError: %s" % e)


def resume(mode, other, directory):
    """8 calls of `cycle`: checkpoint into `directory` after call 6 (a
    step), a new compiled step on `other` loads it and runs calls 7 and 8."""
    model, batches = model_and_data()
    reference = copy.deepcopy(model)
    ref_opt = optimizer_of("cycle", reference)
    opt = optimizer_of("cycle", model)
    step = compiled(mode)(cycle)
    wants = [cycle(reference, ref_opt, x, y, *flags("cycle", k)).item()
             for k, (x, y) in enumerate(batches)]
    for k, (x, y) in enumerate(batches[:6]):
        step(model, opt, x, y, *flags("cycle", k))
    step.save(directory)
    step.close()
    fresh, fresh_batches = model_and_data()
    fresh_opt = optimizer_of("cycle", fresh)
    again = compiled(other)(cycle)
    again.load(directory)
    worst = 0.0
    for k in (6, 7):
        x, y = fresh_batches[k]
        got = again(fresh, fresh_opt, x, y, *flags("cycle", k)).item()
        worst = max(worst, abs(got - wants[k]) / abs(wants[k]))
    again.sync(fresh, fresh_opt)
    params = max(rel(p, q) for p, q in zip(fresh.parameters(), reference.parameters()))
    if spmd.rank() == 0:
        print("%s -> %s resume after call 6: calls 7-8 losses %s, parameters %s, steps %d" % (
            mode, other, verdict(worst), verdict(params), again.steps))


if __name__ == "__main__":
    if sys.argv[2] == "late-error":
        late_without_option(sys.argv[1])
    elif sys.argv[2] == "resume":
        resume(sys.argv[1], sys.argv[3], sys.argv[4])
    else:
        compare(sys.argv[1], sys.argv[2])
