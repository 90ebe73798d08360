#!/usr/bin/env python3
"""Writes the aten dialect's op definitions from PyTorch's own schemas.

For each entry of aten_ops.py it reads the overload's schema from the
installed PyTorch (`torch.ops.aten.<op>.<overload>._schema`: arguments,
defaults, alias info, returns) and writes an ODS def, an instance of the
entry's family class (include/spmd/Dialect/Aten/AtenOps.td), the way
torch-mlir's torch_ods_gen.py writes GeneratedTorchOps.td.

  aten_ods_gen.py [--output FILE]    (default: standard output)

test/Dialect/Aten/generated-ops.test fails when the committed
GeneratedAtenOps.td differs from what this writes; `ninja update-aten-ods`
rewrites it.
"""

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from aten_ops import OPS  # noqa: E402

# Arguments that mean nothing in value semantics.
DROPPED = {"layout", "device", "pin_memory", "memory_format", "non_blocking",
           "generator"}


class Arg:
    def __init__(self, type_, name, default):
        self.type = type_
        self.name = name
        self.default = default

    @property
    def is_tensor(self):
        return self.type.startswith("Tensor")


def split_top(text):
    """Splits `text` at the commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def parse_schema(schema):
    """(arguments, returns) of a schema string; alias annotations dropped."""
    text = re.sub(r"(?<![.\w])Tensor\([^)]*\)", "Tensor", schema)
    m = re.match(r"aten::[\w.]+\((.*)\) -> (.*)$", text)
    if not m:
        sys.exit("aten_ods_gen: cannot parse schema: " + schema)
    args = []
    for part in split_top(m.group(1)):
        if part == "*":
            continue
        type_, rest = part.split(" ", 1)
        name, _, default = rest.partition("=")
        args.append(Arg(type_, name, default or None))
    ret = m.group(2).strip()
    if ret.startswith("("):
        ret = ret[1:-1]
    returns = []
    for part in split_top(ret):
        type_, _, name = part.partition(" ")
        returns.append((type_, name or None))
    return args, returns


def camel(name):
    """ODS's accessor name of `snake_case`: SnakeCase."""
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def def_name(op):
    base, _, overload = op.name.partition(".")
    return "Aten_" + camel(base.lstrip("_")) + camel(overload) + "Op"


def schema_of(op):
    import torch
    base, _, overload = op.name.partition(".")
    packet = getattr(torch.ops.aten, base)
    return str(getattr(packet, overload or "default")._schema)


def ods_type(op, arg):
    """The ODS constraint of a kept argument."""
    t, name = arg.type, arg.name
    optional = t.endswith("?") and name not in op.required
    t = t.rstrip("?")
    default = None if name in op.nodefault or arg.default == "None" \
        else arg.default
    if t == "Tensor":
        c = op.types.get(name, op.tensor)
        return "Optional<%s>" % c if optional else c
    if t in ("Tensor[]", "Tensor?[]"):
        # A None in a list of optional tensors is refused at capture.
        return "Variadic<%s>" % op.types.get(name, op.tensor)
    if t == "Scalar":
        if optional:
            return "OptionalAttr<Aten_ScalarAttr>"
        return "Aten_ScaleAttr" if default == "1" else "Aten_ScalarAttr"
    if t in ("int", "SymInt"):
        if default is not None:
            return 'DefaultValuedAttr<I64Attr, "%s">' % default
        return "I64Attr"
    if re.match(r"(int|SymInt)\[\d*\]$", t):
        # A list literal default (amax's `dim=[]`); a scalar one (`int[2]
        # stride=1`) broadcasts, which the dialect does not take.
        if default is not None and default.startswith("["):
            return 'DefaultValuedAttr<DenseI64ArrayAttr, "{%s}">' % \
                default[1:-1]
        return ("OptionalAttr<DenseI64ArrayAttr>" if optional
                else "DenseI64ArrayAttr")
    if t == "bool":
        if default is not None:
            return 'DefaultValuedAttr<BoolAttr, "%s">' % default.lower()
        return "BoolAttr"
    if re.match(r"bool\[\d*\]$", t):
        return "DenseBoolArrayAttr"
    if t == "float":
        if optional:
            return "OptionalAttr<F64Attr>"
        if default is not None:
            return 'DefaultValuedAttr<F64Attr, "%s">' % default
        return "F64Attr"
    if t == "str":
        if default is None:
            return "StrAttr"
        return "DefaultValuedStrAttr<StrAttr, %s>" % default
    if t == "ScalarType":
        return "OptionalAttr<TypeAttr>" if optional else "TypeAttr"
    sys.exit("aten_ods_gen: %s: no ODS type for argument '%s %s'" %
             (op.name, arg.type, name))


