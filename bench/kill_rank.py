#!/usr/bin/python3
"""How a job ends when one rank dies without a word: the GPT example's ddp
step runs on 4 ranks under `spmd-run --np 4 --steps K`; once every rank is
stepping, rank R is killed with SIGKILL. Prints how long the job took to end
after the kill, its exit status, and what the surviving ranks said.

  bench/kill_rank.py [--build DIR] [--rank 2] [--after 2.0] [--repeat 3]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time


def rank_pid(launcher_pid, rank):
    """The pid of the spmd-run process of `rank` (its environment says)."""
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if b"spmd-run" not in f.read():
                    continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if ("OMPI_COMM_WORLD_RANK=%d" % rank).encode() in env and int(pid) != launcher_pid:
            return int(pid)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--build", default=os.path.join(root, "build"))
    parser.add_argument("--rank", type=int, default=2)
    parser.add_argument("--after", type=float, default=2.0,
                        help="seconds after the ranks start stepping")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bin_dir = os.path.join(args.build, "bin")
    with tempfile.TemporaryDirectory() as work:
        step = os.path.join(work, "gpt.mlir")
        subprocess.run([os.path.join(bin_dir, "spmd-capture"), "--model",
                        os.path.join(root, "examples", "gpt.py") + ":gpt",
                        "--no-reference", "-o", step, "--bundle",
                        os.path.join(work, "bundle")], check=True, stdout=subprocess.DEVNULL)
        ddp = os.path.join(work, "ddp.mlir")
        subprocess.run([os.path.join(bin_dir, "spmd-opt"), step,
                        "--spmd-parallelize=mode=ddp mesh=4", "-o", ddp], check=True)
        print("%-8s %-10s %s" % ("run", "ended in", "exit status"))
        lines = []
        for run in range(args.repeat):
            job = subprocess.Popen([os.path.join(bin_dir, "spmd-run"), "--np", "4", ddp,
                                    "--bundle", os.path.join(work, "bundle"),
                                    "--steps", "100000"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            deadline = time.time() + 120
            pid = None
            while pid is None and time.time() < deadline:
                time.sleep(0.2)
                pid = rank_pid(job.pid, args.rank)
            if pid is None:
                job.kill()
                sys.exit("rank %d never started" % args.rank)
            time.sleep(args.after + 3.0)  # JIT compilation, then steps
            os.kill(pid, signal.SIGKILL)
            killed = time.time()
            _, err = job.communicate(timeout=120)
            ended = time.time() - killed
            print("%-8d %-10s %d" % (run, "%.2f s" % ended, job.returncode))
            lines = [l for l in err.splitlines() if "stopped in" in l or "rank" in l]
        print("what the job printed (last run):")
        for line in lines:
            print("  " + line)


if __name__ == "__main__":
    main()
