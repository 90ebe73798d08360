"""The analytic collective bytes of the data-parallel modes, from the captured
module's own parameter types, against spmd-opt --spmd-report's lines:

  check_dp_bytes.py MODULE.mlir REPORT.txt ddp|fsdp

ddp:  the gradient all_reduces (buckets) move every parameter byte once.
fsdp: forward gathers every parameter exactly once (all parameter bytes,
      dim 0 padded to a multiple of the mesh size as the shards are),
      backward gathers each parameter it reads at most once, and the
      reduce_scatters move every (padded) parameter byte once.
The claims hold for plans where only gradients are reduced (a batch that
divides); an uneven batch adds activation collectives (docs/parallel-modes.md).
Prints one line per claim with its figures and True/False."""
import re
import sys

from report import padded_bytes, parameters, rows


def parameter_bytes(module, ranks=1):
    """Bytes of each parameter, dim 0 padded to a multiple of `ranks`."""
    return {fqn: padded_bytes(dims, size, ranks) for fqn, dims, size in parameters(module)}


def main():
    module, report, mode = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
    mesh = re.search(r"on @\w+ \[(\d+)\]", report)
    params = parameter_bytes(module, int(mesh.group(1)) if mode == "fsdp" and mesh else 1)
    total = sum(params.values())
    print("parameters: %d, %d bytes" % (len(params), total))
    collectives = rows(report)
    if mode == "ddp":
        buckets = [b for _, _, _, b, why in collectives if "ddp gradient bucket" in why]
        print("ddp gradient all_reduce bytes %d == parameter bytes: %s" % (
            sum(buckets), sum(buckets) == total))
        return
    gathers = {"forward": [], "backward": []}
    for line in report.splitlines():
        m = re.search(r"^\s*\d+\s+all_gather\s+\w+\s+\[dp\]\s+(\d+).*fsdp: gather parameter "
                      r"'([^']+)' for (forward|backward)", line)
        if m:
            gathers[m.group(3)].append((m.group(2), int(m.group(1))))
    fwd, bwd = gathers["forward"], gathers["backward"]
    print("fsdp forward gathers each parameter once, %d bytes == parameter bytes: %s" % (
        sum(b for _, b in fwd),
        sorted(f for f, _ in fwd) == sorted(params) and
        all(b == params[f] for f, b in fwd) and sum(b for _, b in fwd) == total))
    print("fsdp backward gathers %d parameters at most once each, full size: %s" % (
        len(bwd), len({f for f, _ in bwd}) == len(bwd) and
        all(f in params and b == params[f] for f, b in bwd)))
    scatter = sum(b for kind, _, _, b, _ in collectives if kind == "reduce_scatter")
    print("fsdp gradient reduce_scatter bytes %d == parameter bytes: %s" % (
        scatter, scatter == total))


if __name__ == "__main__":
    main()
