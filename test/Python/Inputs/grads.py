"""spmd.compile with the gradient code of real training scripts, each
compiled step run next to the same function in eager PyTorch (one process,
the whole batch) for five calls: every call's loss and the parameters after
the last must match.

  grads.py MODE clip        clip_grad_norm_(model.parameters()) between
                            backward() and step() (small max_norm: it clips)
  grads.py MODE accumulate  a loop of backward()s over two equal
                            micro-batches, then one step (gradient
                            accumulation in train_step); the batch's layout
  grads.py MODE uneven      the same over micro-batches of 5, 5 and 2
  grads.py MODE groups      AdamW with two parameter groups (weight decay on
                            the weights only, another lr for the biases, a
                            parameter in no group) and a LambdaLR schedule;
                            zero_grad before backward, clip through
                            optimizer.param_groups
  grads.py MODE rmsprop     the clip step with RMSprop (centered, momentum,
                            weight decay)
  grads.py MODE adagrad     the clip step with Adagrad (lr_decay, an initial
                            accumulator, weight decay)
  grads.py MODE adamax      the clip step with Adamax (weight decay)
  grads.py MODE radam       the clip step with RAdam (decoupled weight decay,
                            betas whose variance turns tractable at step 8:
                            ten calls take both of its branches)
  grads.py MODE nadam       the clip step with NAdam (weight decay; its
                            mu_product a 0-dim state)
  grads.py MODE adadelta    the clip step with Adadelta (weight decay)
  grads.py MODE maximize    the clip step with Adam, decoupled_weight_decay
                            (AdamW's formula) and maximize
  grads.py MODE onecycle    the clip step with AdamW under OneCycleLR, which
                            cycles the first beta too: how many compiles
  grads.py MODE cyclic      the clip step with SGD (momentum, nesterov) under
                            CyclicLR, which cycles the momentum too
  grads.py MODE decay       the clip step with AdamW (a no-decay group) whose
                            weight decay a cosine schedule sets by hand each
                            call, as DINO's: how many compiles
  grads.py MODE l2decay     the same with SGD's L2 weight decay and momentum
  grads.py MODE outputs     train_step returns (loss, {"logits": ...,
                            "accuracy": ..., "batch": 12}): the call returns
                            the same structure, tensors whole
  grads.py MODE compiled    torch.compile'd code: the model passed as
                            torch.compile(model), a compiled loss function in
                            the step, and sync() into the compiled model
  grads.py MODE after-step  code after optimizer.step() sees the updated
                            parameters, with their .grad: a gradient norm, a
                            clamp of a weight, an EMA copy of the model (its
                            parameters take no gradient and are updated in
                            place), a weight's norm returned, the norms of
                            optimizer.param_groups' parameters, the .grads
                            cleared by hand through the model
  grads.py MODE averaged    torch.optim.swa_utils.AveragedModel updated
                            after each step: an EMA (foreach lerp) and SWA's
                            running mean; their count of averages, which
                            AveragedModel branches on, is a buffer
  grads.py misuse           what spmd.compile refuses, each message

MODE is ddp, fsdp or tp (tp with mlp.tp.json beside this file).
"""
import copy
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import spmd
from guard import print_refusals

PLAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp.tp.json")


def model_and_data():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(12, 6, generator=g), torch.randint(0, 3, (12,), generator=g))
               for _ in range(5)]
    return model, batches


def clip(model, optimizer, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.05)
    optimizer.step()
    optimizer.zero_grad()
    return loss


def micro_steps(model, optimizer, pieces):
    total = 0
    for xs, ys in pieces:
        loss = F.cross_entropy(model(xs), ys, reduction="sum") / 12
        loss.backward()
        total = total + loss.detach()
    optimizer.step()
    optimizer.zero_grad()
    return total


def accumulate(model, optimizer, x, y):
    return micro_steps(model, optimizer, zip(x.chunk(2), y.chunk(2)))


def uneven(model, optimizer, x, y):
    return micro_steps(model, optimizer, zip(x.split(5), y.split(5)))