def kernel_argument(op, args, token):
    """The C++ expression of one KernelArgument of `op`'s kernel."""
    ka = "::spmd::aten::KernelArgument"
    if token.startswith("="):
        # An integer constant fits integer and double parameters alike.
        if re.fullmatch(r"-?\d+", token[1:]):
            return "%s::value(b.getI64IntegerAttr(%s))" % (ka, token[1:])
        return "%s::value(b.getF64FloatAttr(%s))" % (ka, token[1:])
    if token.startswith("@"):
        return "%s::list(::llvm::to_vector(%s()))" % (ka, token[1:])
    if token.startswith("$"):
        return "%s::value(b.getI64IntegerAttr(%s()))" % (ka, token[1:])
    if token.startswith("%"):
        return "%s::value(b.getF64FloatAttr(%s()))" % (ka, token[1:])
    if token.startswith("#"):
        return "%s::value(b.getI64IntegerAttr(get%s().size()))" % (
            ka, camel(token[1:]))
    if token.startswith("?"):
        return "%s::value(b.getI64IntegerAttr(get%sAttr() != nullptr))" % (
            ka, camel(token[1:]))
    if token.startswith("^"):
        return ("%s::value(b.getI64IntegerAttr(::spmd::aten::normalizeDim("
                "get%s(), ::llvm::cast<::mlir::RankedTensorType>("
                "getOperation()->getResult(0).getType()).getRank())))" %
                (ka, camel(token[1:])))
    arg = next((a for a in args if a.name == token), None)
    if arg is None:
        sys.exit("aten_ods_gen: %s: kernel argument '%s' is not in the "
                 "schema" % (op.name, token))
    getter = "get" + camel(arg.name)
    if arg.is_tensor:
        group = [a.name for a in args if a.is_tensor].index(arg.name)
        return "%s::operands(getODSOperandIndexAndLength(%d), %s)" % (
            ka, group, "true" if arg.type.endswith("[]") else "false")
    t = ods_type(op, arg)
    if t == "Aten_ScaleAttr":
        return "%s::value(b.getF64FloatAttr(%s().convertToDouble()))" % (
            ka, getter)
    if t.startswith("DefaultValuedAttr<I64Attr"):
        return "%s::value(b.getI64IntegerAttr(%s()))" % (ka, getter)
    if t.startswith("DefaultValuedAttr<F64Attr"):
        return "%s::value(b.getF64FloatAttr(%s().convertToDouble()))" % (
            ka, getter)
    if "BoolAttr" in t:
        return "%s::value(b.getBoolAttr(%s()))" % (ka, getter)
    if "StrAttr" in t:
        values = op.values.get(arg.name)
        if not values:
            sys.exit("aten_ods_gen: %s: str argument '%s' needs `values`" %
                     (op.name, arg.name))
        return ("%s::value(b.getI64IntegerAttr(::spmd::aten::detail::indexOf("
                "%s(), {%s})))" % (ka, getter,
                                    ", ".join('"%s"' % v for v in values)))
    if t in ("I64Attr", "F64Attr", "Aten_ScalarAttr"):
        return "%s::value(%sAttr())" % (ka, getter)
    if t == "OptionalAttr<Aten_ScalarAttr>":
        # Absent: 0, with `?name` telling the kernel it is absent.
        return ("%s::value(%sAttr() ? %sAttr() : "
                "::mlir::Attribute(b.getF64FloatAttr(0)))" % (ka, getter, getter))
    sys.exit("aten_ods_gen: %s: argument '%s' (%s) cannot be passed to a "
             "kernel" % (op.name, arg.name, t))


def default_kernel_args(args):
    """The schema's tensors and numbers, in schema order."""
    return [a.name for a in args
            if a.is_tensor or a.type.rstrip("?") in
            ("Scalar", "int", "SymInt", "float", "bool", "str")]


