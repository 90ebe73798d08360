"""What the data-parallel and fsdp-tp checkers read: the captured module's
parameters and spmd-opt --spmd-report's collective rows."""
import re

ELEMENT_BYTES = {"f32": 4, "f64": 8, "bf16": 2, "f16": 2, "i64": 8, "i32": 4, "i1": 1}
ROW = re.compile(r"\s*\d+\s+(\w+)\s+(\S+)\s+\[([\w,]+)\]\s+(\d+)\s+\S+\s+(.*)")


def parameters(module):
    """(fqn, dims, bytes per element) of each parameter argument of a module."""
    out = []
    for shape, dtype, fqn in re.findall(
            r'tensor<((?:\d+x)*)(\w+)> \{spmd\.fqn = "([^"]+)", spmd\.role = "param"\}', module):
        out.append((fqn, [int(d) for d in shape.split("x")[:-1]] or [1], ELEMENT_BYTES[dtype]))
    return out


def padded_bytes(dims, element_bytes, ranks):
    """Bytes of a tensor of `dims` with dim 0 padded to a multiple of `ranks`."""
    n = element_bytes * (-(-dims[0] // ranks) * ranks)
    for d in dims[1:]:
        n *= d
    return n


def rows(report):
    """(kind, phase, mesh dims, bytes per rank, reason) of each collective."""
    return [(k, p, dims, int(b), why)
            for k, p, dims, b, why in (m.groups() for m in map(ROW.match, report.splitlines()) if m)]


def unit_of(fqn):
    """The fsdp mode's default unit of a parameter: its path up to the first
    module-list index (`layers.0`), or "" (the root unit)."""
    parts = fqn.split(".")[:-1]
    for i, part in enumerate(parts):
        if part.isdigit():
            return ".".join(parts[:i + 1])
    return ""


UNIT = re.compile(r"(fsdp|fsdp-tp): unit (?:\(root\)|'([^']+)'): (?:gather (\d+) parameters for "
                  r"(forward|backward)|reduce_scatter (\d+) gradients)")
SINGLE = re.compile(r"(fsdp|fsdp-tp): gather parameter '([^']+)' for (forward|backward)")


def unit_rows(report):
    """(kind, phase, mesh dims, bytes, unit, members) of each dp collective
    of an fsdp unit: a fused one (`unit U: gather N parameters`,
    `reduce_scatter N gradients`) or a unit's only parameter's gather."""
    out = []
    for kind, phase, dims, nbytes, why in rows(report):
        m = UNIT.search(why)
        if m:
            out.append((kind, m.group(4) or phase, dims, nbytes, m.group(2) or "",
                        int(m.group(3) or m.group(5))))
            continue
        m = SINGLE.search(why)
        if m:
            out.append((kind, m.group(3), dims, nbytes, unit_of(m.group(2)), 1))
    return out
