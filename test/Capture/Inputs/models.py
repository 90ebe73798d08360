"""Model factories for the spmd-capture tests: features the examples do not
exercise, and models the capture must reject."""
import sys

import torch
import torch.nn as nn


class Pair(nn.Module):
    """fc1 -> act -> fc2; `extra` is a module the forward never uses."""

    def __init__(self, act=None, extra=False):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(6, 10), act or nn.ReLU(), nn.Linear(10, 3)
        self.extra = nn.Linear(3, 3) if extra else None

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


def frozen():
    model = Pair()
    model.fc1.requires_grad_(False)
    return model, (torch.randn(4, 6),)


def unused():
    return Pair(extra=True), (torch.randn(4, 6),)


class Counter(nn.Module):
    """Counts its calls in an integer buffer, updated in place."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.register_buffer("calls", torch.tensor(4))

    def forward(self, x):
        self.calls.add_(1)
        return self.fc(x)


def counter():
    return Counter(), (torch.randn(4, 6),)


class NativeDropout(nn.Module):
    """Dropout written as ATen's native_dropout (what at::dropout runs on CUDA)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return torch.ops.aten.native_dropout(self.fc(x), 0.25, True)[0]


def native_dropout():
    return NativeDropout(), (torch.randn(4, 6),)


class Scaled(nn.Module):
    """Multiplies by a constant made in forward (a graph constant)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return self.fc(x) * torch.tensor([0.5, -1.0, 2.0])


def constant():
    return Scaled(), (torch.randn(4, 6),)


def classifier(batch=4):
    """Integer targets and an nn.Module loss."""
    return Pair(), (torch.randn(batch, 6),), nn.CrossEntropyLoss(), \
        (torch.randint(0, 3, (batch,)),)


# Rejected models.

def sigmoid():
    return Pair(act=nn.Sigmoid()), (torch.randn(4, 6),)


class Both(Pair):
    def forward(self, x):
        return self.fc1(x), x


def tuple_output():
    return Both(), (torch.randn(4, 6),)


def vector_loss():
    return Both(), (torch.randn(4, 6),), lambda out, t: out[0] * t, (torch.randn(4, 10),)


class Branchy(Pair):
    def forward(self, x):
        h = self.fc1(x)
        return self.fc2(h if h.sum() > 0 else -h)


def dynamic():
    return Branchy(), (torch.randn(4, 6),)


class InputUpdate(Pair):
    def forward(self, x):
        x.mul_(2)
        return self.fc2(self.fc1(x))


def input_update():
    return InputUpdate(), (torch.randn(4, 6),)


def not_a_module():
    return "fc", (torch.randn(4, 6),)


def not_tensors():
    return Pair(), ([1.0, 2.0],)


class Mixed(nn.Module):
    """Rounds its input to bf16 and back (Tensor.to: aten._to_copy)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4)

    def forward(self, x):
        return self.fc(x.to(torch.bfloat16).to(x.dtype))


def mixed():
    return Mixed(), (torch.randn(6, 8),)


# Factories that fail: each becomes one error line.

def raises():
    raise ValueError("bad config")


def exits():
    sys.exit(0)


def all_frozen():
    model = Pair()
    for p in model.parameters():
        p.requires_grad_(False)
    return model, (torch.randn(4, 6),)


class ForwardRaises(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        raise RuntimeError("forward failed")


def forward_raises():
    return ForwardRaises(), (torch.randn(4, 6),)


def unsupported_ops():
    """Ops the dialect lacks, one of them in two modules and phases: one
    error lists them all."""
    return Pair(act=nn.Sigmoid()), (torch.randn(4, 6),), \
        lambda out: out.sigmoid().exp().sum(), ()


def deep_unsupported():
    """One op the dialect lacks in six modules: the error names four."""
    layers = [m for _ in range(6) for m in (nn.Linear(6, 6), nn.Sigmoid())]
    return nn.Sequential(*layers), (torch.randn(4, 6),)
