"""What spmd.compile's kept programs and eval step save, on the GPT example
(examples/gpt.py: d_model 256, 8 heads, FFN 1024, 4 layers, vocabulary
256, sequence 128; 3.3 M parameters) with AdamW:

  mpirun -np 2 .venv/bin/python bench/python_api.py [--mode fsdp] [--epochs 3]

- Kept programs: `--epochs` epochs of batches 16, 16, 16 and a smaller last
  one of 10 (a DataLoader with drop_last=False), with cache_size=1 (every
  switch compiles, as before programs were kept) and with the default (8):
  each call's seconds and the compiles so far.
- Eval step: a held-out batch of 32 x 128 tokens, four times, through the
  eval step (on the sharded state) and through sync(model) followed by eager
  PyTorch on every rank: seconds each, and both losses.

Prints on rank 0; every figure is wall-clock time of the call on this
machine.
"""
import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "examples"), os.path.join(HERE, "..", "python")]

import torch  # noqa: E402

import spmd  # noqa: E402
from gpt import GPT  # noqa: E402


def loss_of(model, x, y):
    logits = model(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             y.reshape(-1))


def train_fn(model, optimizer, x, y):
    loss = loss_of(model, x, y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss


def setup(mode, cache_size):
    torch.manual_seed(0)
    model = GPT(256, 128, 256, 8, 1024, 4, 0.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, optimizer, spmd.compile(parallel_mode=mode, cache_size=cache_size)(train_fn)


def say(line):
    if spmd.rank() == 0:
        print(line, flush=True)


def kept_programs(mode, epochs, cache_size):
    model, optimizer, step = setup(mode, cache_size)
    g = torch.Generator().manual_seed(1)
    say("cache_size=%d" % cache_size)
    for epoch in range(epochs):
        for b in (16, 16, 16, 10):
            x, y = (torch.randint(0, 256, (b, 128), generator=g) for _ in range(2))
            t = time.perf_counter()
            step(model, optimizer, x, y).item()
            say("  epoch %d batch %2d  %.2f s  compiles %d" % (
                epoch + 1, b, time.perf_counter() - t, step.compiles))


def eval_step(mode):
    model, optimizer, step = setup(mode, 8)
    evaluate = step.eval_step(loss_of)
    g = torch.Generator().manual_seed(2)
    x, y, vx, vy = (torch.randint(0, 256, (b, 128), generator=g) for b in (16, 16, 32, 32))
    step(model, optimizer, x, y)
    model.eval()
    say("eval step against sync(model) + eager, held-out batch 32 x 128")
    for _ in range(4):
        t = time.perf_counter()
        got = evaluate(model, vx, vy).item()
        ours = time.perf_counter() - t
        t = time.perf_counter()
        step.sync(model)
        with torch.no_grad():
            want = loss_of(model, vx, vy).item()
        theirs = time.perf_counter() - t
        say("  eval step %.3f s (loss %.6f)   sync + eager %.3f s (loss %.6f)"
            % (ours, got, theirs, want))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", default="fsdp", choices=("ddp", "fsdp"))
    p.add_argument("--epochs", type=int, default=3)
    args = p.parse_args()
    for cache_size in (1, 8):
        kept_programs(args.mode, args.epochs, cache_size)
    eval_step(args.mode)


if __name__ == "__main__":
    main()
