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

ELEMENT_BYTES = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2, "i64": 8, "i32": 4, "i1": 1}


def parameter_bytes(module, ranks=1):
    """Bytes of each parameter, dim 0 padded to a multiple of `ranks`."""
    sizes = {}
    for shape, dtype, fqn in re.findall(
            r'tensor<((?:\d+x)*)(\w+)> \{spmd\.fqn = "([^"]+)", spmd\.role = "param"\}', module):
        dims = [int(d) for d in shape.split("x")[:-1]] or [1]
        dims[0] = -(-dims[0] // ranks) * ranks
        n = 1
        for d in dims:
            n *= d
        sizes[fqn] = n * ELEMENT_BYTES[dtype]
    return sizes


def main():
    module, report, mode = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
    mesh = re.search(r"on @\w+ \[(\d+)\]", report)
    params = parameter_bytes(module, int(mesh.group(1)) if mode == "fsdp" and mesh else 1)
    total = sum(params.values())
    print("parameters: %d, %d bytes" % (len(params), total))
    rows = [line.split() for line in report.splitlines() if re.match(r"\s*\d+\s+\w+\s+\w+\s+\[", line)]
    if mode == "ddp":
        buckets = [int(r[4]) for r in rows if "ddp gradient bucket" in " ".join(r)]
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
    scatter = sum(int(r[4]) for r in rows if r[1] == "reduce_scatter")
    print("fsdp gradient reduce_scatter bytes %d == parameter bytes: %s" % (
        scatter, scatter == total))


if __name__ == "__main__":
    main()
