#!/usr/bin/python3
"""The model-zoo table: each transformers model of examples/hf.py (language
models) and examples/hf_vision.py (image classifiers) in each parallel mode,
checked against PyTorch, with its collectives per step, bytes per rank and
peak memory per rank (predicted by --spmd-report, measured by spmd-run).

  bench/zoo.py [--build DIR] [--models gpt2,bert,llama,opt,t5,mixtral,vit,resnet,convnext]
               [--modes "fsdp 4,fsdp-tp 2x2"] [--optimizer adamw] [--markdown]

Each model is captured once (spmd-capture, small config, random weights);
each mode is `spmd-opt --spmd-parallelize=... --spmd-report` (its "total per
step" line: collectives and bytes per rank, as the partitioned program
sends them; its predicted peak memory per rank) and `spmd-run --check
--timing` on that many ranks (whether every result matches PyTorch's
single-device step; the runtime's own peak memory count, max over ranks). Plans are examples/hf_<model>.tp.json
(Megatron) and, where it exists, examples/hf_<model>.sp.json (with sequence
parallel); a model without a plan runs the data-parallel modes only, ddp on
4 ranks too (the vision batches do not divide by 4). The README's model-zoo table is this script's --markdown
output."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import spmd_env  # noqa: E402

spmd_env.use_project_python()

# The factory of each model: examples/<file>:<call> (Llama with grouped-query
# attention: 8 query heads, 4 key/value heads; Mixtral's 8 experts, top 2,
# with transformers' default grouped_mm experts; ResNet with BatchNorm on a
# batch of 6).
MODELS = {"gpt2": "hf.py:gpt2", "bert": "hf.py:bert",
          "llama": "hf.py:llama(heads=8, kv_heads=4)", "opt": "hf.py:opt", "t5": "hf.py:t5",
          "mixtral": 'hf.py:lm(model_type="mixtral", task="causal")',
          "vit": "hf_vision.py:vit", "resnet": "hf_vision.py:resnet(batch=6)",
          "convnext": "hf_vision.py:convnext(batch=6)"}


def modes(model):
    """(column, --spmd-parallelize options or None for 1 rank, ranks)."""
    plan = os.path.join(ROOT, "examples", "hf_%s.tp.json" % model)
    sp = os.path.join(ROOT, "examples", "hf_%s.sp.json" % model)
    out = [("1 rank", None, 1), ("ddp 3", "mode=ddp mesh=3", 3)]
    if not os.path.exists(plan):
        return out + [("ddp 4", "mode=ddp mesh=4", 4), ("fsdp 4", "mode=fsdp mesh=4", 4)]
    out += [("fsdp 4", "mode=fsdp mesh=4", 4),
            ("tp 2", "mode=tp mesh=2 plan=" + plan, 2),
            ("tp 4", "mode=tp mesh=4 plan=" + plan, 4)]
    if os.path.exists(sp):
        out.append(("tp+sp 4", "mode=tp mesh=4 plan=" + sp, 4))
    out.append(("fsdp-tp 2x2", "mode=fsdp-tp mesh=2x2 plan=" + plan, 4))
    return out


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", help="only these columns, comma-separated (default: all)")
    parser.add_argument("--optimizer", default="adamw")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    tools = os.path.join(args.build, "bin")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            captured = os.path.join(tmp, model + ".mlir")
            bundle = os.path.join(tmp, model)
            cap = run([os.path.join(tools, "spmd-capture"), "--model",
                       "%s/examples/%s" % (ROOT, MODELS[model]),
                       "--optimizer", args.optimizer, "-o", captured, "--bundle", bundle])
            if cap.returncode != 0:
                rows.append((model, "capture", "fails: " + cap.stderr.strip().splitlines()[-1],
                             "", "", "", ""))
                continue
            for column, options, ranks in modes(model):
                if args.modes and column not in args.modes.split(","):
                    continue
                program, collectives, nbytes, predicted = captured, "0", "0", "-"
                if options:
                    program = os.path.join(tmp, "%s.%d.mlir" % (model, len(rows)))
                    opt = run([os.path.join(tools, "spmd-opt"), captured,
                               "--spmd-parallelize=" + options, "--spmd-report",
                               "-o", program])
                    total = re.search(r"total per step: (\d+) collectives, (\d+) bytes/rank",
                                      opt.stdout + opt.stderr)
                    peak = re.search(r"peak memory per rank: (\d+) bytes", opt.stdout)
                    if opt.returncode != 0 or not total or not peak:
                        rows.append((model, column, "spmd-opt fails", "", "", "", ""))
                        continue
                    collectives, nbytes = total.groups()
                    predicted = "%.2f" % (int(peak.group(1)) / 2**20)
                check = run([os.path.join(tools, "spmd-run"), "--np", str(ranks), program,
                             "--bundle", bundle, "--check", "--timing"])
                verdict = re.search(r"spmd-run: (all \d+ results match PyTorch|\d+ of \d+ "
                                    r"results do not match PyTorch)", check.stdout)
                measured = re.search(r"peak memory ([0-9.]+) MiB", check.stdout)
                rows.append((model, column, verdict.group(1) if verdict else "run fails",
                             collectives, nbytes, predicted,
                             measured.group(1) if measured else "-"))
    head = ("model", "mode", "against PyTorch", "collectives/step", "bytes/rank",
            "peak MiB predicted", "peak MiB measured")
    if args.markdown:
        print("| %s |" % " | ".join(head))
        print("| %s |" % " | ".join("---" for _ in head))
        for row in rows:
            print("| %s |" % " | ".join(row))
    else:
        print("%-8s %-12s %-40s %16s %11s %18s %17s" % head)
        for row in rows:
            print("%-8s %-12s %-40s %16s %11s %18s %17s" % row)
    return 0 if all(r[2].startswith("all ") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
