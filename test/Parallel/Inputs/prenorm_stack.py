"""A model outside examples/: pre-norm GELU encoder layers under a causal mask
(an input not batched like the first), a final LayerNorm and a linear head,
with cross entropy over 10 classes."""
import torch
import torch.nn as nn


class Stack(nn.Module):
    def __init__(self, d, heads, ffn, layers):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d, heads, ffn, 0.0, "gelu", batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.proj = nn.Linear(d, 10)

    def forward(self, x, mask):
        for layer in self.layers:
            x = layer(x, src_mask=mask)
        return self.proj(self.norm(x))


def stack(batch=4, seq=6, d=32, heads=4, ffn=48, layers=2):
    torch.manual_seed(3)
    mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
    loss = lambda out, y: nn.functional.cross_entropy(out.reshape(-1, 10), y.reshape(-1))
    return Stack(d, heads, ffn, layers), (torch.randn(batch, seq, d), mask), loss, (torch.randint(0, 10, (batch, seq)),)
