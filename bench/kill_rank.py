#!/usr/bin/python3
"""How a job ends when one rank dies without a word: the GPT example's ddp
step runs on 4 ranks under `spmd-run --np 4`; once rank R has run for a
while it is killed with SIGKILL (test/Run/Inputs/kill_rank.py). Prints, per
run, how long the job took to end after the kill and its exit status, and
what the surviving ranks said in the last run.

  bench/kill_rank.py [--build DIR] [--rank 2] [--after 4] [--repeat 3]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--after", type=float, default=4.0,
                        help="seconds the rank runs before the kill (set-up included)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    with tempfile.TemporaryDirectory() as work:
        step, bundle = os.path.join(work, "gpt.mlir"), os.path.join(work, "bundle")
        subprocess.run([os.path.join(bin_dir, "spmd-capture"), "--model",
                        os.path.join(root, "examples", "gpt.py") + ":gpt", "--no-reference",
                        "-o", step, "--bundle", bundle], check=True, stdout=subprocess.DEVNULL)
        ddp = os.path.join(work, "ddp.mlir")
        subprocess.run([os.path.join(bin_dir, "spmd-opt"), step,
                        "--spmd-parallelize=mode=ddp mesh=4", "-o", ddp], check=True)
        print("%-5s %-12s %s" % ("run", "ended after", "exit status"))
        said = []
        for run in range(args.repeat):
            out = subprocess.run(
                [sys.executable, os.path.join(root, "test", "Run", "Inputs", "kill_rank.py"),
                 os.path.join(bin_dir, "spmd-run"), "4", str(args.rank), ddp, "--bundle", bundle],
                capture_output=True, text=True, env=dict(os.environ, SPMD_KILL_AFTER=str(args.after)))
            m = re.search(r"exit status (\d+), ended ([0-9.]+) s after the kill", out.stdout)
            if not m:
                sys.exit("kill_rank.py failed:\n" + out.stdout + out.stderr)
            print("%-5d %-12s %s" % (run, m.group(2) + " s", m.group(1)))
            said = [l for l in out.stdout.splitlines() if "stopped in" in l]
        print("what the surviving ranks said (last run):")
        for line in said:
            print("  " + line)


if __name__ == "__main__":
    main()
