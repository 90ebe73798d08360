"""Compares spmd-report's predicted peak memory per rank with what the
runtime counted in spmd-run --timing (max over ranks).

  check_memory.py REPORT.txt RUN.txt

Prints `memory: predicted P MiB, measured M MiB, within N%` (N rounded up)."""
import math
import re
import sys

predicted = int(re.search(r"peak memory per rank: (\d+) bytes", open(sys.argv[1]).read()).group(1))
measured = float(re.search(r"peak memory ([0-9.]+) MiB per rank", open(sys.argv[2]).read()).group(1))
predicted /= 2**20
error = abs(predicted - measured) / measured
print("memory: predicted %.2f MiB, measured %.2f MiB, within %d%%" % (
    predicted, measured, math.ceil(error * 100)))
