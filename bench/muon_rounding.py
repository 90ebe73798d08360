"""How far bf16 rounding alone moves torch.optim.Muon's training, in eager
PyTorch: the model and batches of test/Python/Inputs/optimizers.py (Muon
for the matrices, AdamW for the rest, 5 steps), its parameters after the
last step relative to eager's with PyTorch's bf16 Newton-Schulz iteration,
when that iteration instead

  - runs in fp32;
  - computes each Gram matrix X X^T as two halves' bf16 products summed
    (the order of a product contracted over 2 shards, each rank's partial
    rounded to bf16 before the sum, as spmd's fsdp and tp steps do).

Puts spmd's sharded Muon figures (optimizers.py fsdp|tp muon) beside what
eager's own rounding does. Usage:

  .venv/bin/python bench/muon_rounding.py [--tp-model]
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.optim import _muon

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                "Python", "Inputs"))
from optimizers import model_and_data, optimizers_of, step_list  # noqa: E402


def newton_schulz(dtype, halves):
    def iterate(grad, coefficients, steps, eps):
        a, b, c = coefficients
        x = grad.to(dtype, copy=True)
        wide = grad.size(0) > grad.size(1)
        if wide:
            x = x.T
        x = x / x.norm().clamp(min=eps)
        for _ in range(steps):
            k = x.shape[1] // 2
            gram = (x[:, :k] @ x[:, :k].T + x[:, k:] @ x[:, k:].T) if halves else x @ x.T
            x = torch.addmm(x, torch.addmm(gram, gram, gram, beta=b, alpha=c), x, beta=a)
        return x.T if wide else x
    return iterate


def train(mode, iteration=None):
    model, batches = model_and_data(mode)
    original = _muon._zeropower_via_newtonschulz
    if iteration is not None:
        _muon._zeropower_via_newtonschulz = iteration
    try:
        opts = optimizers_of("muon", model)
        for x, y in batches:
            step_list(model, opts, x, y)
    finally:
        _muon._zeropower_via_newtonschulz = original
    return model


def main():
    mode = "tp" if "--tp-model" in sys.argv else "fsdp"
    reference = train(mode)
    for name, iteration in (("fp32 iteration", newton_schulz(torch.float32, False)),
                            ("bf16, Gram matrices as two halves summed",
                             newton_schulz(torch.bfloat16, True))):
        model = train(mode, iteration)
        moved = max((p - q).norm().item() / q.norm().item()
                    for p, q in zip(model.parameters(), reference.parameters()))
        print("%-42s parameters after 5 steps move by %.2g (largest relative to norm)"
              % (name + ":", moved))


if __name__ == "__main__":
    main()
