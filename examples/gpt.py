"""A small GPT-style language model built from PyTorch modules: token and
position nn.Embedding -> N x nn.TransformerEncoderLayer (causal mask,
norm_first, GELU) -> nn.LayerNorm -> nn.Linear head, trained with
nn.CrossEntropyLoss on integer targets.

  spmd-capture --model examples/gpt.py:gpt --optimizer adam -o gpt.mlir --bundle gpt.bundle
TP plan: examples/gpt.tp.json.
"""
import torch
import torch.nn as nn


class GPT(nn.Module):
    def __init__(self, vocab, seq, d_model, heads, ffn, layers, dropout):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(vocab, d_model), nn.Embedding(seq, d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, heads, ffn, dropout, "gelu", batch_first=True,
                                       norm_first=True) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d_model), nn.Linear(d_model, vocab)

    def forward(self, idx):
        seq = idx.shape[1]
        h = self.tok_emb(idx) + self.pos_emb(torch.arange(seq, device=idx.device))
        mask = torch.triu(torch.full((seq, seq), float("-inf"), dtype=h.dtype, device=h.device), 1)
        for layer in self.layers:
            h = layer(h, src_mask=mask)
        return self.head(self.ln_f(h))


class NextTokenLoss(nn.Module):
    """Cross-entropy over every position: logits [B, T, V], targets [B, T]."""

    def __init__(self):
        super().__init__()
        self.ce = nn.CrossEntropyLoss()

    def forward(self, logits, targets):
        return self.ce(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def gpt(batch=2, seq=8, vocab=96, d_model=64, heads=4, ffn=128, layers=2, dropout=0.0,
        dtype="float32"):
    """`dtype` ("float32" or "bfloat16") is the parameters' and activations' type."""
    idx = torch.randint(0, vocab, (batch, seq + 1))
    model = GPT(vocab, seq, d_model, heads, ffn, layers, dropout).to(getattr(torch, dtype))
    return model, (idx[:, :-1],), NextTokenLoss(), (idx[:, 1:],)
