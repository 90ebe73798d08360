#!/usr/bin/python3
"""BatchNorm under data parallelism: PyTorch's own DistributedDataParallel
(no SyncBatchNorm) next to spmd's ddp mode, each checked against the
single-device training step of the same ResNet on the same batch.

  .venv/bin/python bench/batchnorm_ddp.py [--np N] [--batch B] [--bin DIR]
                                          [--markdown]

The model is examples/hf_vision.py:resnet(batch=B) (transformers
ResNetForImageClassification, random weights, train mode), one SGD step
(lr 0.1, spmd-capture's default). The reference is that step on one device
on the whole batch. PyTorch DDP: N gloo ranks under torchrun (`python -m
torch.distributed.run`), each rank the same model wrapped in
DistributedDataParallel, training on its torch.chunk of the batch (B/N
images); DDP averages the gradients, so with equal shards the averaged
gradient would be the single-device one if the forward were the same. It
is not: each rank's BatchNorm normalizes with its own B/N images'
statistics, so the loss, the gradients, the parameters after the step and
the running statistics all differ from the single-device step (and the
running statistics differ between ranks; rank 0's are reported). spmd:
spmd-capture, `spmd-opt --spmd-parallelize="mode=ddp mesh=N"` and
`spmd-run --np N --check --out DIR`: the partitioned program reduces
BatchNorm's batch statistics across the ranks, so its results match the
single-device step to float rounding. The table gives each side's largest
absolute error against the single-device step."""
import argparse
import importlib.util
import os
import shlex
import socket
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import spmd_env  # noqa: E402

spmd_env.use_project_python()

import numpy as np  # noqa: E402
import torch  # noqa: E402

FACTORY = os.path.join(ROOT, "examples", "hf_vision.py")


def resnet(batch):
    spec = importlib.util.spec_from_file_location("hf_vision", FACTORY)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.resnet(batch=batch)


def step(model, inputs, lr):
    """One SGD step; returns the loss and the model's state after it."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    opt.zero_grad()
    loss = model(**inputs).loss
    loss.backward()
    opt.step()
    return loss.detach()


def state(model, loss):
    out = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    out["loss"] = loss.numpy().copy()
    return out


def worker(out_dir, batch, lr):
    """One torchrun rank: DDP (no SyncBatchNorm) on its shard of the batch."""
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, ranks = dist.get_rank(), dist.get_world_size()
    model, inputs = resnet(batch)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    shard = {k: torch.chunk(v, ranks)[rank] for k, v in inputs.items()}
    loss = step(ddp, shard, lr)
    dist.all_reduce(loss)  # the global loss: the mean of the ranks' means
    np.savez(os.path.join(out_dir, "rank%d.npz" % rank), **state(model, loss / ranks))
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, **kw):
    print("$ " + shlex.join(cmd))
    sys.stdout.flush()
    return subprocess.run(cmd, check=True, **kw)


def max_err(ref, got, keys):
    return max(float(np.max(np.abs(got[k].astype(np.float64) - ref[k]))) for k in keys)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--np", type=int, default=4, help="ranks (default 4)")
    parser.add_argument("--batch", type=int, default=8, help="global batch (default 8)")
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"),
                        help="spmd tools (default build/bin)")
    parser.add_argument("--lr", type=float, default=0.1, help=argparse.SUPPRESS)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--worker", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.batch, args.lr)
    if args.batch % args.np:
        parser.error("--batch must be a multiple of --np")

    # The single-device step (the reference).
    model, inputs = resnet(args.batch)
    ref = state(model, step(model, inputs, args.lr))
    ref = {k: v.astype(np.float64) for k, v in ref.items()}
    params = [k for k, _ in model.named_parameters()]
    means = [k for k in ref if k.endswith(".running_mean")]
    variances = [k for k in ref if k.endswith(".running_var")]

    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    with tempfile.TemporaryDirectory() as tmp:
        # PyTorch DDP, N gloo ranks under torchrun.
        run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(args.np),
             "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
             os.path.abspath(__file__), "--worker", tmp, "--batch", str(args.batch),
             "--lr", repr(args.lr)], env=env, stdout=subprocess.DEVNULL)
        ranks = [dict(np.load(os.path.join(tmp, "rank%d.npz" % r))) for r in range(args.np)]
        torch_ddp = ranks[0]
        spread = max(max_err(ranks[0], other, means + variances) for other in ranks[1:])

        # spmd: capture, parallelize (ddp), run on N ranks, write the results.
        captured, bundle = os.path.join(tmp, "step.mlir"), os.path.join(tmp, "bundle")
        ddp_mlir, out = os.path.join(tmp, "ddp.mlir"), os.path.join(tmp, "out")
        run([os.path.join(args.bin, "spmd-capture"), "--model",
             "%s:resnet(batch=%d)" % (FACTORY, args.batch), "--optimizer", "sgd",
             "--lr", repr(args.lr), "-o", captured, "--bundle", bundle],
            stdout=subprocess.DEVNULL)
        run([os.path.join(args.bin, "spmd-opt"), captured,
             "--spmd-parallelize=mode=ddp mesh=%d" % args.np, "-o", ddp_mlir])
        check = run([os.path.join(args.bin, "spmd-run"), "--np", str(args.np), ddp_mlir,
                     "--bundle", bundle, "--check", "--out", out],
                    env=env, capture_output=True, text=True)
        spmd = {k: np.load(os.path.join(out, k + ".npy")) for k in ref}
        verdict = check.stdout.strip().splitlines()[-1]
        # The bundle's single-device results (spmd-capture's PyTorch step)
        # against this script's own single-device step: the same step.
        bundle_diff = max(
            float(np.max(np.abs(np.load(os.path.join(bundle, "results", k + ".npy")) - ref[k])))
            for k in ref)

    rows = [("loss", ["loss"]), ("parameters after the step", params),
            ("BatchNorm running_mean", means), ("BatchNorm running_var", variances)]
    head = ("quantity (vs the single-device step)",
            "PyTorch DDP (%d gloo ranks, no SyncBatchNorm) max |err|" % args.np,
            "spmd ddp %d max |err|" % args.np)
    table = [(name, "%.2e" % max_err(ref, torch_ddp, keys), "%.2e" % max_err(ref, spmd, keys))
             for name, keys in rows]
    print()
    if args.markdown:
        for row in [head, ("---",) * 3] + table:
            print("| %s |" % " | ".join(c.replace("|", "\\|") for c in row))
    else:
        widths = [max(len(r[i]) for r in table + [head]) for i in range(3)]
        for row in [head] + table:
            print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                            for i, (c, w) in enumerate(zip(row, widths))))
    print()
    print("model: %s:resnet(batch=%d), SGD lr %g, %d images per rank"
          % (os.path.relpath(FACTORY, ROOT), args.batch, args.lr, args.batch // args.np))
    print("PyTorch DDP: rank 0's results; the ranks' running statistics differ from "
          "each other by up to %.2e" % spread)
    print("spmd: %s" % verdict)
    print("reference: this script's single-device step vs spmd-capture's bundle: "
          "max |diff| %.2e" % bundle_diff)
    return 0


if __name__ == "__main__":
    sys.exit(main())