def groups(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    params = [p for g in optimizer.param_groups for p in g["params"]]
    torch.nn.utils.clip_grad_norm_(params, 0.5)
    optimizer.step()
    return loss


def outputs(model, optimizer, x, y):
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    accuracy = (logits.argmax(-1) == y).float().mean()
    return loss, {"logits": logits, "accuracy": accuracy, "batch": len(x)}


def compare_compiled(mode):
    model, batches = model_and_data()
    reference = copy.deepcopy(model)
    compiled = torch.compile(model)
    opt, ref_opt = optimizer_of("clip", compiled), optimizer_of("clip", reference)
    loss_fn = torch.compile(F.cross_entropy)

    def fn(model, optimizer, x, y):
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    step = spmd.compile(parallel_mode=mode, plan=PLAN if mode == "tp" else None)(fn)
    worst = 0.0
    for x, y in batches:
        loss = step(compiled, opt, x, y).item()
        ref = fn(reference, ref_opt, x, y).item()
        worst = max(worst, abs(loss - ref) / abs(ref))
    step.sync(compiled, opt)
    params = max((p - q).norm().item() / q.norm().item()
                 for p, q in zip(compiled.parameters(), reference.parameters()))
    if spmd.rank() == 0:
        print("%s compiled: losses %s, parameters synced into the compiled model %s" % (
            mode, "match" if worst <= 1e-5 else "DIFFER (%.2g)" % worst,
            "match" if params <= 1e-5 else "DIFFER (%.2g)" % params))


class WithEma(nn.Module):
    """The model and an EMA copy of it that takes no gradient."""

    def __init__(self, model):
        super().__init__()
        self.net, self.ema = model, copy.deepcopy(model).requires_grad_(False)

    def forward(self, x):
        return self.net(x)


def after_step(model, optimizer, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    grad_norm = torch.stack([p.grad.norm() for p in model.parameters()
                             if p.requires_grad]).norm()
    with torch.no_grad():
        model.net[0].weight.clamp_(-0.3, 0.3)
        for e, p in zip(model.ema.parameters(), model.net.parameters()):
            e.lerp_(p, 0.1)
    grouped = torch.stack([p.norm() for g in optimizer.param_groups for p in g["params"]])
    for p in model.parameters():  # clearing through the model, by hand
        p.grad = None
    return loss, grad_norm, model.net[0].weight.norm(), grouped.sum()


class WithAverages(nn.Module):
    """The model and two torch.optim.swa_utils.AveragedModel copies of it:
    an EMA (get_ema_multi_avg_fn: torch._foreach_lerp_) and SWA's running
    mean (the default). Their parameters keep requires_grad, as
    AveragedModel leaves them, but take no gradient."""

    def __init__(self, model):
        super().__init__()
        swa = torch.optim.swa_utils
        self.net = model
        self.ema = swa.AveragedModel(model, multi_avg_fn=swa.get_ema_multi_avg_fn(0.9))
        self.swa = swa.AveragedModel(model)

    def forward(self, x):
        return self.net(x)


def averaged(model, optimizer, x, y):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    model.ema.update_parameters(model.net)
    model.swa.update_parameters(model.net)
    return loss


def compare_averaged(mode):
    model = WithAverages(model_and_data()[0])
    batches = model_and_data()[1]
    reference = copy.deepcopy(model)
    opt, ref_opt = [torch.optim.SGD(m.net.parameters(), lr=0.1, momentum=0.9)
                    for m in (model, reference)]
    step = spmd.compile(parallel_mode=mode, plan=PLAN if mode == "tp" else None)(averaged)
    worst = 0.0
    for x, y in batches:
        got, want = step(model, opt, x, y), averaged(reference, ref_opt, x, y)
        worst = max(worst, abs(got.item() - want.item()) / abs(want.item()))
    state = step.state_dict()
    params = max((state[n] - p).norm().item() / p.norm().item()
                 for n, p in reference.named_parameters())
    counts = [state[n].item() for n in ("ema.n_averaged", "swa.n_averaged")]
    if spmd.rank() == 0:
        print("%s averaged: losses %s, parameters and both averages %s, n_averaged %s" % (
            mode, "match" if worst <= 1e-5 else "DIFFER (%.2g)" % worst,
            "match" if params <= 1e-5 else "DIFFER (%.2g)" % params, counts))


def compare_after_step(mode):
    model = WithEma(model_and_data()[0])
    batches = model_and_data()[1]
    reference = copy.deepcopy(model)
    opt, ref_opt = [torch.optim.AdamW(m.net.parameters(), lr=0.05) for m in (model, reference)]
    step = spmd.compile(parallel_mode=mode, plan=PLAN if mode == "tp" else None)(after_step)
    worst = 0.0
    for x, y in batches:
        got, want = step(model, opt, x, y), after_step(reference, ref_opt, x, y)
        worst = max([worst] + [abs(a.item() - b.item()) / abs(b.item())
                               for a, b in zip(got, want)])
    state = step.state_dict()
    params = max((state[n] - p).norm().item() / p.norm().item()
                 for n, p in reference.named_parameters())
    if spmd.rank() == 0:
        print("%s after-step: losses and values %s, parameters and EMA %s" % (
            mode, "match" if worst <= 1e-5 else "DIFFER (%.2g)" % worst,
            "match" if params <= 1e-5 else "DIFFER (%.2g)" % params))


def compare_outputs(mode):
    model, batches = model_and_data()
    reference = copy.deepcopy(model)
    opt, ref_opt = optimizer_of("outputs", model), optimizer_of("outputs", reference)
    step = spmd.compile(parallel_mode=mode, plan=PLAN if mode == "tp" else None)(outputs)
    worst, same = 0.0, True
    for x, y in batches:
        loss, extra = step(model, opt, x, y)
        ref_loss, ref_extra = outputs(reference, ref_opt, x, y)
        same = same and set(extra) == set(ref_extra) and extra["batch"] == ref_extra["batch"]
        for got, want in ((loss, ref_loss), (extra["logits"], ref_extra["logits"]),
                          (extra["accuracy"], ref_extra["accuracy"])):
            same = same and got.shape == want.shape and got.dtype == want.dtype
            worst = max(worst, ((got - want.detach()).norm() / want.norm()).item())
    if spmd.rank() == 0:
        print("%s outputs: %s, values %s" % (
            mode, "the same structure" if same else "ANOTHER STRUCTURE",
            "match" if worst <= 1e-5 else "DIFFER (%.2g)" % worst))


def optimizer_of(case, model):
    if case == "rmsprop":
        return torch.optim.RMSprop(model.parameters(), lr=1e-2, momentum=0.9, centered=True,
                                   weight_decay=0.01)
    if case == "adagrad":
        return torch.optim.Adagrad(model.parameters(), lr=0.1, lr_decay=0.01,
                                   initial_accumulator_value=0.1, weight_decay=0.01)
    if case == "adamax":
        return torch.optim.Adamax(model.parameters(), lr=1e-2, weight_decay=0.01)
    if case == "radam":
        return torch.optim.RAdam(model.parameters(), lr=1e-2, betas=(0.9, 0.75),
                                 weight_decay=0.1, decoupled_weight_decay=True)
    if case == "nadam":
        return torch.optim.NAdam(model.parameters(), lr=1e-2, weight_decay=0.01)
    if case == "adadelta":
        return torch.optim.Adadelta(model.parameters(), weight_decay=0.01)
    if case == "maximize":
        return torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=0.1,
                                decoupled_weight_decay=True, maximize=True)
    if case == "onecycle":
        return torch.optim.AdamW(model.parameters(), lr=1e-2)
    if case == "cyclic":
        return torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, nesterov=True)
    if case in ("decay", "l2decay"):
        kind = torch.optim.AdamW if case == "decay" else torch.optim.SGD
        extra = {} if case == "decay" else {"momentum": 0.9}
        return kind([{"params": [model[0].weight, model[2].weight], "weight_decay": 0.04},
                     {"params": [model[0].bias, model[2].bias], "weight_decay": 0.0}],
                    lr=1e-2, **extra)
    if case != "groups":
        return torch.optim.Adam(model.parameters(), lr=1e-2)
    # The first layer's bias is in no group: torch.optim never updates it.
    return torch.optim.AdamW([
        {"params": [model[0].weight, model[2].weight], "weight_decay": 0.1},
        {"params": [model[2].bias], "weight_decay": 0.0, "lr": 3e-2}], lr=1e-2)


