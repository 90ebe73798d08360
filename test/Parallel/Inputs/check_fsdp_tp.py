"""The collective structure fsdp-tp must have, from spmd-opt --spmd-report:

  check_fsdp_tp.py CAPTURED.mlir FSDPTP.mlir TP_REPORT.txt FSDPTP_REPORT.txt

TP_REPORT is the tp plan on a 1-D mesh of the tp size, FSDPTP_REPORT the
same plan with mode=fsdp-tp on DPxTP; FSDPTP.mlir is that output (its
parameters' layouts), CAPTURED.mlir the captured module (global shapes).
Claims (the issue's "fsdp-tp adds only dp-dim all_gathers of parameters and
reduce_scatters of gradients"):
  - the tp-dim collectives are the tp plan's, kind and phase, in order
    (plus at most two optimizer all_reduces the 1-D plan saves);
  - every dp-dim all_gather gathers parameters of an FSDP unit (fsdp-tp's
    reason), one per unit in forward (per micro-step with accumulation);
  - the dp-dim reduce_scatters reduce each parameter's gradient once: one per
    unit (at most two with gradient accumulation), moving the bytes of every
    parameter's TP-local shard (dim 0
    padded to a multiple of dp, as the shards are);
  - nothing else runs on dp but all_reduces of scalars (the loss and the
    mean's total weight, 4 or 8 bytes).
Prints one line per claim with its figures and True/False."""
import re
import sys

from report import padded_bytes, parameters, rows, unit_of, unit_rows


def tp_local_bytes(captured, parallel):
    """Bytes of each parameter's TP-local shard as fsdp-tp reduce-scatters it:
    the tp-sharded dim chunked (torch.chunk sizes), dim 0 padded to a multiple
    of dp."""
    mesh = re.search(r"spmd\.mesh @\w+ shape = \[(\d+), (\d+)\]", parallel)
    dp, tp = (int(mesh.group(1)), int(mesh.group(2))) if mesh else (1, 1)
    out = {}
    for fqn, dims, size in parameters(captured):
        layout = re.search(r'spmd\.fqn = "%s", spmd\.layout = #spmd\.layout<@\w+, \[(.*?)\]>' %
                           re.escape(fqn), parallel)
        sharded = re.match(r"(?:strided_)?shard<(\d+)", layout.group(1).split(">, ")[-1]) if layout else None
        if sharded:
            d = int(sharded.group(1))
            dims[d] = -(-dims[d] // tp)
        out[fqn] = padded_bytes(dims, size, dp)
    return out


def main():
    captured, parallel = open(sys.argv[1]).read(), open(sys.argv[2]).read()
    tp_rows, ft_rows = rows(open(sys.argv[3]).read()), rows(open(sys.argv[4]).read())
    tp_kinds = [(k, p) for k, p, dims, _, _ in tp_rows]
    # A collective over both mesh dims (the mean's total weight) counts for
    # each.
    ft_tp = [(k, p) for k, p, dims, _, _ in ft_rows if "tp" in dims.split(",")]
    # The 1-D plan may save a few all_reduces of gradients in the optimizer
    # that the 2-D search does not find (a rowwise bias gradient summed from
    # the gathered grad_output, which on 2-D is StridedShard on dp).
    it = iter(ft_tp)
    ordered = all(any(x == y for y in it) for x in tp_kinds)
    extra = list(ft_tp)
    for x in tp_kinds:
        if x in extra:
            extra.remove(x)
    print("tp collectives: tp plan %d, fsdp-tp %d, the tp plan's kinds and phases in order, "
          "the others optimizer all_reduces: %s" %
          (len(tp_kinds), len(ft_tp), ordered and
           all(x == ("all_reduce", "optimizer") for x in extra) and len(extra) <= 2))
    dp = [r for r in ft_rows if "dp" in r[2].split(",")]
    params = tp_local_bytes(captured, parallel)
    units = sorted({unit_of(f) for f in params})
    fused = [r for r in unit_rows(open(sys.argv[4]).read()) if "dp" in r[2].split(",")]
    gathers = [r for r in dp if r[0] == "all_gather"]
    forward = sorted(u for k, p, _, _, u, _ in fused if k == "all_gather" and p == "forward")
    # Gradient accumulation gathers once per micro-step.
    print("dp all_gathers: %d, all of unit parameters, one per unit in forward: %s" %
          (len(gathers), len([r for r in fused if r[0] == "all_gather"]) == len(gathers) and
           sorted(set(forward)) == units))
    scatters = [r for r in dp if r[0] == "reduce_scatter"]
    moved = sum(r[3] for r in scatters)
    # One per unit; with gradient accumulation a gradient the update needs
    # before the unit's last one is computed (a StridedShard bias) goes alone.
    print("dp reduce_scatters: %d for %d units, %d bytes == TP-local parameter bytes %d: %s" %
          (len(scatters), len(units), moved, sum(params.values()),
           len(units) <= len(scatters) <= 2 * len(units) and moved == sum(params.values())))
    others = [r for r in dp if r[0] not in ("all_gather", "reduce_scatter")]
    print("other dp collectives: %d, all scalar all_reduces: %s" %
          (len(others), all(r[0] == "all_reduce" and r[3] <= 8 for r in others)))


if __name__ == "__main__":
    main()
