"""Runs `spmd-run --np N ARGS... --steps <many>`, kills rank R with SIGKILL
once it has run for a while, and prints what the job wrote to stderr and its
exit status (test/Run/failing-rank.test; bench/kill_rank.py times it)."""
import os
import signal
import subprocess
import sys
import time

spmd_run, ranks, victim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
job = subprocess.Popen([spmd_run, "--np", str(ranks)] + sys.argv[4:] + ["--steps", "1000000000"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def descends_from_job(pid):
    """Whether `pid` is a descendant of our job (lit runs other jobs beside)."""
    while pid > 1:
        if pid == job.pid:
            return True
        try:
            with open("/proc/%d/stat" % pid) as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False


def rank_pid():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"spmd-run" in cmd and ("OMPI_COMM_WORLD_RANK=%d" % victim).encode() in env \
                and descends_from_job(int(pid)):
            return int(pid)
    return None


deadline = time.time() + 300
pid = None
while pid is None and time.time() < deadline and job.poll() is None:
    time.sleep(0.1)
    pid = rank_pid()
if pid is None:
    job.kill()
    sys.exit("rank %d never started" % victim)
time.sleep(float(os.environ.get("SPMD_KILL_AFTER", "4")))
os.kill(pid, signal.SIGKILL)
killed = time.time()
_, err = job.communicate(timeout=120)
sys.stdout.write(err)
print("exit status %d, ended %.1f s after the kill" % (job.returncode, time.time() - killed))
