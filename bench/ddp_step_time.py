#!/usr/bin/python3
"""4-rank data-parallel step time: spmd's ddp mode next to PyTorch's own
DistributedDataParallel (gloo) on the same machine, model, batch and
optimizer.

  bench/ddp_step_time.py [--ranks N] [--steps K] [--build DIR] [CONFIG ...]

spmd: the step is captured (spmd-capture), parallelized with
`--spmd-parallelize="mode=ddp mesh=N"` and run by `spmd-run --np N
--timing --steps K` (median step time of rank 0). PyTorch: N processes
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
import torch.multiprocessing as mp  # noqa: E402

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


def torch_median(spec, ranks, steps, port):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=torch_worker, args=(r, ranks, spec, steps, port, out))
             for r in range(ranks)]
    for p in procs:
        p.start()
    result = out.get()
    for p in procs:
        p.join()
    return result


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=DEFAULT)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    print("%-100s %10s %10s %7s" % ("model (adam, %d ranks, CPU, ddp)" % args.ranks,
                                    "spmd ms", "torch ms", "ratio"))
    for i, spec in enumerate(args.configs):
        with tempfile.TemporaryDirectory() as work:
            spmd = spmd_median(spec, args.ranks, args.steps, args.build, work)
        eager = torch_median(spec, args.ranks, args.steps, 29500 + i)
        print("%-100s %10.2f %10.2f %6.2fx" % (spec, spmd * 1e3, eager * 1e3, spmd / eager))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