def schedule_of(case, optimizer):
    if case == "groups":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: 1 / (k + 1))
    if case == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05, total_steps=10)
    if case == "cyclic":
        return torch.optim.lr_scheduler.CyclicLR(optimizer, 1e-3, 0.1, step_size_up=2,
                                                 base_momentum=0.5, max_momentum=0.95)
    if case in ("decay", "l2decay"):
        return WeightDecaySchedule(optimizer, 0.04, 0.4, 5)
    return None


class WeightDecaySchedule:
    """A cosine weight-decay schedule from `start` to `end` over `steps`,
    set by hand in the first group (DINO's wd_schedule)."""

    def __init__(self, optimizer, start, end, steps):
        self.optimizer, self.k = optimizer, 0
        self.values = [end + 0.5 * (start - end) * (1 + math.cos(math.pi * k / steps))
                       for k in range(steps + 1)]

    def step(self):
        self.k += 1
        self.optimizer.param_groups[0]["weight_decay"] = self.values[self.k]


def compare(mode, case):
    fn = {"clip": clip, "accumulate": accumulate, "uneven": uneven, "groups": groups,
          "rmsprop": clip, "adagrad": clip, "adamax": clip, "radam": clip, "nadam": clip, "adadelta": clip,
          "maximize": clip, "onecycle": clip, "cyclic": clip, "decay": clip,
          "l2decay": clip}[case]
    model, batches = model_and_data()
    reference = copy.deepcopy(model)
    opt, ref_opt = optimizer_of(case, model), optimizer_of(case, reference)
    sched, ref_sched = schedule_of(case, opt), schedule_of(case, ref_opt)
    step = spmd.compile(parallel_mode=mode, plan=PLAN if mode == "tp" else None)(fn)
    worst = 0.0
    for x, y in batches * (2 if case == "radam" else 1):
        loss = step(model, opt, x, y).item()
        ref = fn(reference, ref_opt, x, y).item()
        worst = max(worst, abs(loss - ref) / abs(ref))
        if sched:
            sched.step()
            ref_sched.step()
    state = step.state_dict()
    params = max((state[n] - p).norm().item() / p.norm().item()
                 for n, p in reference.named_parameters())
    untouched = torch.equal(state["0.bias"], model_and_data()[0][0].bias)
    if spmd.rank() == 0:
        print("%s %s: losses %s, parameters %s%s; the batch %s" % (
            mode, case, "match" if worst <= 1e-5 else "DIFFER (%.2g)" % worst,
            "match" if params <= 1e-5 else "DIFFER (%.2g)" % params,
            (", the bias in no group %s" % ("untouched" if untouched else "CHANGED"))
            if case == "groups" else "", step.layouts()["input.0"]) +
            ("; %d compiles" % step.compiles
             if case in ("onecycle", "cyclic", "decay", "l2decay") else ""))


def misuse():
    model, batches = model_and_data()
    x, y = batches[0]

    cases = [("model.parameters() under mixed precision", clip,
              {"param_dtype": torch.bfloat16})]
    print_refusals([(name, fn, torch.optim.SGD(model.parameters(), lr=0.1), kwargs)
                    for name, fn, kwargs in cases], model, x, y)


if __name__ == "__main__":
    if sys.argv[1] == "misuse":
        misuse()
    elif sys.argv[2] == "outputs":
        compare_outputs(sys.argv[1])
    elif sys.argv[2] == "compiled":
        compare_compiled(sys.argv[1])
    elif sys.argv[2] == "after-step":
        compare_after_step(sys.argv[1])
    elif sys.argv[2] == "averaged":
        compare_averaged(sys.argv[1])
    else:
        compare(sys.argv[1], sys.argv[2])
