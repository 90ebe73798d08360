#!/usr/bin/python3
"""Step time with and without asynchronous collectives
(`--spmd-parallelize="... overlap=N"`, --spmd-overlap-collectives) on the
CPU backend: the same captured step, parallelized once per overlap setting,
run by spmd-run on N MPI ranks.

  bench/overlap_step_time.py [--modes "fsdp 4,ddp 4"] [--overlaps 0,1,2]
                             [--steps K] [--repeats R] [--build DIR] [CONFIG ...]

For each model (a spmd-capture spec) and mode, every overlap setting is
run R times, the settings interleaved so that the machine's drift hits them
alike; each run prints spmd-run's median step time over K steps (after its
warm-up) and its peak memory per rank. The table gives the median and the
minimum over the R runs, the runtime's measured peak memory, and
--spmd-report's estimated exposed communication (its cost model, not this
machine). Ranks run with OPENBLAS_NUM_THREADS=1; on a machine with fewer
cores than ranks they are oversubscribed and the figures are noisy."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

DEFAULT = [
    "examples/gpt.py:gpt(batch=8, seq=64, vocab=512, d_model=128, heads=4, ffn=512, layers=4)",
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configs", nargs="*", default=DEFAULT)
    parser.add_argument("--modes", default="fsdp 4,ddp 4",
                        help="comma-separated 'mode ranks' pairs (default: %(default)s)")
    parser.add_argument("--overlaps", default="0,1,2",
                        help="overlap settings, 0 = synchronous (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--optimizer", default="adam", choices=("sgd", "adam"))
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    tool = lambda name: os.path.join(args.build, "bin", name)  # noqa: E731
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    overlaps = [int(n) for n in args.overlaps.split(",")]
    print("%-8s %-6s %-8s %10s %10s %10s %16s" % ("mode", "ranks", "overlap", "median ms",
                                                   "min ms", "peak MiB", "exposed us (est)"))
    for spec in args.configs:
        print(spec)
        with tempfile.TemporaryDirectory() as work:
            module, bundle = os.path.join(work, "m.mlir"), os.path.join(work, "b")
            subprocess.run([tool("spmd-capture"), "--model", os.path.join(ROOT, spec),
                            "--optimizer", args.optimizer, "-o", module,
                            "--bundle", bundle], check=True, stdout=subprocess.DEVNULL)
            for pair in args.modes.split(","):
                mode, ranks = pair.split()
                programs, exposed = {}, {}
                for n in overlaps:
                    programs[n] = os.path.join(work, "%s%s.o%d.mlir" % (mode, ranks, n))
                    report = subprocess.run(
                        [tool("spmd-opt"), module, "--spmd-parallelize=mode=%s mesh=%s overlap=%d"
                         % (mode, ranks, n), "--spmd-report", "-o", programs[n]],
                        check=True, capture_output=True, text=True).stdout
                    exposed[n] = float(re.search(r"exposed communication ([0-9.]+) us",
                                                 report).group(1))
                times = {n: [] for n in overlaps}
                peak = {}
                for _ in range(args.repeats):
                    for n in overlaps:
                        out = subprocess.run(
                            [tool("spmd-run"), "--np", ranks, programs[n], "--bundle", bundle,
                             "--steps", str(args.steps), "--timing"],
                            check=True, capture_output=True, text=True, env=env).stdout
                        m = re.search(r"median step time ([0-9.]+) ms, peak memory ([0-9.]+) MiB",
                                      out)
                        times[n].append(float(m.group(1)))
                        peak[n] = float(m.group(2))
                for n in overlaps:
                    print("%-8s %-6s %-8d %10.2f %10.2f %10.2f %16.2f" % (
                        mode, ranks, n, statistics.median(times[n]), min(times[n]), peak[n],
                        exposed[n]))


if __name__ == "__main__":
    sys.exit(main())
