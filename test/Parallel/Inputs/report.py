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
