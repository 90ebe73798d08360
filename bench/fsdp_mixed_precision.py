#!/usr/bin/python3
"""Mixed precision under FSDP: spmd's fsdp mode next to PyTorch's FSDP2
(`fully_shard` with `MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32)`) and next to the single-device mixed-precision step.

  bench/fsdp_mixed_precision.py [--ranks N] [--build DIR] [CONFIG ...]

One training step of each model (SGD, lr 0.1, and Adam, lr 1e-3), fp32
parameters and optimizer state, forward and backward in bf16, gradients
reduced in fp32:

  spmd   spmd-capture --param-dtype bf16, `--spmd-parallelize="mode=fsdp
         mesh=N options=reduce-dtype=f32"`, spmd-run --np N;
  FSDP2  N gloo processes, `fully_shard(mp_policy=...)` on each module-list
         element and on the root (the same units), each rank its slice of
         the batch;
  1-dev  PyTorch's single-device step under the same policy (the capture's
         reference: the forward on the parameters cast to bf16).

Printed per model, for each pair of sides: SGD, the largest difference of
the parameter updates (after - before), relative to the largest update,
over all parameters (the gradients' difference: bf16 keeps 8 significant
bits, so about 1e-2); Adam, whose first step is lr * sign(g) where |g| >>
eps, the share of elements whose updates differ by more than lr / 10 (a
gradient near zero that bf16 rounding puts on the other side). And each
side's bytes per rank of the step's collectives (spmd: --spmd-report;
FSDP2: CommDebugMode, the larger of each collective's input and output)."""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

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
    "examples/hf.py:llama(batch=8, seq=16, heads=8, kv_heads=4)",
]
OPTIMIZERS = {"sgd": 0.1, "adam": 1e-3}


def fsdp2_worker(rank, ranks, spec, optimizer, port, out):
    from torch.distributed.fsdp import MixedPrecisionPolicy
    mesh = join_gloo(rank, ranks, port)
    torch.manual_seed(0)
    f = load_factory(os.path.join(ROOT, spec))
    model = f.model
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    fully_shard_units(model, mesh, mp_policy=policy)
    cls = torch.optim.SGD if optimizer == "sgd" else torch.optim.Adam
    opt = cls(model.parameters(), lr=OPTIMIZERS[optimizer])
    f = f.converted(lambda t: torch.chunk(t, ranks)[rank] if t.dim() > 0 else t)
    mode = comm_bytes_mode()
    with mode:
        f.loss(model).backward()
        opt.step()
    full = {n: p.full_tensor().detach().float() for n, p in model.named_parameters()}
    if rank == 0:
        out.put(({n: t.numpy() for n, t in full.items()}, sum(mode.bytes.values())))
    dist.destroy_process_group()


def spmd(spec, optimizer, ranks, build, work):
    """(updated parameters by FQN, the bundle's single-device ones, the
    initial ones, bytes per rank of the gathers and reduce_scatters)."""
    bin_dir = os.path.join(build, "bin")
    module, bundle = os.path.join(work, "m.mlir"), os.path.join(work, "b")
    subprocess.run([os.path.join(bin_dir, "spmd-capture"), "--model", os.path.join(ROOT, spec),
                    "--optimizer", optimizer, "--lr", str(OPTIMIZERS[optimizer]),
                    "--param-dtype", "bf16", "-o", module, "--bundle", bundle],
                   check=True, stdout=subprocess.DEVNULL)
    parallel = os.path.join(work, "p.mlir")
    report = subprocess.run([os.path.join(bin_dir, "spmd-opt"), module,
                             "--spmd-parallelize=mode=fsdp mesh=%d options=reduce-dtype=f32"
                             % ranks, "--spmd-report", "-o", parallel],
                            check=True, capture_output=True, text=True).stdout
    nbytes = sum(int(line.split()[4]) for line in report.splitlines()
                 if line.split()[1:2] in (["all_gather"], ["reduce_scatter"]))
    out = os.path.join(work, "out")
    subprocess.run([os.path.join(bin_dir, "spmd-run"), "--np", str(ranks), parallel,
                    "--bundle", bundle, "--out", out], check=True, stdout=subprocess.DEVNULL)
    import json
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    params = {a["fqn"]: i for i, a in enumerate(manifest["args"]) if a["role"] == "param"}
    got, single, before = {}, {}, {}
    for r in manifest["results"]:
        arg = r["updates"]
        if arg is None or manifest["args"][arg]["role"] != "param":
            continue
        fqn = manifest["args"][arg]["fqn"]
        got[fqn] = np.load(os.path.join(out, os.path.basename(r["file"])))
        single[fqn] = np.load(os.path.join(bundle, r["file"]))
        before[fqn] = np.load(os.path.join(bundle, manifest["args"][params[fqn]]["file"]))
    return got, single, before, nbytes


# --check's bounds: bf16's relative rounding (spmd-run's --rtol-bf16) for
# SGD's updates, and for Adam at most 1% of elements on the other side.
CHECK = {"sgd": 2e-2, "adam": 1.0}


def update_difference(optimizer, a, b, before):
    """(value, text). SGD: max |(a - before) - (b - before)| / max |b -
    before| over all parameters. Adam: the percentage of elements whose
    updates differ by more than lr / 10 (a sign that flipped)."""
    if optimizer == "adam":
        flipped = sum(int((np.abs(a[n].astype(np.float64) - b[n]) > OPTIMIZERS["adam"] / 10)
                          .sum()) for n in before)
        share = 100.0 * flipped / sum(v.size for v in before.values())
        return share, "%.2f%%" % share
    diff = max(np.abs(a[n].astype(np.float64) - b[n]).max() for n in before)
    scale = max(np.abs(b[n].astype(np.float64) - before[n]).max() for n in before)
    return diff / scale, "%.2e" % (diff / scale)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=DEFAULT)
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--optimizers", default="sgd,adam",
                        help="comma-separated, of sgd and adam")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 unless spmd's updates are FSDP2's within bf16's "
                             "rounding (SGD: 2e-2 relative; Adam: at most 1%% of "
                             "elements on the other side)")
    args = parser.parse_args()
    status = 0
    print("%-88s %-5s %13s %13s %13s %12s %12s" % (
        "model (%d ranks, bf16 params, f32 reduce)" % args.ranks, "optim", "spmd~FSDP2",
        "spmd~1-dev", "FSDP2~1-dev", "spmd B/rank", "FSDP2 B/rank"))
    for i, spec in enumerate(args.configs):
        for j, optimizer in enumerate(args.optimizers.split(",")):
            with tempfile.TemporaryDirectory() as work:
                got, single, before, spmd_bytes = spmd(spec, optimizer, args.ranks,
                                                       args.build, work)
            fsdp2, fsdp2_bytes = run_on_ranks(fsdp2_worker, args.ranks, spec, optimizer,
                                              29700 + 2 * i + j)
            pairs = [update_difference(optimizer, x, y, before)
                     for x, y in ((got, fsdp2), (got, single), (fsdp2, single))]
            print("%-88s %-5s %13s %13s %13s %12d %12d" % (
                spec, optimizer, *(text for _, text in pairs), spmd_bytes, fsdp2_bytes))
            sys.stdout.flush()
            if pairs[0][0] > CHECK[optimizer]:
                status = 1
    if args.check:
        print("spmd's mixed-precision fsdp step %s FSDP2's within bf16's rounding"
              % ("matches" if status == 0 else "does NOT match"))
        return status
    return 0


if __name__ == "__main__":
    sys.exit(main())
