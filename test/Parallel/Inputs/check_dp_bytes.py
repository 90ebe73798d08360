"""The analytic collective bytes of the data-parallel modes, from the captured
module's own parameter types, against spmd-opt --spmd-report's lines:

  check_dp_bytes.py MODULE.mlir REPORT.txt ddp|fsdp

ddp:  the gradient all_reduces (buckets) move every parameter byte once.
fsdp: one all_gather per unit in forward moves every parameter exactly
      once (all parameter bytes, dim 0 padded to a multiple of the mesh size
      as the shards are); backward gathers each non-root unit at most once,
      at most its bytes (the root unit stays gathered from forward); one
      reduce_scatter per unit moves every (padded) parameter byte once.
The claims hold for plans where only gradients are reduced (a batch that
divides); an uneven batch adds activation collectives (docs/parallel-modes.md).
Prints one line per claim with its figures and True/False."""
import re
import sys

from report import padded_bytes, parameters, rows, unit_of, unit_rows


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
    units = {}
    for fqn, b in params.items():
        units[unit_of(fqn)] = units.get(unit_of(fqn), 0) + b
    print("units: %d (%s)" % (len(units), ", ".join(sorted(u or "(root)" for u in units))))
    fused = unit_rows(report)
    fwd = [(u, b) for kind, phase, _, b, u, _ in fused if kind == "all_gather" and phase == "forward"]
    bwd = [(u, b) for kind, phase, _, b, u, _ in fused if kind == "all_gather" and phase == "backward"]
    print("fsdp forward: one all_gather per unit, %d bytes == parameter bytes: %s" % (
        sum(b for _, b in fwd),
        sorted(u for u, _ in fwd) == sorted(units) and
        all(b == units[u] for u, b in fwd) and sum(b for _, b in fwd) == total))
    print("fsdp backward: %d all_gathers, at most one per non-root unit, within its bytes: %s" % (
        len(bwd), len({u for u, _ in bwd}) == len(bwd) and
        all(u in units and u != "" and b <= units[u] for u, b in bwd)))
    scatters = [(u, b) for kind, _, _, b, u, _ in fused if kind == "reduce_scatter"]
    scatter = sum(b for kind, _, _, b, _ in collectives if kind == "reduce_scatter")
    print("fsdp gradients: one reduce_scatter per unit, %d bytes == parameter bytes: %s" % (
        scatter, sorted(u for u, _ in scatters) == sorted(units) and scatter == total))


if __name__ == "__main__":
    main()
