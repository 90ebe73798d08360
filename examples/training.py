"""The training loop the spmd.compile examples share (train_lm.py,
train_digits.py): options, the compiled step, a PyTorch single-device
reference run beside it, checkpoints, progress lines.

Every rank builds the same model (same seed) and draws the same global
batches; spmd.compile keeps each rank's piece. With --reference, rank 0 also
trains a copy of the model with PyTorch alone, from step 0 (a resumed run
replays the steps before the checkpoint), and every step's loss must agree
to --rtol relative, and the parameters at the end; the exit status says
whether they did. With --param-dtype bf16 (mixed precision, FSDP2's policy)
both sides compute in bf16 on casts of the fp32 parameters, and --rtol
defaults to bf16's 2e-2.

The step is written as a training script writes it, and both sides run the
same function: --micro K loops backward() over K micro-batches (gradient
accumulation), --accumulate-calls K spreads each optimizer step over K
calls of the step on K batches (backward() in every call, step() in the
K-th: gradient accumulation across calls, as transformers' Trainer's
gradient_accumulation_steps), --clip-grad-norm clips with torch.nn.utils.clip_grad_norm_
between backward() and step(), --weight-decay puts the matrices in a
parameter group with that decay and the other parameters in one without
(transformers' Trainer's grouping)."""
import argparse
import contextlib
import copy
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import torch  # noqa: E402

import spmd  # noqa: E402
from spmd_capture.trace import MixedPrecision  # noqa: E402
from torch.nn.utils.stateless import _reparametrize_module  # noqa: E402


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--mode", default="ddp", choices=("ddp", "fsdp", "tp", "fsdp-tp"))
    p.add_argument("--mesh", help="device mesh shape, e.g. 4 or 2x2 (default: all ranks)")
    p.add_argument("--plan", help="tensor-parallel plan (tp, fsdp-tp; default: the example's)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--optimizer", choices=("sgd", "adam", "adamw"), default="adamw")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", metavar="DIR", help="save a sharded checkpoint here")
    p.add_argument("--save-at", type=int, metavar="STEP",
                   help="save after this many steps (default: at the end)")
    p.add_argument("--stop-at", type=int, metavar="STEP",
                   help="stop after this many steps (an interrupted run)")
    p.add_argument("--resume", metavar="DIR", help="resume from a checkpoint")
    p.add_argument("--reference", action="store_true",
                   help="check every step against PyTorch's single-device training")
    p.add_argument("--rtol", type=float,
                   help="tolerance of --reference (default 1e-4; 2e-2 with --param-dtype)")
    p.add_argument("--param-dtype", choices=("bf16",),
                   help="mixed precision: compute in this dtype on casts of the fp32 "
                        "parameters (spmd.compile's param_dtype)")
    p.add_argument("--reduce-dtype", choices=("bf16", "f32"),
                   help="the gradients' reduction dtype under mixed precision "
                        "(default: the compute dtype)")
    p.add_argument("--report", action="store_true",
                   help="print the per-rank program's collectives")
    p.add_argument("--every", type=int, default=10, help="progress line every N steps")
    p.add_argument("--micro", type=int, default=1, metavar="K",
                   help="gradient accumulation: K micro-batches, a backward() each")
    p.add_argument("--accumulate-calls", type=int, default=1, metavar="K",
                   help="gradient accumulation across calls: K calls of the step, on K "
                        "batches, per optimizer step")
    p.add_argument("--unsharded-grads", action="store_true",
                   help="fsdp, fsdp-tp with --accumulate-calls: the gradients carried "
                        "between calls stay unsharded and are reduce-scattered in the "
                        "call that steps (FSDP2's set_requires_gradient_sync(False))")
    p.add_argument("--clip-grad-norm", type=float, metavar="MAX",
                   help="clip the gradients' total norm to MAX in the step")
    p.add_argument("--weight-decay", type=float, default=0.0,
                   help="decay of the matrices' group (the others' is 0)")
    p.add_argument("--overlap", type=int, default=0, metavar="N",
                   help="asynchronous collectives, N per class in flight (0: synchronous)")
    p.add_argument("--eval-every", type=int, default=0, metavar="N",
                   help="a validation pass on the held-out data every N steps and after "
                        "the last (spmd.compile's eval step, on the sharded state)")
    return p


