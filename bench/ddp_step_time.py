#!/usr/bin/python3
"""4-rank data-parallel step time: spmd's ddp mode, run by spmd-run and from
Python (spmd.compile), next to PyTorch's own DistributedDataParallel (gloo)
on the same machine, model, batch and optimizer.

  bench/ddp_step_time.py [--ranks N] [--steps K] [--build DIR] [CONFIG ...]

spmd: the step is captured (spmd-capture), parallelized with
`--spmd-parallelize="mode=ddp mesh=N"` and run by `spmd-run --np N
--timing --steps K` (median step time of rank 0). spmd.compile: `mpirun -np
N` processes each calling the compiled step on the global batch, K timed
calls after two warm-up calls (the first compiles), median on rank 0; a call
includes setting the batch and returning the loss. PyTorch: N processes
(torch.multiprocessing), `init_process_group("gloo")`, the model wrapped in
DistributedDataParallel, each rank training on its torch.chunk of the batch
(the same split as Shard(0)), K timed steps after two warm-up steps, median
on rank 0. Both sides use one thread per rank (OPENBLAS_NUM_THREADS=1,
torch.set_num_threads(1)), so the comparison is like for like on any core
count; on a machine with fewer cores than ranks both are oversubscribed."""
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
import torch.distributed as dist  # noqa: E402

from gloo_ranks import run_on_ranks  # noqa: E402
from spmd_capture.trace import Optimizer, load_factory  # noqa: E402

DEFAULT = [
    "examples/gpt.py:gpt(batch=8, seq=64, vocab=512, d_model=128, heads=4, ffn=512, layers=2)",
    "examples/gpt.py:gpt(batch=16, seq=128, vocab=1000, d_model=256, heads=8, ffn=1024, layers=2)",
]


def torch_worker(rank, ranks, spec, steps, port, out):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    torch.manual_seed(0)
    f = load_factory(os.path.join(ROOT, spec))
    model = torch.nn.parallel.DistributedDataParallel(f.model)
    opt, _ = Optimizer("adam", 1e-3).eager([p for p in model.parameters() if p.requires_grad])
    f = f.converted(lambda t: torch.chunk(t, ranks)[rank] if t.dim() > 0 else t)
    times = []
    for i in range(steps + 2):
        dist.barrier()
        start = time.perf_counter()
        opt.zero_grad()
        f.loss(model).backward()
        opt.step()
        if i >= 2:
            times.append(time.perf_counter() - start)
    if rank == 0:
        out.put(statistics.median(times))
    dist.destroy_process_group()


def spmd_median(spec, ranks, steps, build, work):
    module, bundle = os.path.join(work, "m.mlir"), os.path.join(work, "b")
    dist_module = os.path.join(work, "ddp.mlir")
    bin_dir = os.path.join(build, "bin")
    subprocess.run([os.path.join(bin_dir, "spmd-capture"), "--model", os.path.join(ROOT, spec),
                    "--optimizer", "adam", "-o", module, "--bundle", bundle],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([os.path.join(bin_dir, "spmd-opt"), module,
                    "--spmd-parallelize=mode=ddp mesh=%d" % ranks, "-o", dist_module],
                   check=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run([os.path.join(bin_dir, "spmd-run"), "--np", str(ranks), dist_module,
                          "--bundle", bundle, "--steps", str(steps), "--timing"],
                         check=True, capture_output=True, text=True, env=env).stdout
    m = re.search(r"median step time ([0-9.]+) ms", out)
    return float(m.group(1)) / 1e3


def python_worker(spec, steps):
    """One rank of the spmd.compile measurement (under mpirun)."""
    import spmd
    torch.set_num_threads(1)
    torch.manual_seed(0)
    f = load_factory(os.path.join(ROOT, spec))
    opt = torch.optim.Adam([p for p in f.model.parameters() if p.requires_grad], lr=1e-3)
    inputs = [t for _, t in f.tensors("input")]

    @spmd.compile(parallel_mode="ddp")
    def step(model, optimizer, *batch):
        loss = f.loss_fn(model(*batch[:len(inputs)]), *batch[len(inputs):])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss
    batch = inputs + [t for _, t in f.tensors("target")]
    times = []
    for i in range(steps + 2):
        start = time.perf_counter()
        step(f.model, opt, *batch)
        if i >= 2:
            times.append(time.perf_counter() - start)
    if spmd.rank() == 0:
        print("median %.9f" % statistics.median(times))


def python_median(spec, ranks, steps, build):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", SPMD_BUILD_DIR=build)
    out = subprocess.run(["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks),
                          sys.executable, os.path.abspath(__file__), "--python-worker", spec,
                          "--steps", str(steps)],
                         check=True, capture_output=True, text=True, env=env).stdout
    return float(re.search(r"median ([0-9.]+)", out).group(1))


def main():
    if sys.argv[1:2] == ["--python-worker"]:
        return python_worker(sys.argv[2], int(sys.argv[4]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=DEFAULT)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    print("%-100s %10s %12s %10s %7s" % ("model (adam, %d ranks, CPU, ddp)" % args.ranks,
                                         "spmd ms", "compile() ms", "torch ms", "ratio"))
    for i, spec in enumerate(args.configs):
        with tempfile.TemporaryDirectory() as work:
            spmd = spmd_median(spec, args.ranks, args.steps, args.build, work)
        python = python_median(spec, args.ranks, args.steps, args.build)
        eager = run_on_ranks(torch_worker, args.ranks, spec, args.steps, 29500 + i)
        print("%-100s %10.2f %12.2f %10.2f %6.2fx" % (spec, spmd * 1e3, python * 1e3,
                                                     eager * 1e3, spmd / eager))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
