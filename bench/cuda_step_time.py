#!/usr/bin/python3
"""Median 1-rank training-step time of the CUDA backend (spmd-run --backend
cuda) next to PyTorch eager on the same GPU, model, inputs and optimizer, and
the achieved TFLOP/s of the step's cuBLAS GEMMs against the cuBLAS peak
measured in the same run.

  bench/cuda_step_time.py capture DIR [--optimizer adam] [CONFIG ...]
  bench/cuda_step_time.py run DIR [--steps K] [--spmd-run PATH]

Two phases, so that capturing, which needs no GPU, runs on the development
machine; both run in the project's Python environment (scripts/setup.sh;
SPMD_PYTHON_ENV names it on the GPU machine), whose PyTorch has CUDA:

  capture  traces each CONFIG (a model spec as spmd-capture takes it; the
           default set is the encoder and GPT examples and the zoo's Llama
           (transformers, grouped-query attention) at sizes that fill an
           H100: d_model 1024, 8192 tokens a step, in fp32 and in bf16, and
           a ResNet-50 on 32 images of 224x224 in fp32) with
           spmd-capture
           --no-reference into DIR. No GPU needed. The argument values are
           dropped: `run` writes its own.
  run      on the GPU machine, for each config: builds the model with the
           factory (seed 0), writes it, its optimizer state and its inputs as
           the bundle's arguments, runs K steps under spmd-run --backend cuda
           (then 3 more with SPMD_RT_GEMM_STATS=1 for the GEMM figures), then
           K steps of the same model in
           PyTorch eager on the GPU (fp32 with TF32 off on both sides,
           PyTorch's default for matmuls; bf16 with fp32 accumulation), and
           prints both medians, their ratio, the GEMMs' TFLOP/s and its share
           of the peak of an 8192^3 cuBLAS GEMM of the same dtype (torch.mm).

Medians are wall-clock per step after a warm-up, with the GPU synchronised
at the end of each step on both sides."""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import spmd_env  # noqa: E402

spmd_env.use_project_python()

import numpy as np  # noqa: E402
import torch  # noqa: E402

from spmd_capture.trace import Optimizer, load_factory, step_args  # noqa: E402

ENCODER = "examples/encoder.py:encoder(batch=8, seq=1024, d_model=1024, heads=16, ffn=4096%s)"
GPT = ("examples/gpt.py:gpt(batch=8, seq=1024, vocab=8192, d_model=1024, heads=16, ffn=4096, "
       "layers=2%s)")
LLAMA = ("examples/hf.py:llama(batch=8, seq=1024, vocab=8192, hidden=1024, heads=16, kv_heads=4, "
         "ffn=2816, layers=2%s)")
RESNET50 = ("examples/hf_vision.py:resnet(hidden_sizes=(256, 512, 1024, 2048), depths=(3, 4, 6, 3), "
            "embedding=64, batch=32, image=224, labels=1000)")
BF16 = ', dtype="bfloat16"'
DEFAULT = [ENCODER % "", GPT % "", LLAMA % "", ENCODER % BF16, GPT % BF16, LLAMA % BF16, RESNET50]
LR = {"sgd": 0.1, "adam": 1e-3}


def capture(args):
    os.makedirs(args.dir, exist_ok=True)
    configs = []
    for i, spec in enumerate(args.configs or DEFAULT):
        module, bundle = os.path.join(args.dir, "%d.mlir" % i), os.path.join(args.dir, str(i))
        subprocess.run([os.path.join(args.build, "bin", "spmd-capture"), "--model",
                        os.path.join(ROOT, spec), "--optimizer", args.optimizer,
                        "--no-reference", "-o", module, "--bundle", bundle], check=True)
        shutil.rmtree(os.path.join(bundle, "args"))
        configs.append({"spec": spec, "optimizer": args.optimizer, "module": "%d.mlir" % i,
                        "bundle": str(i)})
    with open(os.path.join(args.dir, "configs.json"), "w") as f:
        json.dump(configs, f, indent=1)


def write_args(bundle, factory, optimizer):
    """The factory's model, optimizer state and inputs as the bundle's args."""
    with open(os.path.join(bundle, "manifest.json")) as f:
        manifest = json.load(f)
    values = step_args(factory, optimizer)
    if [a.fqn for a in values] != [e["fqn"] for e in manifest["args"]]:
        raise SystemExit("the factory's arguments do not match %s/manifest.json" % bundle)
    os.makedirs(os.path.join(bundle, "args"), exist_ok=True)
    for arg, entry in zip(values, manifest["args"]):
        # .npy has no bf16: the exact f32 widening, as spmd-capture writes it.
        value = arg.value.float() if arg.value.dtype == torch.bfloat16 else arg.value
        np.save(os.path.join(bundle, entry["file"]), value.contiguous().numpy())


