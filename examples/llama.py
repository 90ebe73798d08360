"""A Llama-style decoder written with plain PyTorch modules, the way
torchtitan's reference model is: token embedding -> N x (RMSNorm ->
grouped-query attention with rotary position embeddings -> RMSNorm ->
SwiGLU feed-forward) -> RMSNorm -> untied head, trained with cross-entropy
on the next token.

  spmd-capture --model examples/llama.py:llama --optimizer adamw -o l.mlir --bundle l.bundle

The Llama-3-8B shape, captured on the meta device (no memory; the module is
for planning and compile-time work):

  spmd-capture --model 'examples/llama.py:llama(layers=32, dim=4096, heads=32,
      kv_heads=8, ffn=14336, vocab=128256, seq=8192, batch=1)' --meta
      --optimizer adamw -o l8b.mlir --bundle l8b.bundle

Rotary embeddings (`rope="half"`, the default) rotate each head's (first
half, second half) pairs: x * cos + rotate_half(x) * sin, with
rotate_half(x) = (-x2, x1) written as a product with a constant signed
permutation (a buffer), and cos/sin precomputed buffers, as `transformers`'
Llama computes them. With `rope="complex"` they rotate adjacent pairs as
torchtitan's and Meta's reference code write it: the pairs viewed as complex
numbers (torch.view_as_complex) times a complex buffer `freqs_cis` made with
torch.polar, then torch.view_as_real. spmd-capture carries the complex
values as real pairs, so the captured step has real ops only.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps, self.weight = eps, nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class Rotary(nn.Module):
    """cos/sin tables [seq, head_dim] and rotate_half as a [head_dim,
    head_dim] signed permutation, all non-persistent buffers."""

    def __init__(self, head_dim, seq, theta=500000.0):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(seq).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        half = head_dim // 2
        rotate = torch.zeros(head_dim, head_dim)
        rotate[torch.arange(half) + half, torch.arange(half)] = -1.0  # out[:half] = -x2
        rotate[torch.arange(half), torch.arange(half) + half] = 1.0  # out[half:] = x1
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)
        self.register_buffer("rotate", rotate, persistent=False)

    def forward(self, x):  # x: [batch, heads, seq, head_dim]
        return x * self.cos + (x @ self.rotate) * self.sin


class ComplexRotary(nn.Module):
    """freqs_cis [seq, head_dim / 2], complex64: e^(i * position * freq), a
    non-persistent buffer; torchtitan's apply_rotary_emb."""

    def __init__(self, head_dim, seq, theta=500000.0):
        super().__init__()
        freqs = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        angles = torch.outer(torch.arange(seq).float(), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles),
                             persistent=False)

    def forward(self, x):  # x: [batch, heads, seq, head_dim]
        pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(pairs * self.freqs_cis[: x.shape[2]]).flatten(3).type_as(x)


class Attention(nn.Module):
    def __init__(self, dim, heads, kv_heads, seq, rope):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.rotary = {"half": Rotary, "complex": ComplexRotary}[rope](self.head_dim, seq)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = self.rotary(q), self.rotary(k)
        # Grouped-query attention: each KV head serves heads / kv_heads heads.
        rep = self.heads // self.kv_heads
        k = k[:, :, None].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(
            b, self.heads, s, self.head_dim)
        v = v[:, :, None].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(
            b, self.heads, s, self.head_dim)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    """SwiGLU: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim, ffn):
        super().__init__()
        self.w1 = nn.Linear(dim, ffn, bias=False)
        self.w2 = nn.Linear(ffn, dim, bias=False)
        self.w3 = nn.Linear(dim, ffn, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, ffn, seq, rope):
        super().__init__()
        self.attention_norm, self.ffn_norm = RMSNorm(dim), RMSNorm(dim)
        self.attention = Attention(dim, heads, kv_heads, seq, rope)
        self.feed_forward = FeedForward(dim, ffn)

    def forward(self, x):
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, vocab, dim, heads, kv_heads, ffn, layers, seq, rope="half"):
        super().__init__()
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, kv_heads, ffn, seq, rope)
                                    for _ in range(layers))
        self.norm, self.output = RMSNorm(dim), nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def next_token_loss(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def llama(batch=2, seq=16, vocab=128, dim=64, heads=4, kv_heads=2, ffn=96, layers=2,
          rope="half"):
    """Sizes as torchtitan's ModelArgs: `dim` the hidden size, `ffn` the
    SwiGLU hidden size; heads % kv_heads == 0. `rope`: "half" or "complex"
    (the module docstring)."""
    tokens = torch.randint(0, vocab, (batch, seq + 1))
    model = Llama(vocab, dim, heads, kv_heads, ffn, layers, seq, rope)
    return model, (tokens[:, :-1],), next_token_loss, (tokens[:, 1:],)
