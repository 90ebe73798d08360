"""spmd-capture: PyTorch training steps into `aten` MLIR plus a reference bundle.

A model factory's whole training step (forward, loss, autograd backward and
the optimizer update) is traced with PyTorch's own tracer (`make_fx`, then
`functionalize`), written as `func.func @train_step` in the `aten` dialect,
and run once eagerly with `torch.optim` to record PyTorch's results. See
docs/capture.md for the contract of the module and the bundle.
"""


class CaptureError(Exception):
    """A user-facing failure: printed as `spmd-capture: error: <message>`."""
