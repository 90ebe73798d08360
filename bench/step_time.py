#!/usr/bin/python3
"""Median 1-rank step time of captured examples under spmd-run (CPU backend)
next to PyTorch eager on the same machine, model, inputs and optimizer.

  bench/step_time.py [--steps K] [--threads N] [--build DIR] [CONFIG ...]

CONFIG is a model spec as spmd-capture takes it; the default set is the
encoder and GPT examples at their repo sizes and at a larger size. PyTorch
runs the same training step (forward, loss, backward, torch.optim step) K
times after a warm-up; both medians are wall-clock per step. PyTorch uses
--threads intra-op threads (default 1: the spmd CPU kernels are
single-threaded, so 1 is the like-for-like comparison)."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import spmd_env  # noqa: E402

spmd_env.use_project_python()

import torch  # noqa: E402

from spmd_capture.trace import Optimizer, load_factory  # noqa: E402

DEFAULT = [
    "examples/encoder.py:encoder",
    "examples/encoder.py:encoder(batch=8, seq=128, d_model=256, heads=8, ffn=1024)",
    "examples/gpt.py:gpt",
    "examples/gpt.py:gpt(batch=8, seq=128, vocab=1000, d_model=256, heads=8, ffn=1024, layers=2)",
]


def eager_median(spec, optimizer, steps):
    torch.manual_seed(0)
    f = load_factory(os.path.join(ROOT, spec))
    opt, _ = Optimizer(optimizer, 1e-3 if optimizer == "adam" else 0.1).eager(
        [p for p in f.model.parameters() if p.requires_grad])
    times = []
    for i in range(steps + 2):
        start = time.perf_counter()
        opt.zero_grad()
        f.loss().backward()
        opt.step()
        if i >= 2:  # warm-up
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def spmd_median(spec, optimizer, steps, build, work, env):
    module, bundle = os.path.join(work, "m.mlir"), os.path.join(work, "b")
    subprocess.run([os.path.join(build, "bin", "spmd-capture"), "--model",
                    os.path.join(ROOT, spec), "--optimizer", optimizer, "-o", module,
                    "--bundle", bundle], check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([os.path.join(build, "bin", "spmd-run"), module, "--bundle", bundle,
                          "--steps", str(steps), "--timing"], check=True,
                         capture_output=True, text=True, env=env).stdout
    m = re.search(r"median step time ([0-9.]+) ms, peak memory ([0-9.]+) MiB", out)
    return float(m.group(1)) / 1e3, float(m.group(2))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=DEFAULT)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--optimizer", default="adam", choices=("sgd", "adam"))
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print("%-90s %12s %12s %7s %10s" % ("model (%s, 1 rank, CPU)" % args.optimizer,
                                        "spmd ms", "torch ms", "ratio", "peak MiB"))
    for spec in args.configs:
        with tempfile.TemporaryDirectory() as work:
            spmd, peak = spmd_median(spec, args.optimizer, args.steps, args.build, work,
                                     dict(os.environ, OPENBLAS_NUM_THREADS=str(args.threads)))
        eager = eager_median(spec, args.optimizer, args.steps)
        print("%-90s %12.2f %12.2f %6.2fx %10.1f" % (spec, spmd * 1e3, eager * 1e3,
                                                   spmd / eager, peak))


if __name__ == "__main__":
    main()