def spmd_run_output(spmd_run, module, bundle, steps, env):
    done = subprocess.run([spmd_run, "--backend", "cuda", module, "--bundle", bundle,
                           "--steps", str(steps), "--timing"], capture_output=True, text=True,
                          env=dict(os.environ, **env))
    if done.returncode:
        raise SystemExit("spmd-run failed:\n" + done.stdout + done.stderr)
    return done.stdout


def spmd_median(spmd_run, module, bundle, steps):
    """(median step seconds, peak MiB) of a plain run, then (GEMMs, TFLOP per
    step, GEMM TFLOP/s) of a second run with SPMD_RT_GEMM_STATS=1, whose
    events would otherwise add host time to the steps (the statistics skip
    step 0, the warm-up)."""
    out = spmd_run_output(spmd_run, module, bundle, steps, {})
    step = re.search(r"median step time ([0-9.]+) ms, peak memory ([0-9.]+) MiB", out)
    stats_steps = 3
    out += spmd_run_output(spmd_run, module, bundle, stats_steps, {"SPMD_RT_GEMM_STATS": "1"})
    gemm = re.search(r"cuBLAS GEMMs from step 1: ([0-9]+) calls, ([0-9.]+) TFLOP in "
                     r"([0-9.]+) ms: ([0-9.]+) TFLOP/s", out)
    if not step or not gemm:
        raise SystemExit("unexpected spmd-run output:\n" + out)
    timed = stats_steps - 1
    return (float(step.group(1)) / 1e3, float(step.group(2)), int(gemm.group(1)) // timed,
            float(gemm.group(2)) / timed, float(gemm.group(4)))


def eager_median(factory, optimizer, steps):
    model = factory.model.cuda()
    factory = factory.converted(lambda t: t.cuda())
    opt, _ = optimizer.eager([p for p in model.parameters() if p.requires_grad])
    times = []
    for i in range(steps + 3):
        torch.cuda.synchronize()
        start = time.perf_counter()
        opt.zero_grad()
        factory.loss(model).backward()
        opt.step()
        torch.cuda.synchronize()
        if i >= 3:  # warm-up
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def cublas_peak(dtype, n=8192, repeats=10):
    """TFLOP/s of an n^3 torch.mm (cuBLAS; fp32 with TF32 off)."""
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    times = []
    for i in range(repeats + 2):
        torch.cuda.synchronize()
        start = time.perf_counter()
        torch.mm(a, b)
        torch.cuda.synchronize()
        if i >= 2:
            times.append(time.perf_counter() - start)
    return 2 * n ** 3 / statistics.median(times) / 1e12


def run(args):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with open(os.path.join(args.dir, "configs.json")) as f:
        configs = json.load(f)
    peaks = {"float32": cublas_peak(torch.float32), "bfloat16": cublas_peak(torch.bfloat16)}
    print("GPU: %s; torch %s; cuBLAS peak (8192^3 torch.mm): fp32 (TF32 off) %.1f, bf16 "
          "%.1f TFLOP/s" % (torch.cuda.get_device_name(), torch.__version__,
                            peaks["float32"], peaks["bfloat16"]))
    print("%-100s %9s %9s %7s %6s %8s %9s %9s %9s" % (
        "model (1 rank) [optimizer, dtype]", "spmd ms", "torch ms", "ratio", "GEMMs", "TFLOP", "GEMM TF/s",
        "of peak", "peak MiB"))
    for c in configs:
        optimizer = Optimizer(c["optimizer"], LR[c["optimizer"]])
        torch.manual_seed(0)
        factory = load_factory(os.path.join(ROOT, c["spec"]))
        bundle = os.path.join(args.dir, c["bundle"])
        write_args(bundle, factory, optimizer)
        dtype = str(next(factory.model.parameters()).dtype)[6:]
        spmd, memory, gemms, tflop, gemm_rate = spmd_median(
            args.spmd_run, os.path.join(args.dir, c["module"]), bundle, args.steps)
        eager = eager_median(factory, optimizer, args.steps)
        print("%-100s %9.2f %9.2f %6.2fx %6d %8.3f %9.1f %8.0f%% %9.0f" % (
            "%s [%s, %s]" % (c["spec"], c["optimizer"], dtype), spmd * 1e3, eager * 1e3,
            spmd / eager, gemms, tflop, gemm_rate, 100 * gemm_rate / peaks[dtype], memory))
        sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="phase", required=True)
    p = sub.add_parser("capture", help="trace the configs (no GPU needed)")
    p.add_argument("dir")
    p.add_argument("configs", nargs="*")
    p.add_argument("--optimizer", default="adam", choices=("sgd", "adam"))
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p = sub.add_parser("run", help="time spmd-run --backend cuda and PyTorch eager")
    p.add_argument("dir")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--spmd-run", default=os.path.join(ROOT, "build", "bin", "spmd-run"))
    args = parser.parse_args()
    capture(args) if args.phase == "capture" else run(args)


if __name__ == "__main__":
    main()