def family(op):
    """The family class with the mnemonic as first template argument."""
    m = re.match(r"(\w+)(?:<(.*)>)?$", op.family, re.S)
    params = ['"%s"' % op.name.replace(".default", "")]
    if m.group(2):
        params.append(m.group(2))
    return "%s<%s>" % (m.group(1), ", ".join(params))


def emit(op, out):
    schema = schema_of(op)
    args, returns = parse_schema(schema)
    kept = [a for a in args if a.name not in DROPPED]
    out.write("def %s : %s {\n" % (def_name(op), family(op)))
    out.write("  let summary = %s;\n" % tablegen_string(schema))
    if op.doc:
        out.write("  let description = [{\n")
        for line in wrap(op.doc, 72):
            out.write("    %s\n" % line)
        out.write("  }];\n")
    ins = ["%s:$%s" % (ods_type(op, a), a.name) for a in kept]
    out.write("  let arguments = (ins%s);\n" % format_list(ins, 20))
    names = op.results or [n for _, n in returns]
    if len(returns) == 1 and not names[0]:
        names = ["result"]
    outs = []
    for (t, _), name in zip(returns, names):
        c = op.types.get(name, op.tensor)
        outs.append("%s:$%s" % ("Variadic<%s>" % c if t.endswith("[]")
                                else c, name))
    out.write("  let results = (outs%s);\n" % format_list(outs, 20))
    if op.kernel:
        out.write('  let kernel = "%s";\n' % op.kernel)
        tokens = (op.kernel_args if op.kernel_args is not None
                  else default_kernel_args(kept))
        calls = [kernel_argument(op, kept, t) for t in tokens]
        out.write("  let kernelArguments = [{\n")
        out.write("    return {%s};\n" % ",\n            ".join(calls))
        out.write("  }];\n")
    if op.optional_results:
        bad = [n for n in op.optional_results if n not in names]
        if bad or not op.kernel:
            sys.exit("aten_ods_gen: %s: optional result '%s' is not a result "
                     "of a kernel" % (op.name, (bad or op.optional_results)[0]))
        out.write("  let optionalResults = [%s];\n" % ", ".join(
            str(names.index(n)) for n in op.optional_results))
    if op.infer is not None:
        out.write("  let inferBody = %s;\n" %
                  (op.infer if op.infer else '""'))
    if op.rule is not None:
        out.write('  let ruleBody = "";\n')
    tensors = [a for a in kept if a.is_tensor]
    if not tensors:
        out.write('  let assemblyFormat = "attr-dict `:` '
                  'functional-type(operands, results)";\n')
    elif any(a.type.endswith("?") for a in tensors):
        parts = []
        for i, a in enumerate(tensors):
            if a.type.endswith("?"):
                parts.append("(`%s` $%s^)?" % (a.name, a.name))
            else:
                parts.append(("`,` " if i else "") + "$" + a.name)
        out.write("  let assemblyFormat = [{\n    %s attr-dict `:`\n"
                  "    functional-type(operands, results)\n  }];\n" %
                  " ".join(parts))
    out.write("}\n\n")


def tablegen_string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


def format_list(items, indent):
    return (" " + (",\n" + " " * indent).join(items)) if items else ""


def wrap(text, width):
    lines, cur = [], ""
    for word in text.split():
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = (cur + " " + word) if cur else word
    if cur:
        lines.append(cur)
    return lines


HEADER = """\
//===- GeneratedAtenOps.td - aten ops from PyTorch schemas -*- tablegen -*-===//
//
// Generated by tools/aten-ods-gen/aten_ods_gen.py from the op list
// tools/aten-ods-gen/aten_ops.py and PyTorch's schemas. Do not edit: change
// the list or the families (AtenOps.td) and run `ninja update-aten-ods`.
//
//===----------------------------------------------------------------------===//

"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", help="file to write (default: stdout)")
    opts = parser.parse_args()
    import io
    out = io.StringIO()
    out.write(HEADER)
    for op in OPS:
        emit(op, out)
    text = out.getvalue().rstrip("\n") + "\n"
    if opts.output:
        with open(opts.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
