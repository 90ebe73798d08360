"""Gives a captured train_step a device mesh and argument layouts, for the
end-to-end tests of spmd-propagate/spmd-partition before the ParallelModes
(issue 6) choose layouts themselves.

  annotate.py IN.mlir OUT.mlir --mesh 2x2 [--names dp,tp] \
      --layout ROLE_OR_FQN_GLOB=PLACEMENTS ...

PLACEMENTS is the bracket body of #spmd.layout, e.g. "shard<0>, replicate".
An argument takes the first --layout whose key equals its spmd.role or
matches its spmd.fqn (fnmatch); a result that updates argument i
(spmd.updates = i) takes argument i's layout.
"""
import argparse
import fnmatch
import re

parser = argparse.ArgumentParser()
parser.add_argument("input")
parser.add_argument("output")
parser.add_argument("--mesh", required=True)
parser.add_argument("--names")
parser.add_argument("--layout", action="append", default=[])
args = parser.parse_args()

shape = [int(s) for s in args.mesh.split("x")]
names = args.names.split(",") if args.names else ["dp", "tp", "pp"][: len(shape)]
rules = [spec.split("=", 1) for spec in args.layout]
text = open(args.input).read()

header = re.search(r"func\.func @train_step\((.*?)\)\s*->\s*\((.*?)\)\s*(attributes|\{)", text, re.S)
assert header, "no func.func @train_step signature"
arg_text, result_text = header.group(1), header.group(2)
arg_layouts = []


def layout_for(attrs):
    role = re.search(r'spmd\.role = "([^"]*)"', attrs)
    fqn = re.search(r'spmd\.fqn = "([^"]*)"', attrs)
    for key, placements in rules:
        if (role and key == role.group(1)) or (fqn and fnmatch.fnmatchcase(fqn.group(1), key)):
            return placements
    return None


def add_layout(match, placements):
    return match.group(0)[:-1] + ", spmd.layout = #spmd.layout<@mesh, [%s]>}" % placements


def annotate_args(m):
    placements = layout_for(m.group(0))
    arg_layouts.append(placements)
    return add_layout(m, placements) if placements else m.group(0)


new_args = re.sub(r"\{[^{}]*spmd\.role[^{}]*\}", annotate_args, arg_text)


def annotate_results(m):
    updates = re.search(r"spmd\.updates = (\d+)", m.group(0))
    placements = arg_layouts[int(updates.group(1))] if updates else None
    return add_layout(m, placements) if placements else m.group(0)


new_results = re.sub(r"\{[^{}]*\}", annotate_results, result_text)
start, end = header.span(1)
rstart, rend = header.span(2)
text = text[:start] + new_args + text[end:rstart] + new_results + text[rend:]
mesh = 'spmd.mesh @mesh shape = [%s] names = [%s]\n' % (
    ", ".join(map(str, shape)), ", ".join('"%s"' % n for n in names))
text = text.replace("module {\n", "module {\n  " + mesh, 1)
open(args.output, "w").write(text)