def make_optimizer(name, model, lr, weight_decay):
    """The optimizer of `model`; with a weight decay, two parameter groups:
    the matrices with it, the rest (biases, norms) without."""
    params = list(model.parameters())
    if weight_decay:
        params = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    return (torch.optim.Adam if name == "adam" else torch.optim.AdamW)(params, lr=lr)


def step_body(args, loss_fn, forward=None):
    """train_step(model, optimizer, *data, sync=True) as a script writes it:
    the loss of each of --micro micro-batches (split along dim 0) divided by
    their number (and by --accumulate-calls), a backward() each; with
    `sync`, clipping and the optimizer step. Returns the loss of the whole
    batch. `forward(model)` is a context the losses are computed in (the
    reference's mixed-precision casts)."""
    def train_step(model, optimizer, *data, sync=True):
        total = None
        for micro in zip(*(d.chunk(args.micro) for d in data)):
            with forward(model) if forward else contextlib.nullcontext():
                loss = loss_fn(model, *micro)
            if args.micro * args.accumulate_calls > 1:
                loss = loss / (args.micro * args.accumulate_calls)
            loss.backward()
            total = loss.detach() if total is None else total + loss.detach()
        if not sync:
            return total
        if args.clip_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip_grad_norm)
        optimizer.step()
        optimizer.zero_grad()
        return total
    return train_step


def cosine(step, steps, lr):
    """The learning rate of `step` (0-based): linear warm-up over 5 steps,
    then cosine decay to a tenth."""
    if step < 5:
        return lr * (step + 1) / 5
    return lr * (0.1 + 0.45 * (1 + math.cos(math.pi * (step - 5) / max(steps - 5, 1))))


