"""spmd.compile on model families a new user would try, against eager
PyTorch: each model (examples/hf.py's `lm`, examples/hf_vision.py's
`vision`, examples/torchvision_models.py's `model`; small configs, random
weights, every drop rate 0) trains 3 AdamW steps compiled, 3 eagerly in
float32 and 3 eagerly in float64 from the same weights, and the largest
relative difference of the losses is printed.

  mpirun -np 2 .venv/bin/python bench/compile_families.py --mode fsdp \\
      causal:gemma2 masked:roberta seq2seq:mbart vision:dinov2 \\
      torchvision:resnet50 ...

Each argument is `task:model_type` (task: causal, masked, seq2seq or
vision for transformers' model types, torchvision for torchvision's model
names, timm for timm's, 64x64 images where the model takes a size; timm
is not a dependency of spmd: `pip install timm` into the venv first).
`--keep-dropout` keeps the configs' drop rates: the compiled
step's masks are spmd's (drawn by global element index), not PyTorch's, so
its losses are then compared across meshes by running the script with
another `-np` or `--mode`, not against eager. tp and fsdp-tp take
examples/hf_<model_type>.tp.json (else hf_llama.tp.json).

Prints on rank 0, one line per model: `ok` (relative difference from
eager <= 1e-4), `ok-fp64` (from float64's losses <= 1e-4, eager float32
further), `MISMATCH`, or `FAILED` with the error; then the losses, eager's
last one, the relative differences from eager and of spmd's and eager's
losses from float64's, and the seconds the model took. Small CNNs with
BatchNorm over few values are chaotic in float32 (two eager runs differ
after a few steps): where eager is as far from float64 as spmd, the
difference is not spmd's.
"""
import argparse
import copy
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "examples"), os.path.join(HERE, "..", "python")]

import torch  # noqa: E402

import hf  # noqa: E402
import hf_vision  # noqa: E402
import torchvision_models  # noqa: E402
import spmd  # noqa: E402


def build(task, model_type, keep_dropout):
    """(model, batch as keyword arguments, loss of (model, **batch))."""
    dropout = None if keep_dropout else 0.0
    if task == "torchvision":
        model, (x,), loss_fn, (y,) = torchvision_models.model(
            model_type, batch=6, dropout=dropout)
        return model, {"x": x, "y": y}, lambda m, x, y: loss_fn(m(x), y)
    if task == "timm":
        import timm
        torch.manual_seed(0)
        rates = {} if keep_dropout else {"drop_rate": 0.0}
        try:
            model = timm.create_model(model_type, num_classes=10, img_size=64, **rates)
        except TypeError:  # a family whose constructor takes no image size
            model = timm.create_model(model_type, num_classes=10, **rates)
        if not keep_dropout:
            torchvision_models.set_dropout(model, 0.0)
        batch = {"x": torch.randn(6, 3, 64, 64), "y": torch.randint(0, 10, (6,))}
        return model, batch, lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)
    if task == "vision":
        model, batch = hf_vision.vision(model_type, batch=6, dropout=dropout)
    else:
        # Positions past the sequence: RoBERTa's start after its padding
        # index.
        model, batch = hf.lm(model_type, task, batch=6, seq=16, dropout=dropout,
                             max_position_embeddings=40)
    return model, batch, lambda m, **b: m(**b).loss


def adamw(model):
    """The optimizer of both sides, compiled and eager."""
    return torch.optim.AdamW(model.parameters(), lr=1e-3)


def eager_losses(model, batch, loss_of, steps):
    optimizer = adamw(model)
    losses = []
    for _ in range(steps):
        loss = loss_of(model, **batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def distance(losses, reference):
    return max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(losses, reference))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="fsdp")
    parser.add_argument("--keep-dropout", action="store_true")
    parser.add_argument("models", nargs="+", metavar="task:model_type")
    args = parser.parse_args()
    for spec in args.models:
        task, model_type = spec.split(":")
        start = time.time()
        try:
            model, inputs, loss_of = build(task, model_type, args.keep_dropout)
            reference = copy.deepcopy(model)
            reference64 = copy.deepcopy(model).double()
            inputs64 = {k: v.double() if v.is_floating_point() else v
                        for k, v in inputs.items()}
            optimizer = adamw(model)
            plan = None
            if args.mode in ("tp", "fsdp-tp"):
                plan = os.path.join(HERE, "..", "examples", "hf_%s.tp.json" % model_type)
                if not os.path.exists(plan):
                    plan = os.path.join(HERE, "..", "examples", "hf_llama.tp.json")

            @spmd.compile(parallel_mode=args.mode, plan=plan,
                          mesh="2x2" if args.mode == "fsdp-tp" else None)
            def step(model, optimizer, **batch):
                loss = loss_of(model, **batch)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                return loss

            losses = [step(model, optimizer, **inputs).item() for _ in range(3)]
            eager = eager_losses(reference, inputs, loss_of, 3)
            eager64 = eager_losses(reference64, inputs64, loss_of, 3)
            worst = distance(losses, eager)
            spmd64, eager32 = distance(losses, eager64), distance(eager, eager64)
            verdict = "ok" if worst <= 1e-4 else (
                "ok-fp64" if spmd64 <= 1e-4 else "MISMATCH")
            if spmd.rank() == 0:
                print("%-24s %-8s %s eager %.6f rel %.1e; from float64: spmd %.1e eager %.1e "
                      "%.0fs" % (spec, verdict, " ".join("%.6f" % l for l in losses),
                                 eager[-1], worst, spmd64, eager32, time.time() - start),
                      flush=True)
        except Exception as e:  # one line per model, then the next
            if spmd.rank() == 0:
                print("%-24s FAILED   %s: %s" % (spec, type(e).__name__,
                                                 str(e)[:400].replace("\n", " | ")), flush=True)


if __name__ == "__main__":
    main()
