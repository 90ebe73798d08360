"""One nn.TransformerEncoderLayer (d_model 64, 4 heads, ffn 128, batch_first)
with the loss (output * weight).sum() for a random weight tensor: output.sum()
of a post-norm layer is degenerate (a LayerNorm's outputs sum to its bias
sum, so every gradient before it is zero up to rounding noise).

  spmd-capture --model examples/encoder.py:encoder -o enc.mlir --bundle enc.bundle
  spmd-capture --model 'examples/encoder.py:encoder(dropout=0.1, norm_first=True,
                        activation="gelu", causal=True)' ...
TP plans: examples/encoder.tp.json (head-parallel attention, Megatron MLP),
examples/encoder.sp.json (the same with sequence-parallel norms; for a causal
mask, give self_attn's prepare_module_input a second, null, layout).
"""
import torch
import torch.nn as nn


def causal_mask(seq):
    """Additive mask: -inf above the diagonal."""
    return torch.triu(torch.full((seq, seq), float("-inf")), 1)


def weighted_sum(output, weight):
    return (output * weight).sum()


def encoder(batch=4, seq=8, d_model=64, heads=4, ffn=128, dropout=0.0, norm_first=False,
            activation="relu", causal=False, dtype="float32"):
    """`dtype` ("float32" or "bfloat16") is the parameters' and activations' type."""
    dt = getattr(torch, dtype)
    layer = nn.TransformerEncoderLayer(d_model, heads, ffn, dropout, activation,
                                       batch_first=True, norm_first=norm_first).to(dt)
    inputs = (torch.randn(batch, seq, d_model),) + ((causal_mask(seq),) if causal else ())
    return (layer, tuple(t.to(dt) for t in inputs), weighted_sum,
            (torch.randn(batch, seq, d_model).to(dt),))