def train(args, model, loss_fn, batch, tokens_per_step, default_plan=None, evaluate=None,
          held_out=None):
    """Trains `model` for args.steps steps of loss_fn(model, *batch(step));
    then writes the trained state back into `model` and prints
    evaluate(model) (a line) on rank 0. With --eval-every N, `held_out` is
    (eval_fn(model, *data) -> {name: 0-dim tensor}, data): a validation pass
    in eval mode every N steps, through the train step's eval step, checked
    against PyTorch's on the reference under --reference. Returns the
    process exit status."""
    if args.rtol is None:
        args.rtol = 2e-2 if args.param_dtype else 1e-4

    train_step = spmd.compile(
        parallel_mode=args.mode, mesh=args.mesh,
        plan=args.plan or (default_plan if args.mode in ("tp", "fsdp-tp") else None),
        report=args.report, seed=args.seed,
        options=dict({"overlap": args.overlap} if args.overlap else {},
                     **({"carried-grads": "unsharded"} if args.unsharded_grads else {})),
        param_dtype=args.param_dtype, reduce_dtype=args.reduce_dtype)(step_body(args, loss_fn))

    rank = spmd.rank()
    reference = copy.deepcopy(model) if args.reference and rank == 0 else None
    optimizer = make_optimizer(args.optimizer, model, args.lr, args.weight_decay)
    ref_opt = make_optimizer(args.optimizer, reference, args.lr, args.weight_decay) \
        if reference is not None else None
    if args.resume:
        train_step.load(args.resume)  # applied when the first call compiles
    start = train_step.steps
    worst_loss, status = 0.0, 0

    policy = MixedPrecision(torch.bfloat16) if args.param_dtype else None

    @contextlib.contextmanager
    def cast(model):
        # The policy on one device: the forward reads bf16 casts of the fp32
        # parameters, whose gradients come back in fp32.
        with _reparametrize_module(model, policy.params(dict(model.named_parameters()), model),
                                   tie_weights=True), policy.forward_inputs(model):
            yield

    eager_step = step_body(args, loss_fn, cast if policy is not None else None)

    eval_step = train_step.eval_step(held_out[0]) if held_out and args.eval_every else None

    def validate(step):
        """The validation line after `step` steps; whether it mismatches."""
        model.eval()
        got = eval_step(model, *held_out[1])
        model.train()
        line = "eval after step %4d  " % step + "  ".join(
            "%s %.6f" % (k, v.item()) for k, v in got.items())
        if reference is None:
            return line, False
        reference.eval()
        with torch.no_grad(), cast(reference) if policy is not None else contextlib.nullcontext():
            want = held_out[0](reference, *held_out[1])
        reference.train()
        rel = max(abs(got[k].item() - want[k].item()) / max(abs(want[k].item()), 1e-12)
                  for k in got)
        line += "  pytorch %s  rel %.1e" % (
            "  ".join("%.6f" % v.item() for v in want.values()), rel)
        return line + ("  MISMATCH" if rel > args.rtol else ""), rel > args.rtol

    def calls(fn, model, optimizer, step):
        """Optimizer step `step` (0-based): --accumulate-calls calls of `fn`
        on batches K * step, ...; the sum of their losses."""
        k = args.accumulate_calls
        return sum(fn(model, optimizer, *batch(k * step + c), sync=c == k - 1).item()
                   for c in range(k))

    def reference_step(step):
        for g in ref_opt.param_groups:
            g["lr"] = cosine(step, args.steps, args.lr)
        return calls(eager_step, reference, ref_opt, step)

    if reference is not None:
        for step in range(start):  # what the checkpoint holds
            reference_step(step)
    stop = min(args.stop_at or args.steps, args.steps)
    t0, seen = time.perf_counter(), 0
    for step in range(start, stop):
        for g in optimizer.param_groups:
            g["lr"] = cosine(step, args.steps, args.lr)
        loss = calls(train_step, model, optimizer, step)
        seen += tokens_per_step * args.accumulate_calls
        line = "step %4d  loss %.6f  lr %.2e" % (step + 1, loss, optimizer.param_groups[0]["lr"])
        if reference is not None:
            ref = reference_step(step)
            rel = abs(loss - ref) / max(abs(ref), 1e-12)
            worst_loss = max(worst_loss, rel)
            line += "  pytorch %.6f  rel %.1e" % (ref, rel)
            if rel > args.rtol:
                status = 1
                line += "  MISMATCH"
        if rank == 0 and ((step + 1) % args.every == 0 or step == start or step + 1 == stop
                          or status):
            elapsed = time.perf_counter() - t0
            print("%s  %.0f tokens/s" % (line, seen / elapsed), flush=True)
        if eval_step is not None and ((step + 1) % args.eval_every == 0 or step + 1 == stop):
            line, bad = validate(step + 1)
            status = status or int(bad)
            if rank == 0:
                print(line, flush=True)
        if args.checkpoint and args.save_at == step + 1:
            train_step.save(args.checkpoint)
            if rank == 0:
                print("saved %s after step %d" % (args.checkpoint, step + 1), flush=True)
    if args.checkpoint and args.save_at is None:
        train_step.save(args.checkpoint)
    train_step.sync(model, optimizer)
    if reference is not None:
        # In norm, over the whole model: elementwise, an element near zero has
        # no relative precision, and a tensor whose gradient is zero up to
        # rounding (attention's key bias: softmax ignores it) moves by
        # Adam's normalized noise, of order lr per step, on both sides.
        pairs = list(zip(model.named_parameters(), reference.parameters()))
        diff = torch.stack([torch.linalg.vector_norm(p.detach() - r.detach())
                            for (_, p), r in pairs])
        norm = torch.stack([torch.linalg.vector_norm(r.detach()) for _, r in pairs])
        params = (torch.linalg.vector_norm(diff) / torch.linalg.vector_norm(norm)).item()
        worst = int((diff / norm.clamp(min=1e-30)).argmax())
        print("largest difference of one tensor, relative to its norm: %.1e (%s)"
              % ((diff[worst] / norm[worst]).item(), pairs[worst][0][0]))
        ok = params <= args.rtol and not status
        print("spmd %s on mesh %s, %d ranks: steps %d-%d against PyTorch: largest loss "
              "difference %.1e, parameters %.1e (relative, in norm over the model): %s" % (
                  args.mode, args.mesh or spmd.world_size(), spmd.world_size(), start + 1, stop,
                  worst_loss, params, "match" if ok else "MISMATCH"), flush=True)
        status = 0 if ok else 1
    if rank == 0:
        if evaluate is not None:
            print(evaluate(model), flush=True)
        print("compiled %d time(s)" % train_step.compiles, flush=True)
    return status
