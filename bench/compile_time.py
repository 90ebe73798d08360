#!/usr/bin/python3
"""Compile time of --spmd-parallelize per 1,000 ops on Llama-3-8B and
Llama-3-70B training steps captured on fake tensors, in the plans that train
them at scale (or, with --gpt, of propagation and partitioning on the GPT
example at 2, 8 and 32 layers).

  bench/compile_time.py [--build DIR] [--models 8b,70b] [--keep DIR]
                        [--only PLAN ...] [--repeat R]
  bench/compile_time.py --gpt [--layers 2,8,32] [--mesh 4 2x2] [--repeat R]

Each model is `examples/hf.py:llama` (transformers' LlamaForCausalLM:
grouped-query attention, RoPE, RMSNorm, SwiGLU) at its published sizes
(8B: 32 layers, hidden 4096, 32 heads, 8 KV heads, FFN 14336; 70B: 80
layers, hidden 8192, 64 heads, 8 KV heads, FFN 28672; vocabulary 128256),
sequence 8192 and a local batch of 2 per data-parallel rank, with AdamW,
captured by `spmd-capture --meta` (shapes only, no memory). Each plan runs
`spmd-opt --spmd-parallelize=... --mlir-timing`:

  fsdp on 8, 64 and 256 ranks; tp on 8 (Megatron plan,
  examples/hf_llama.tp.json); tp on 8 with sequence parallel
  (examples/hf_llama.sp.json); fsdp-tp on 8x8 and 32x8 with sequence
  parallel.

Columns: the aten ops of the captured step; the pass's own time (median of
R runs; MLIR's verification between the nested passes included) and per
1,000 ops; the same without verification (`--verify-each=0`); the slope:
the cost per 1,000 further ops against the same step at a quarter of the
layers (the fixed cost of the embedding, head and loss taken out); the
whole process (parse, passes, print) in seconds; spmd-opt's peak resident
memory.

With --gpt: the GPT example (examples/gpt.py, d_model 256, 8 heads, FFN
1024, vocabulary 1000, Adam) captured at each depth, its inputs and targets
sharded on the batch (test/Partition/Inputs/annotate.py), and
`spmd-opt --spmd-propagate --spmd-partition` timed per pass: the cost that
DTensor pays at run time on every step (~90 us per op) and spmd pays once."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import spmd_env  # noqa: E402

spmd_env.use_project_python()

MODELS = {
    "8b": dict(hidden=4096, heads=32, kv_heads=8, ffn=14336, layers=32),
    "70b": dict(hidden=8192, heads=64, kv_heads=8, ffn=28672, layers=80),
}
SEQ, VOCAB, LOCAL_BATCH = 8192, 128256, 2
TP = os.path.join(ROOT, "examples", "hf_llama.tp.json")
SP = os.path.join(ROOT, "examples", "hf_llama.sp.json")
# name -> (data-parallel ranks, --spmd-parallelize options)
CONFIGS = {
    "fsdp 8": (8, "mode=fsdp mesh=8"),
    "fsdp 64": (64, "mode=fsdp mesh=64"),
    "fsdp 256": (256, "mode=fsdp mesh=256"),
    "tp 8": (1, "mode=tp mesh=8 plan=" + TP),
    "tp+sp 8": (1, "mode=tp mesh=8 plan=" + SP),
    "fsdp-tp+sp 8x8": (8, "mode=fsdp-tp mesh=8x8 plan=" + SP),
    "fsdp-tp+sp 32x8": (32, "mode=fsdp-tp mesh=32x8 plan=" + SP),
}


def capture(tools, directory, model, layers, batch):
    """The step of `model` at `layers` layers and global `batch`, captured
    once into `directory`; the path and its aten op count."""
    sizes = dict(MODELS[model], layers=layers)
    path = os.path.join(directory, "llama%s-l%d-b%d.mlir" % (model, layers, batch))
    if not os.path.exists(path):
        spec = ("%s/examples/hf.py:llama(batch=%d, seq=%d, vocab=%d, hidden=%d, "
                "heads=%d, kv_heads=%d, ffn=%d, layers=%d)"
                % (ROOT, batch, SEQ, VOCAB, sizes["hidden"], sizes["heads"],
                   sizes["kv_heads"], sizes["ffn"], layers))
        subprocess.run([os.path.join(tools, "spmd-capture"), "--model", spec,
                        "--optimizer", "adamw", "--meta", "-o", path + ".tmp",
                        "--bundle", path[:-len(".mlir")] + ".bundle"],
                       check=True, stdout=subprocess.DEVNULL)
        os.replace(path + ".tmp", path)
    with open(path) as f:
        ops = len(re.findall(r"= aten\.", f.read()))
    return path, ops


def parallelize(tools, path, options, verify=True):
    """(pass seconds, whole-process seconds, peak RSS in bytes) of one
    spmd-opt run."""
    start = time.perf_counter()
    proc = subprocess.Popen([os.path.join(tools, "spmd-opt"), path,
                             "--verify-each=%d" % verify,
                             "--spmd-parallelize=" + options, "--mlir-timing",
                             "-o", os.devnull],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("spmd-opt failed on %s with %s:\n%s" % (path, options, err))
    m = re.search(r"^\s*([0-9.]+) \(\s*[0-9.]+%\)\s+ParallelizePass$", err, re.M)
    return float(m.group(1)), wall, usage.ru_maxrss * 1024


def pass_seconds(output, name):
    m = re.search(r"^\s*([0-9.]+) \(\s*[0-9.]+%\)\s+" + name + "$", output, re.M)
    return float(m.group(1)) if m else float("nan")


def gpt_table(args):
    tools = os.path.join(args.build, "bin")
    print("%-8s %-5s %7s %12s %12s %12s" % ("layers", "mesh", "ops", "propagate ms",
                                             "partition ms", "ms / 1k ops"))
    with tempfile.TemporaryDirectory() as tmp:
        for layers in [int(x) for x in args.layers.split(",")]:
            spec = ("%s/examples/gpt.py:gpt(batch=8, seq=128, vocab=1000, d_model=256, "
                    "heads=8, ffn=1024, layers=%d)" % (ROOT, layers))
            captured = os.path.join(tmp, "gpt%d.mlir" % layers)
            subprocess.run([os.path.join(tools, "spmd-capture"), "--model", spec,
                            "--optimizer", "adam", "-o", captured,
                            "--bundle", os.path.join(tmp, "b%d" % layers)],
                           check=True, stdout=subprocess.DEVNULL)
            ops = len(re.findall(r"= aten\.", open(captured).read()))
            for mesh in args.mesh:
                placements = "shard<0>" + ", replicate" * (len(mesh.split("x")) - 1)
                annotated = os.path.join(tmp, "gpt%d-%s.mlir" % (layers, mesh))
                subprocess.run([sys.executable, os.path.join(ROOT, "test/Partition/Inputs/annotate.py"),
                                captured, annotated, "--mesh", mesh,
                                "--layout", "input=" + placements,
                                "--layout", "target=" + placements], check=True)
                propagate, partition = [], []
                for _ in range(args.repeat):
                    out = subprocess.run([os.path.join(tools, "spmd-opt"), annotated,
                                          "--spmd-propagate", "--spmd-partition",
                                          "--mlir-timing", "-o", os.devnull],
                                         check=True, capture_output=True, text=True).stderr
                    propagate.append(pass_seconds(out, "PropagatePass"))
                    partition.append(pass_seconds(out, "PartitionPass"))
                p, q = statistics.median(propagate) * 1e3, statistics.median(partition) * 1e3
                print("%-8d %-5s %7d %12.1f %12.1f %12.1f" % (layers, mesh, ops, p, q,
                                                             (p + q) / ops * 1e3))
                sys.stdout.flush()


def llama_table(args):
    tools = os.path.join(args.build, "bin")
    directory = args.keep or tempfile.mkdtemp(prefix="spmd-llama3-")
    os.makedirs(directory, exist_ok=True)
    header = ("%-5s %-16s %6s %7s %9s %8s %9s %8s %9s %9s %8s"
              % ("model", "plan", "layers", "ops", "pass ms", "ms/1k",
                 "noverify", "ms/1k", "slope/1k", "process s", "peak MiB"))
    print(header)
    for model in args.models.split(","):
        layers = MODELS[model]["layers"]
        for name, (dp, options) in CONFIGS.items():
            if args.only and name not in args.only:
                continue
            batch = LOCAL_BATCH * dp
            full, ops = capture(tools, directory, model, layers, batch)
            quarter, quarterOps = capture(tools, directory, model, layers // 4, batch)
            runs = [parallelize(tools, full, options) for _ in range(args.repeat)]
            seconds = statistics.median(r[0] for r in runs)
            process = statistics.median(r[1] for r in runs)
            peak = max(r[2] for r in runs)
            bare = statistics.median(parallelize(tools, full, options, verify=False)[0]
                                     for _ in range(args.repeat))
            small = statistics.median(parallelize(tools, quarter, options)[0]
                                      for _ in range(args.repeat))
            slope = (seconds - small) / (ops - quarterOps) * 1e6
            print("%-5s %-16s %6d %7d %9.1f %8.1f %9.1f %8.1f %9.1f %9.2f %8.0f"
                  % (model, name, layers, ops, seconds * 1e3, seconds / ops * 1e6,
                     bare * 1e3, bare / ops * 1e6, slope, process, peak / 2**20))
            sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--models", default="8b,70b")
    parser.add_argument("--keep", metavar="DIR",
                        help="keep the captured steps here (and reuse them)")
    parser.add_argument("--only", nargs="*", choices=sorted(CONFIGS),
                        metavar="PLAN", help="these plans only (default all)")
    parser.add_argument("--gpt", action="store_true",
                        help="the GPT example's propagation and partitioning instead")
    parser.add_argument("--layers", default="2,8,32", help="--gpt: depths")
    parser.add_argument("--mesh", nargs="*", default=["4", "2x2"], help="--gpt: meshes")
    args = parser.parse_args()
    if args.gpt:
        gpt_table(args)
    else:
        llama_table(args)


if __name__ == "__main__":
    main()
