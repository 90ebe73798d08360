#!/usr/bin/python3
"""Predicted tokens/s per GPU and peak memory of Llama 3.1 training steps on
H100s, next to torchtitan's published measurements of the same setups.

  bench/llama3_tokens.py [--build DIR] [--machine FILE] [--keep DIR]

Each row captures the step on fake tensors (`spmd-capture --meta`,
`examples/hf.py:llama` at Llama 3.1's sizes, AdamW, sequence 8192) under
torchtitan's mixed precision (`--param-dtype bf16`: fp32 parameters,
gradients and optimizer state, bf16 compute; gradients reduced in fp32,
`reduce-dtype=f32`), parallelizes it as torchtitan ran it and asks
`--spmd-report` with the machine file (default
bench/machines/h100-grand-teton.json, torchtitan's platform) for the
estimated step and the peak memory per rank:

  8B on 8 GPUs: fsdp 8, local batch 2, selective recomputation
     (torchtitan docs/performance.md, Table 1, "FSDP": 5,762 TPS/GPU,
     82.4 GiB);
  70B on 64 GPUs: fsdp 8 x tp 8 with sequence parallel, local batch 16,
     full recomputation (torchtitan publishes no such row: prediction
     only);
  70B on 256 GPUs: fsdp 32 x tp 8 with sequence parallel, local batch 16,
     full recomputation (Table 4, "2D", with torch.compile and Float8:
     829 TPS/GPU, 71.9 GiB).

The 2-D rows plan the whole step by cost (`search=cost`) rather than with
the tp modes' default, DTensor's eager forward (`greedy-forward`), under
which ops without a sharded operand stay replicated: transformers' Llama
builds its attention mask for the global batch from `arange`s, which the
cost search creates sharded on the batch.

Tokens/s per GPU = global batch x sequence / estimated step / GPUs. The
gap to the measurements is explained in docs/performance.md ("Predicted
step time against torchtitan"); nothing here is fitted to them."""
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

SEQ, VOCAB = 8192, 128256
SP = os.path.join(ROOT, "examples", "hf_llama.sp.json")
ROWS = [
    # name, sizes, global batch, GPUs, --spmd-parallelize, torchtitan (TPS/GPU, GiB)
    ("8B, 8 GPUs, FSDP 8, selective AC",
     dict(hidden=4096, heads=32, kv_heads=8, ffn=14336, layers=32), 16, 8,
     "mode=fsdp mesh=8 remat=selective overlap=1 options=reduce-dtype=f32", (5762, 82.4)),
    ("70B, 64 GPUs, FSDP 8 x TP 8, full AC",
     dict(hidden=8192, heads=64, kv_heads=8, ffn=28672, layers=80), 128, 64,
     "mode=fsdp-tp mesh=8x8 plan=%s remat=full overlap=1 options=reduce-dtype=f32;search=cost"
     % SP,
     None),
    ("70B, 256 GPUs, FSDP 32 x TP 8, full AC",
     dict(hidden=8192, heads=64, kv_heads=8, ffn=28672, layers=80), 512, 256,
     "mode=fsdp-tp mesh=32x8 plan=%s remat=full overlap=1 options=reduce-dtype=f32;search=cost"
     % SP,
     (829, 71.9)),
]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--machine",
                        default=os.path.join(ROOT, "bench", "machines",
                                             "h100-grand-teton.json"))
    parser.add_argument("--keep", metavar="DIR",
                        help="keep the captured steps here (and reuse them)")
    args = parser.parse_args()
    tools = os.path.join(args.build, "bin")
    directory = args.keep or tempfile.mkdtemp(prefix="spmd-llama3-tokens-")
    os.makedirs(directory, exist_ok=True)
    print("%-40s %12s %12s %10s %10s %9s %9s" % (
        "step", "pred. TPS/GPU", "torchtitan", "pred. GiB", "torchtitan",
        "step ms", "exposed ms"))
    for name, sizes, batch, gpus, options, measured in ROWS:
        path = os.path.join(directory, "llama-%dl-b%d-mp.mlir" % (sizes["layers"], batch))
        if not os.path.exists(path):
            spec = ("%s/examples/hf.py:llama(batch=%d, seq=%d, vocab=%d, hidden=%d, "
                    "heads=%d, kv_heads=%d, ffn=%d, layers=%d)"
                    % (ROOT, batch, SEQ, VOCAB, sizes["hidden"], sizes["heads"],
                       sizes["kv_heads"], sizes["ffn"], sizes["layers"]))
            subprocess.run([os.path.join(tools, "spmd-capture"), "--model", spec,
                            "--optimizer", "adamw", "--param-dtype", "bf16", "--meta",
                            "-o", path + ".tmp",
                            "--bundle", path[:-len(".mlir")] + ".bundle"],
                           check=True, stdout=subprocess.DEVNULL)
            os.replace(path + ".tmp", path)
        out = subprocess.run([os.path.join(tools, "spmd-opt"), path,
                              "--spmd-parallelize=" + options,
                              "--spmd-report=machine=" + args.machine,
                              "-o", os.devnull],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit("spmd-opt failed on %s:\n%s" % (name, out.stderr))
        step = re.search(r"^estimated step: ([0-9.]+) us \(compute ([0-9.]+) us, "
                         r"exposed communication ([0-9.]+) us\)", out.stdout, re.M)
        peak = re.search(r"^peak memory per rank: ([0-9]+) bytes", out.stdout, re.M)
        seconds = float(step.group(1)) * 1e-6
        tps, gib = ("%d" % measured[0], "%.1f" % measured[1]) if measured else ("-", "-")
        print("%-40s %12.0f %12s %10.1f %10s %9.1f %9.1f" % (
            name, batch * SEQ / seconds / gpus, tps, int(peak.group(1)) / 2**30, gib,
            seconds * 1e3, float(step.group(3)) * 1e-3))
        sys.stdout.flush()


if __name__ == "__main__":
    main()
