#!/usr/bin/python3
"""Compile time of sharding propagation and partitioning per 1,000 ops on
captured GPT-style training steps (forward, backward, Adam) of growing depth.

  bench/compile_time.py [--build DIR] [--layers 2,8,32] [--mesh 4 2x2] [--repeat R]

For each depth the GPT example (examples/gpt.py, d_model 256, 8 heads) is
captured once; its inputs and targets are sharded on the batch
(test/Partition/Inputs/annotate.py, as the data-parallel mode would), and
`spmd-opt --spmd-propagate --spmd-partition --mlir-timing` runs R times on
each mesh. The table gives the aten op count, the median wall time of each
pass from MLIR's own pass timing, and milliseconds per 1,000 ops: the
compile-time cost that DTensor pays at run time on every step (~90 us per
op) and spmd pays once."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import spmd_env  # noqa: E402

spmd_env.use_project_python()


def pass_seconds(output, name):
    m = re.search(r"^\s*([0-9.]+) \(\s*[0-9.]+%\)\s+" + name + "$", output, re.M)
    return float(m.group(1)) if m else float("nan")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--layers", default="2,8,32")
    parser.add_argument("--mesh", nargs="*", default=["4", "2x2"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tools = os.path.join(args.build, "bin")
    print("%-8s %-5s %7s %12s %12s %12s" % ("layers", "mesh", "ops", "propagate ms",
                                             "partition ms", "ms / 1k ops"))
    with tempfile.TemporaryDirectory() as tmp:
        for layers in [int(x) for x in args.layers.split(",")]:
            spec = ("%s/examples/gpt.py:gpt(batch=8, seq=128, vocab=1000, d_model=256, "
                    "heads=8, ffn=1024, layers=%d)" % (ROOT, layers))
            captured = os.path.join(tmp, "gpt%d.mlir" % layers)
            subprocess.run([os.path.join(tools, "spmd-capture"), "--model", spec,
                            "--optimizer", "adam", "-o", captured,
                            "--bundle", os.path.join(tmp, "b%d" % layers)],
                           check=True, stdout=subprocess.DEVNULL)
            ops = len(re.findall(r"= aten\.", open(captured).read()))
            for mesh in args.mesh:
                placements = "shard<0>" + ", replicate" * (len(mesh.split("x")) - 1)
                annotated = os.path.join(tmp, "gpt%d-%s.mlir" % (layers, mesh))
                subprocess.run([sys.executable, os.path.join(ROOT, "test/Partition/Inputs/annotate.py"),
                                captured, annotated, "--mesh", mesh,
                                "--layout", "input=" + placements,
                                "--layout", "target=" + placements], check=True)
                propagate, partition = [], []
                for _ in range(args.repeat):
                    out = subprocess.run([os.path.join(tools, "spmd-opt"), annotated,
                                          "--spmd-propagate", "--spmd-partition",
                                          "--mlir-timing", "-o", os.devnull],
                                         check=True, capture_output=True, text=True).stderr
                    propagate.append(pass_seconds(out, "PropagatePass"))
                    partition.append(pass_seconds(out, "PartitionPass"))
                p, q = statistics.median(propagate) * 1e3, statistics.median(partition) * 1e3
                print("%-8d %-5s %7d %12.1f %12.1f %12.1f" % (layers, mesh, ops, p, q,
                                                             (p + q) / ops * 1e3))
                sys.stdout.flush()


if __name__ == "__main__":
    main()
