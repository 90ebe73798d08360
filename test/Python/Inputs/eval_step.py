"""spmd.compile's eval step (CompiledStep.eval_step) on a small MLP with
BatchNorm, against the same functions run by eager PyTorch on one process.

  eval_step.py MODE [PLAN]   a validation pass (loss and accuracy) before
                             training and after each of 4 train calls, in
                             eval mode (BatchNorm's running statistics):
                             each matches eager, and training is unchanged
  eval_step.py MODE other    an eval step called with another model (an
                             EMA copy) runs on that model's values
  eval_step.py MODE train    an eval step in training mode updates
                             BatchNorm's running statistics in the train
                             step's state, as PyTorch does
  eval_step.py MODE misuse   an eval step that returns no tensor
"""
import copy
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import spmd
from guard import step_fn as train_fn


def model_and_data(eval_batch):
    torch.manual_seed(0)
    # No bias before BatchNorm (it removes it: Adam would amplify rounding).
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3, bias=False),
                          nn.BatchNorm1d(3))
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g))
               for _ in range(4)]
    held_out = (torch.randn(eval_batch, 6, generator=g),
                torch.randint(0, 3, (eval_batch,), generator=g))
    return model, batches, held_out


def eval_fn(model, x, y):
    logits = model(x)
    return {"loss": F.cross_entropy(logits, y),
            "accuracy": (logits.argmax(1) == y).float().mean()}


def close(a, b):
    return all(torch.allclose(a[k], b[k], rtol=1e-5, atol=1e-6) for k in a)


def eager_eval(model, x, y):
    with torch.no_grad():
        return eval_fn(model, x, y)


def validate(mode, plan):
    model, batches, (vx, vy) = model_and_data(10)
    reference = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    ref_opt = torch.optim.Adam(reference.parameters(), lr=1e-2)
    train_step = spmd.compile(parallel_mode=mode, plan=plan)(train_fn)
    evaluate = train_step.eval_step(eval_fn)
    evals, losses = [], []
    for k in range(len(batches) + 1):
        model.eval()
        reference.eval()
        evals.append(close(evaluate(model, vx, vy), eager_eval(reference, vx, vy)))
        if k == len(batches):
            break
        model.train()
        reference.train()
        loss = train_step(model, opt, *batches[k]).item()
        ref = train_fn(reference, ref_opt, *batches[k]).item()
        losses.append(abs(loss - ref) <= 1e-5 * abs(ref))
    state = train_step.state_dict()
    params = all(torch.allclose(state[n], t, rtol=1e-5, atol=1e-6)
                 for n, t in list(reference.named_parameters()) + list(reference.named_buffers()))
    if spmd.rank() == 0:
        print("%s: %d evals %s eager, %d train losses %s, state %s; compiles %d + %d; "
              "the eval batch %s" % (
                  mode, len(evals), "match" if all(evals) else "DIFFER FROM",
                  len(losses), "match" if all(losses) else "DIFFER",
                  "matches" if params else "DIFFERS", train_step.compiles, evaluate.compiles,
                  evaluate.layouts()["input.0"]))


def other(mode):
    model, batches, (vx, vy) = model_and_data(10)
    ema = copy.deepcopy(model)
    with torch.no_grad():
        for p in ema.parameters():
            p.mul_(0.5)
    ema.eval()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_step = spmd.compile(parallel_mode=mode)(train_fn)
    evaluate = train_step.eval_step(eval_fn)
    train_step(model, opt, *batches[0])
    got = evaluate(ema, vx, vy)
    if spmd.rank() == 0:
        print("%s other model: %s eager on its values" % (
            mode, "matches" if close(got, eager_eval(ema, vx, vy)) else "DIFFERS FROM"))


def train_mode(mode):
    model, batches, (vx, vy) = model_and_data(10)
    reference = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    train_step = spmd.compile(parallel_mode=mode)(train_fn)
    evaluate = train_step.eval_step(eval_fn)
    train_step(model, opt, *batches[0])
    train_fn(reference, ref_opt, *batches[0])
    got = evaluate(model, vx, vy)  # training mode: batch statistics, updated
    want = eager_eval(reference, vx, vy)
    loss = train_step(model, opt, *batches[1]).item()
    ref = train_fn(reference, ref_opt, *batches[1]).item()
    state = train_step.state_dict()
    stats = all(torch.allclose(state["3." + n], b, rtol=1e-5, atol=1e-6)
                for n, b in reference[3].named_buffers())
    if spmd.rank() == 0:
        print("%s training mode: eval %s, running statistics %s, next loss %s" % (
            mode, "matches" if close(got, want) else "DIFFERS",
            "match" if stats else "DIFFER",
            "matches" if abs(loss - ref) <= 1e-5 * abs(ref) else "DIFFERS"))


def misuse(mode):
    model, batches, (vx, vy) = model_and_data(10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_step = spmd.compile(parallel_mode=mode)(train_fn)

    def nothing(model, x, y):
        model(x)

    try:
        train_step.eval_step(nothing)(model, vx, vy)
        print("no error")
    except spmd.SpmdError as e:
        if spmd.rank() == 0:
            print("SpmdError: %s" % e)


if __name__ == "__main__":
    mode, case = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
    if case == "other":
        other(mode)
    elif case == "train":
        train_mode(mode)
    elif case == "misuse":
        misuse(mode)
    else:
        validate(mode, case)
