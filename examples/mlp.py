"""Linear -> ReLU -> Linear with the default loss (output.sum()).

  spmd-capture --model examples/mlp.py:mlp -o mlp.mlir --bundle mlp.bundle
TP plan: examples/mlp.tp.json (fc1 colwise, fc2 rowwise).
"""
import torch
import torch.nn as nn


class MLP(nn.Module):
    def __init__(self, d_in, hidden, d_out):
        super().__init__()
        self.fc1, self.relu, self.fc2 = nn.Linear(d_in, hidden), nn.ReLU(), nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(self.relu(self.fc1(x)))


def mlp(batch=8, d_in=16, hidden=32, d_out=8, dtype="float32"):
    """`dtype` ("float32" or "bfloat16") is the parameters' and activations' type."""
    dt = getattr(torch, dtype)
    return MLP(d_in, hidden, d_out).to(dt), (torch.randn(batch, d_in).to(dt),)
