"""spmd.compile on transformers families a new user would try, against eager
PyTorch: each model (examples/hf.py's `lm`, examples/hf_vision.py's
`vision`, small configs, random weights, every drop rate 0) trains 3 AdamW
steps compiled and 3 eagerly from the same weights, and the largest relative
difference of the losses is printed.

  mpirun -np 2 .venv/bin/python bench/compile_families.py --mode fsdp \\
      causal:gemma2 masked:roberta seq2seq:mbart vision:dinov2 ...

Each argument is `task:model_type` (task: causal, masked, seq2seq or
vision). `--keep-dropout` keeps the configs' drop rates: the compiled
step's masks are spmd's (drawn by global element index), not PyTorch's, so
its losses are then compared across meshes by running the script with
another `-np` or `--mode`, not against eager. tp and fsdp-tp take
examples/hf_<model_type>.tp.json (else hf_llama.tp.json).

Prints on rank 0, one line per model: `ok` (relative difference <= 1e-4),
`MISMATCH`, or `FAILED` with the error; then the losses, eager's last one
and the seconds the model took (build, compile and 6 steps).
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
import spmd  # noqa: E402


def build(task, model_type, keep_dropout):
    dropout = None if keep_dropout else 0.0
    if task == "vision":
        return hf_vision.vision(model_type, batch=6, dropout=dropout)
    # Positions past the sequence: RoBERTa's start after its padding index.
    return hf.lm(model_type, task, batch=6, seq=16, dropout=dropout,
                 max_position_embeddings=40)


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
            model, inputs = build(task, model_type, args.keep_dropout)
            reference = copy.deepcopy(model)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            reference_optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-3)
            plan = None
            if args.mode in ("tp", "fsdp-tp"):
                plan = os.path.join(HERE, "..", "examples", "hf_%s.tp.json" % model_type)
                if not os.path.exists(plan):
                    plan = os.path.join(HERE, "..", "examples", "hf_llama.tp.json")

            @spmd.compile(parallel_mode=args.mode, plan=plan,
                          mesh="2x2" if args.mode == "fsdp-tp" else None)
            def step(model, optimizer, **batch):
                loss = model(**batch).loss
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                return loss

            losses = [step(model, optimizer, **inputs).item() for _ in range(3)]
            eager = []
            for _ in range(3):
                loss = reference(**inputs).loss
                loss.backward()
                reference_optimizer.step()
                reference_optimizer.zero_grad()
                eager.append(loss.item())
            worst = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(losses, eager))
            if spmd.rank() == 0:
                print("%-24s %-8s %s eager %.6f rel %.1e %.0fs" % (
                    spec, "ok" if worst <= 1e-4 else "MISMATCH",
                    " ".join("%.6f" % l for l in losses), eager[-1], worst,
                    time.time() - start), flush=True)
        except Exception as e:  # one line per model, then the next
            if spmd.rank() == 0:
                print("%-24s FAILED   %s: %s" % (spec, type(e).__name__,
                                                 str(e)[:400].replace("\n", " | ")), flush=True)


if __name__ == "__main__":
    main()
