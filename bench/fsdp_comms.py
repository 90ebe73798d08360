#!/usr/bin/python3
"""FSDP communication per training step: spmd's fsdp mode next to PyTorch's
FSDP2 (`fully_shard`) on the same model, optimizer and mesh.

  bench/fsdp_comms.py [--ranks N] [--reshard-after-forward true|false|G]
                      [--build DIR] [CONFIG ...]

Both sides shard every parameter on dim 0 over N ranks and use the same
units: FSDP2's `fully_shard` on each module-list element (each transformer
layer) and on the root, spmd's fsdp mode with its default `units` (the same
modules). spmd: the step is captured (spmd-capture --no-reference) and
parallelized (`--spmd-parallelize="mode=fsdp mesh=N"`); the counts and bytes
are `--spmd-report`'s totals per step. Also shown: `units=none` (one
collective per parameter, what spmd did before units). FSDP2: N gloo
processes, one Adam step under PyTorch's CommDebugMode, which counts the
collectives; bytes per rank are the larger of each collective's input and
output on rank 0 (spmd-report's measure). The loss is a scalar on every
rank in both (spmd's 4-byte all_reduces of the loss count here; FSDP2's
have no equivalent: its loss stays per-rank). `--reshard-after-forward`
sets both sides' reshard policy (FSDP2's `reshard_after_forward`: a bool,
or G, a group size that divides N: backward gathers over groups of G
ranks); spmd-report's rows then name the post-forward mesh dim
(`dp_shard`) of each backward gather."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import spmd_env  # noqa: E402

spmd_env.use_project_python()

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from gloo_ranks import comm_bytes_mode, fully_shard_units, join_gloo, run_on_ranks  # noqa: E402,E501
from spmd_capture.trace import load_factory  # noqa: E402

DEFAULT = [
    "examples/gpt.py:gpt(batch=8, seq=16, vocab=64, d_model=64, heads=4, ffn=128, layers=2)",
    "examples/gpt.py:gpt(batch=8, seq=16, vocab=64, d_model=64, heads=4, ffn=128, layers=8)",
    "examples/llama.py:llama(batch=8)",
]


def reshard_value(text):
    """FSDP2's `reshard_after_forward` for the option's text."""
    return {"true": True, "false": False}[text] if text in ("true", "false") else int(text)


def fsdp2_worker(rank, ranks, spec, port, reshard, out):
    mesh = join_gloo(rank, ranks, port)
    torch.manual_seed(0)
    f = load_factory(os.path.join(ROOT, spec))
    model = f.model
    fully_shard_units(model, mesh, reshard_after_forward=reshard_value(reshard))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    f = f.converted(lambda t: torch.chunk(t, ranks)[rank] if t.dim() > 0 else t)
    mode = comm_bytes_mode()
    with mode:
        f.loss(model).backward()
        opt.step()
    if rank == 0:
        counts = {str(k): v for k, v in mode.get_comm_counts().items() if v}
        out.put((counts, sum(mode.bytes.values())))
    dist.destroy_process_group()


def spmd(spec, ranks, build, work, units, reshard):
    module = os.path.join(work, "m.mlir")
    bin_dir = os.path.join(build, "bin")
    if not os.path.exists(module):
        subprocess.run([os.path.join(bin_dir, "spmd-capture"), "--model",
                        os.path.join(ROOT, spec), "--optimizer", "adam", "--no-reference",
                        "-o", module, "--bundle", os.path.join(work, "b")],
                       check=True, stdout=subprocess.DEVNULL)
    options = ["reshard-after-forward=" + reshard] + ([] if units is None else ["units=" + units])
    option = " options=" + ";".join(options)
    report = subprocess.run([os.path.join(bin_dir, "spmd-opt"), module,
                             "--spmd-parallelize=mode=fsdp mesh=%d%s" % (ranks, option),
                             "--spmd-report", "-o", os.devnull],
                            check=True, capture_output=True, text=True).stdout
    kinds = {k: int(n) for k, n in re.findall(r"total (\w+): (\d+) collectives", report)}
    m = re.search(r"total per step: (\d+) collectives, (\d+) bytes/rank", report)
    return kinds, int(m.group(1)), int(m.group(2))


def describe(kinds):
    short = {"all_gather": "AG", "reduce_scatter": "RS", "all_reduce": "AR",
             "all_gather_into_tensor": "AG", "reduce_scatter_tensor": "RS",
             "_allgather_base_": "AG", "_reduce_scatter_base_": "RS"}
    return " ".join("%s %d" % (short.get(k.split(".")[-1], k.split(".")[-1]), n)
                    for k, n in sorted(kinds.items()))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=DEFAULT)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--reshard-after-forward", default="true")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    reshard = args.reshard_after_forward
    print("%-90s %-26s %8s %10s" % ("model (adam, %d ranks, fsdp, reshard-after-forward=%s)"
                                   % (args.ranks, reshard), "side", "colls", "bytes/rank"))
    for i, spec in enumerate(args.configs):
        with tempfile.TemporaryDirectory() as work:
            for units, name in ((None, "spmd fsdp (units)"), ("none", "spmd fsdp units=none")):
                kinds, count, nbytes = spmd(spec, args.ranks, args.build, work, units, reshard)
                print("%-90s %-26s %8d %10d  %s" % (spec, name, count, nbytes, describe(kinds)))
        counts, nbytes = run_on_ranks(fsdp2_worker, args.ranks, spec, 29600 + i, reshard)
        print("%-90s %-26s %8d %10d  %s" % (spec, "FSDP2 fully_shard", sum(counts.values()),
                                           nbytes, describe(counts)))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
