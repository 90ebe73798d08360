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


class Tagger(nn.Module):
    """Keyword inputs (float features, a bool mask, a Python constant) and a
    dict output."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(6, 10), nn.Linear(10, 3)

    def forward(self, features, mask=None, scale=1.0):
        h = torch.relu(self.fc1(features)) * scale
        h = torch.where(mask.unsqueeze(-1), h, torch.zeros_like(h))
        return {"logits": self.fc2(h), "hidden": h}


def keywords(batch=4):
    """Inputs and targets as dicts (keyword arguments); the loss picks the
    output it needs."""
    mask = torch.rand(batch) > 0.3
    return Tagger(), {"features": torch.randn(batch, 6), "mask": mask, "scale": 2.0}, \
        lambda out, labels: nn.functional.cross_entropy(out["logits"], labels), \
        {"labels": torch.randint(0, 3, (batch,))}


class OwnLoss(nn.Module):
    """Computes its loss from `labels` and returns a transformers ModelOutput."""

    def __init__(self):
        super().__init__()
        self.pair = Pair()

    def forward(self, x, labels=None):
        from transformers.modeling_outputs import SequenceClassifierOutput
        logits = self.pair(x)
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return SequenceClassifierOutput(loss=loss, logits=logits)


def own_loss(batch=4):
    return OwnLoss(), {"x": torch.randn(batch, 6), "labels": torch.randint(0, 3, (batch,))}


def no_loss():
    """A ModelOutput without a loss (no labels given) and no loss_fn."""
    return OwnLoss(), {"x": torch.randn(4, 6)}


class RunningMean(nn.Module):
    """Tracks the mean of its input over the batch in a buffer, updated in
    place as BatchNorm's running statistics are, and counts its calls."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.register_buffer("running_mean", torch.zeros(6))
        self.register_buffer("num_batches_tracked", torch.tensor(0))

    def forward(self, x):
        with torch.no_grad():
            self.running_mean.mul_(0.9).add_(x.mean(0), alpha=0.1)
            self.num_batches_tracked.add_(1)
        return self.fc(x - self.running_mean)


def running_mean(batch=8):
    return RunningMean(), (torch.randn(batch, 6),)


class Checkpointed(Pair):
    """Activation checkpointing (torch.utils.checkpoint) of act, and of fc2,
    whose parameters get their gradient from the recomputation."""

    def __init__(self, reentrant):
        super().__init__()
        self.reentrant = reentrant

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        h = checkpoint(self.act, self.fc1(x), use_reentrant=self.reentrant)
        return checkpoint(self.fc2, h, use_reentrant=self.reentrant)


def checkpointed(reentrant=False):
    return Checkpointed(reentrant), (torch.randn(4, 6),)


# Rejected models.

class Atan(nn.Module):
    """aten.atan, a Core ATen op the dialect lacks."""

    def forward(self, x):
        return torch.atan(x)


def atan():
    return Pair(act=Atan()), (torch.randn(4, 6),)


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


class Item(Pair):
    def forward(self, x):
        return self.fc2(self.fc1(x)) * x.max().item()


def item():
    """.item() reads a tensor's value into Python."""
    return Item(), (torch.randn(4, 6),)


def not_a_module():
    return "fc", (torch.randn(4, 6),)


def not_tensors():
    return Pair(), ([1.0, 2.0],)


def dict_keys():
    return Pair(), {0: torch.randn(4, 6)}


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


class Drifting(nn.Module):
    """Scales its output by the number of forward calls so far: the traced
    graph keeps the scale of the call it traced, PyTorch's reference steps
    see later ones."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.fc(x) * self.calls


def drifting():
    return Drifting(), (torch.randn(4, 6),)


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
    return Pair(act=Atan()), (torch.randn(4, 6),), \
        lambda out: out.atan().erf().sum(), ()


def deep_unsupported():
    """One op the dialect lacks in six modules: the error names four."""
    layers = [m for _ in range(6) for m in (nn.Linear(6, 6), Atan())]
    return nn.Sequential(*layers), (torch.randn(4, 6),)


class Indexing(nn.Module):
    """Advanced indexing past a slice (a None index), whose backward is
    index_put with accumulate: indices repeated and negative, adjacent to
    a leading slice, and split by a slice with broadcasting indices (the
    result's broadcast dims first, NumPy's rule); and a masked assignment
    of one value."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 5, 7))

    def forward(self, x):
        a = self.w[:, [0, 2, 0, -1]].sum(-1)                                  # [6, 4]
        c = self.w[..., [-2]].squeeze(-1)                                    # [6, 5]
        d = self.w[torch.tensor([[0], [5]]), :, torch.tensor([1, 3, 3])]     # [2, 3, 5]
        out = torch.cat([x @ a, x @ c + x[:, :2] @ d.sum(1)], 1)
        out[out > 1] = 1.0                                    # a mask, one value
        return out


def indexing(batch=4):
    return Indexing(), (torch.randn(batch, 6),)


class Logical(nn.Module):
    """Masks combined with logical_and, logical_or and logical_xor of bool,
    integer and float operands, and tril of a bool tensor (a causal mask,
    which PyTorch decomposes into a logical_and)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x, ids):
        h = self.fc(x)                                                 # [B, 6]
        causal = torch.ones(6, 6, dtype=torch.bool).tril()
        keep = torch.logical_and(h > 0, ids)                           # bool, int64
        keep = torch.logical_or(keep, torch.logical_xor(ids, x))       # int64, float
        scores = torch.where(keep[:, None, :] & causal, h[:, None, :], -1.0)
        return scores.sum(-1)


def logical(batch=4):
    g = torch.Generator().manual_seed(5)
    return Logical(), (torch.randn(batch, 6, generator=g),
                       torch.randint(0, 3, (batch, 6), generator=g))


class Rounding(nn.Module):
    """Rounding, remainders, bounds and scans: floor, ceil, round, trunc and
    sign; fmod and remainder by a number and by a tensor; clamp with tensor
    bounds; the max and min of all elements; log1p and expm1; and cumsum,
    whose backward flips the gradient."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 6)
        self.bound = nn.Parameter(torch.linspace(0.5, 2.0, 6))

    def forward(self, x):
        h = self.fc(x) * 3                                             # [B, 6]
        rounded = torch.floor(h) + torch.ceil(h) + torch.round(h) + torch.trunc(h)
        steps = rounded * torch.sign(h) + torch.fmod(rounded, 4) % 3
        rem = torch.fmod(h, 1.5) + torch.remainder(h, -2.0) + torch.remainder(h, self.bound)
        clamped = torch.clamp(h, -self.bound, self.bound)
        scan = torch.cumsum(torch.expm1(h * 0.1) + torch.log1p(h.abs()), dim=1)
        extremes = h.max() - h.min()
        return (steps + rem + clamped + scan).sum(-1) + extremes


def rounding(batch=4):
    return Rounding(), (torch.randn(batch, 6, generator=torch.Generator().manual_seed(2)),)


class GroupedQuery(nn.Module):
    """Causal SDPA with fewer key/value heads than query heads
    (enable_gqa): 4 query heads over `kv_heads`."""

    def __init__(self, kv_heads=1):
        super().__init__()
        self.kv_heads = kv_heads
        self.q, self.kv = nn.Linear(16, 32), nn.Linear(16, 16 * kv_heads)
        self.out = nn.Linear(32, 3)

    def forward(self, x):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, 4, 8).transpose(1, 2)
        k, v = self.kv(x).view(b, s, self.kv_heads, 16).transpose(1, 2).chunk(2, -1)
        o = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.out(o.transpose(1, 2).reshape(b, s, 32))


def grouped_query(kv_heads=1, batch=4):
    return GroupedQuery(kv_heads), (torch.randn(batch, 5, 16),)


class Grouped(nn.Module):
    """What transformers' grouped_mm experts trace to, on their own: a
    stable sort of keys with ties, `//` by a number, histc group sizes (and
    a histc of data near its bin edges), _grouped_mm (its weight gradient
    is the 2d x 2d form), the permutation's inverse written into
    empty_like (index_put without accumulate), and an index_put whose
    repeated index keeps the last row."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 8, 4))

    def forward(self, x):
        keys = (torch.cat([x[:, 0], x[:, 1]]) > 0).float().detach()
        order = torch.sort(keys, stable=True).indices
        rows = x[order // 2]
        groups = (torch.arange(14) // 5).float()
        offs = torch.cumsum(torch.histc(groups, bins=3, min=0, max=2), 0, dtype=torch.int32)
        out = torch._grouped_mm(rows, self.w, offs=offs)
        inverse = torch.empty_like(order)
        inverse[order] = torch.arange(14)
        out = out[inverse].view(7, 2, 4).sum(1)
        edges = torch.histc(x.detach().flatten(), bins=5, min=-1, max=1)
        last = torch.zeros(5, 4)
        last[torch.tensor([1, 3, 1])] = x[:3, :4]
        return out + 0.01 * edges.sum() + last[1:4].sum(0)


class Vision(nn.Module):
    """What vision families beyond ResNet and ViT trace to, on their own: a
    convolution with padding="valid" (one-entry window lists), GroupNorm,
    F.relu6 (integer bounds), bilinear interpolation (both corner rules),
    nearest and nearest-exact interpolation (HRNet's and FPNs' upsampling),
    max and min over a dim with their indices, var_mean, adaptive average
    pooling of a sequence to 1 (which ATen re-strides) and an average
    pooling window wider than its ceil_mode input."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding="valid")
        self.norm = nn.GroupNorm(2, 4)
        self.pool = nn.AdaptiveAvgPool1d(1)
        self.wide = nn.AvgPool2d(9, ceil_mode=True)
        self.head = nn.Linear(4, 3)

    def forward(self, x, labels):
        h = torch.nn.functional.relu6(self.norm(self.conv(x)) * 3)  # [B, 4, 6, 6]
        up = torch.nn.functional.interpolate(h, size=(9, 7), mode="bilinear")
        up = up + torch.nn.functional.interpolate(h, size=(4, 5), mode="bilinear",
                                                  align_corners=True).mean((2, 3), keepdim=True)
        # Nearest: an integer factor, a size it does not divide, nearest-exact.
        up = up + torch.nn.functional.interpolate(h[..., :5], scale_factor=(1.5, 1.4))
        near = torch.nn.functional.interpolate(h, scale_factor=2) + \
            torch.nn.functional.interpolate(h, size=(12, 12), mode="nearest-exact")
        up = up + near.mean((2, 3), keepdim=True)
        seq = up.flatten(2)  # [B, 4, 63]
        top = seq.max(dim=-1).values + seq.min(dim=2, keepdim=True).values.squeeze(-1)
        var, mean = torch.var_mean(seq, dim=-1)
        pooled = self.pool(seq).squeeze(-1) + self.wide(h[:, :, :1, :1]).flatten(1)
        logits = self.head(pooled + top + var - mean)
        return torch.nn.functional.cross_entropy(logits, labels)


def vision(batch=5):
    torch.manual_seed(0)
    return Vision(), {"x": torch.randn(batch, 3, 8, 8), "labels": torch.randint(0, 3, (batch,))}


class Decoder(nn.Module):
    """What decoders, generators and segmentation heads trace to beyond the
    classifiers' ops: transposed convolutions (1-3 spatial dims; strided,
    grouped, dilated, with output_padding and a padding past the kernel's
    reach), LeakyReLU and ELU, replication padding, adaptive max pooling
    (global, to a size that divides the input and to one that does not), bicubic, linear and
    trilinear upsampling, 3-D max, average and adaptive average pooling
    (video models' pooling), hardshrink and softshrink."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(4, 6, 4, stride=2, padding=1)
        self.grouped = nn.ConvTranspose2d(6, 4, (3, 2), stride=(2, 3), padding=(2, 0),
                                          dilation=(1, 2), output_padding=(1, 0), groups=2)
        self.line = nn.ConvTranspose1d(4, 4, 5, stride=3, padding=1, bias=False)
        self.volume = nn.ConvTranspose3d(4, 2, 3, stride=(1, 2, 2), padding=1,
                                         output_padding=(0, 1, 1))
        self.pad = nn.ReplicationPad2d((1, 2, 0, 3))
        self.head = nn.Linear(4 + 4 + 2 + 4, 3)

    def forward(self, x, labels):
        h = torch.nn.functional.leaky_relu(self.stem(x), 0.2)  # [B, 4, 4, 4]
        h = torch.nn.functional.elu(self.up(h))  # [B, 6, 8, 8]
        h = self.grouped(h)  # [B, 4, 14, 23]
        h = torch.nn.functional.interpolate(self.pad(h), size=(9, 10), mode="bicubic")
        pooled = torch.nn.functional.adaptive_max_pool2d(h, 1).flatten(1)
        pooled = pooled + torch.nn.functional.adaptive_max_pool2d(h, (3, 5)).mean((2, 3)) + \
            torch.nn.functional.adaptive_max_pool2d(h, (4, 3)).amax((2, 3))
        line = self.line(h.flatten(2)[..., :12]).mean(-1)  # [B, 4, 36]
        volume = self.volume(h[:, :, None, :4, :4].expand(-1, -1, 2, -1, -1)).mean((2, 3, 4))
        clip = h[:, :, None, :6, :8].expand(-1, -1, 4, -1, -1)  # [B, 4, 4, 6, 8]
        clip = torch.nn.functional.interpolate(clip, scale_factor=(1, 1.5, 2), mode="trilinear")
        clip = torch.nn.functional.max_pool3d(clip, 2, stride=(1, 2, 2), padding=1)
        clip = torch.nn.functional.avg_pool3d(clip, (2, 3, 3), stride=2, padding=1, ceil_mode=True,
                                              count_include_pad=False)
        clip = torch.nn.functional.adaptive_avg_pool3d(clip, (1, 3, 2)).flatten(2)  # [B, 4, 6]
        clip = torch.nn.functional.interpolate(clip, size=9, mode="linear")
        clip = torch.nn.functional.hardshrink(clip, 0.05) + torch.nn.functional.softshrink(clip)
        volume = volume + clip.mean(-1)[:, :2]
        features = torch.cat([pooled, line, volume, torch.nn.functional.elu(pooled, 0.5)], 1)
        return torch.nn.functional.cross_entropy(self.head(features), labels)


def decoder(batch=5):
    torch.manual_seed(0)
    return Decoder(), {"x": torch.randn(batch, 3, 8, 8), "labels": torch.randint(0, 3, (batch,))}


class Extremes(nn.Module):
    """amin over dims (keepdim or not) and of every element, next to amax:
    min-max scaling of features."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(6, 4)

    def forward(self, x, labels):
        h = self.proj(x)  # [B, 4]
        low, high = h.amin(1, keepdim=True), h.amax(1, keepdim=True)
        scaled = (h - low) / (high - low + 1e-3) + torch.amin(h) + h.amin(0)
        return torch.nn.functional.cross_entropy(scaled[:, :3], labels)


def extremes(batch=5):
    torch.manual_seed(0)
    return Extremes(), {"x": torch.randn(batch, 6), "labels": torch.randint(0, 3, (batch,))}


class Recurrent(nn.Module):
    """nn.LSTM (2 layers, bidirectional, batch first), nn.GRU and nn.RNN
    (ReLU, sequence first): traced as their cells, per time step."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 6, num_layers=2, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(12, 5, batch_first=True)
        self.rnn = nn.RNN(5, 4, nonlinearity="relu")
        self.head = nn.Linear(4, 3)

    def forward(self, tokens, labels):
        h, _ = self.lstm(self.embed(tokens))
        h, last = self.gru(h)
        h, _ = self.rnn(h.transpose(0, 1))
        logits = self.head(h[-1] + last[0].sum(-1, keepdim=True))
        return torch.nn.functional.cross_entropy(logits, labels)


def recurrent(batch=5):
    torch.manual_seed(0)
    return Recurrent(), {"tokens": torch.randint(0, 20, (batch, 7)),
                         "labels": torch.randint(0, 3, (batch,))}


class Packed(nn.Module):
    """An nn.LSTM given a PackedSequence: its batch per time step comes from
    the lengths."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 3, batch_first=True)
        self.head = nn.Linear(3, 2)

    def forward(self, x, lengths, labels):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                   enforce_sorted=False)
        _, (h, _) = self.lstm(packed)
        return torch.nn.functional.cross_entropy(self.head(h[-1]), labels)


def packed():
    torch.manual_seed(0)
    return Packed(), {"x": torch.randn(3, 5, 4), "lengths": torch.tensor([5, 3, 2]),
                      "labels": torch.tensor([0, 1, 1])}


def grouped():
    x = torch.randn(7, 8)
    x[0, :3] = torch.tensor([-0.6, 0.2, 1.0])  # on histc's bin edges
    return Grouped(), (x,)


class Complex(nn.Module):
    """Complex values inside the step, carried as real pairs: rotary
    embeddings as torchtitan's Llama writes them (view_as_complex of the
    projection's pairs times a complex buffer from torch.polar), a complex
    batch input, a learnable phase through polar and exp, a complex matrix
    made with torch.complex, division, conj, abs, an in-place product, a
    complex mean, .real and .imag."""

    def __init__(self, dim=8, seq=6):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        freqs = torch.outer(torch.arange(2 * seq).float(),
                            1.0 / 100 ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(freqs), freqs))
        self.phase = nn.Parameter(torch.randn(dim // 2))
        self.mix = nn.Parameter(torch.randn(dim // 2, dim // 2) * 0.3)
        self.head = nn.Linear(2 * dim, 3)

    def forward(self, x, spectrum, labels):
        h = self.proj(x)
        z = torch.view_as_complex(h.float().reshape(*h.shape[:-1], -1, 2))
        z = z * self.freqs_cis[: x.shape[1]]
        rot = torch.polar(torch.ones_like(self.phase), self.phase)
        z = z * rot.conj() + 0.5j * z / (1.5 + z.abs())
        z = z @ torch.complex(self.mix, self.mix.t())
        s = spectrum.unsqueeze(1) * torch.exp(1j * self.phase)
        z = z + s
        z.mul_(0.9)
        q = z / (s + 2)
        pooled = torch.cat([z.real, z.imag, torch.view_as_real(q).flatten(2)], -1).mean(1)
        gate = z.mean(1).abs().sum(-1, keepdim=True)
        return torch.nn.functional.cross_entropy(self.head(pooled) * gate, labels)


def complex_rope(batch=5, seq=6):
    torch.manual_seed(0)
    return Complex(seq=seq), {"x": torch.randn(batch, seq, 8),
                              "spectrum": torch.randn(batch, 4, dtype=torch.complex64),
                              "labels": torch.randint(0, 3, (batch,))}


class ComplexCases(nn.Module):
    """A complex buffer the step updates in place (`state`, carried as its
    pairs), and a complex op without a real-pair form (`log`)."""

    def __init__(self, what):
        super().__init__()
        self.what, self.fc = what, nn.Linear(4, 4)
        self.register_buffer("phase", torch.ones(2, dtype=torch.complex64))

    def forward(self, x):
        h = torch.view_as_complex(self.fc(x).reshape(-1, 2, 2))
        if self.what == "state":
            self.phase.mul_(1j)
        if self.what == "log":
            h = torch.log(h)
        return torch.view_as_real(h * self.phase).pow(2).mean()


def complex_cases(what):
    torch.manual_seed(0)
    return ComplexCases(what), (torch.randn(3, 4),)


class SpectralConv(nn.Module):
    """A Fourier neural operator layer as neuraloperator's SpectralConv2d
    writes it: rfft2, the lowest modes mixed across channels by a complex
    parameter (einsum), written into a zero spectrum in place, irfft2."""

    def __init__(self, channels=3, modes=3):
        super().__init__()
        self.modes = modes
        self.lift, self.proj = nn.Conv2d(1, channels, 1), nn.Conv2d(channels, 1, 1)
        self.weight = nn.Parameter(
            torch.randn(channels, channels, modes, modes, dtype=torch.cfloat) * 0.3)

    def forward(self, x, y):
        h = self.lift(x)
        spectrum = torch.fft.rfft2(h)
        m = self.modes
        mixed = torch.zeros_like(spectrum)
        mixed[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", spectrum[:, :, :m, :m],
                                           self.weight)
        h = torch.fft.irfft2(mixed, s=h.shape[-2:]) + h
        return torch.nn.functional.mse_loss(self.proj(torch.nn.functional.gelu(h)), y)


def spectral_conv(batch=5):
    torch.manual_seed(0)
    return SpectralConv(), (torch.randn(batch, 1, 8, 7), torch.randn(batch, 1, 8, 7))


class DeltaChunk(nn.Module):
    """torch.eye as the chunked delta rule uses it (an identity added to a
    strictly lower-triangular matrix, a bool identity as a mask); the keys
    computed from `x.float()`, as routers and norms do (in the float64
    reference step the cast keeps float64)."""

    def __init__(self, n=6):
        super().__init__()
        self.k, self.v = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, x):
        k, v = self.k(x.float()), self.v(x)
        n = x.shape[1]
        a = torch.tril(k @ k.transpose(1, 2), diagonal=-1) * 0.1 + torch.eye(n)
        a = a.masked_fill(torch.eye(n, dtype=torch.bool), 1.5)
        return ((a @ v) ** 2).mean() + torch.eye(n, 4).sum() * 0.0


def delta_chunk(batch=5):
    torch.manual_seed(0)
    return DeltaChunk(), (torch.randn(batch, 6, 4),)


class Stretches(nn.Module):
    """Linear, bilinear and bicubic interpolation to hundreds of positions
    under a loss that weighs each output (a reconstruction's): the traced
    decompositions compute the source positions as float32 casts of
    integers, which the float64 check must widen as ATen's float64 kernels
    compute them."""

    def __init__(self):
        super().__init__()
        self.line = nn.Conv1d(2, 2, 1)
        self.plane = nn.Conv2d(2, 2, 1)

    def forward(self, x, image, weights, plane_weights):
        line = torch.nn.functional.interpolate(self.line(x), size=384, mode="linear")
        plane = self.plane(image)
        planes = (torch.nn.functional.interpolate(plane, size=160, mode="bilinear")
                  + torch.nn.functional.interpolate(plane, size=160, mode="bicubic", align_corners=True))
        return (line * weights).sum() + (planes * plane_weights).sum()


def stretches(batch=5):
    torch.manual_seed(0)
    return Stretches(), {"x": torch.randn(batch, 2, 256), "image": torch.randn(batch, 2, 64, 64),
                         "weights": torch.randn(batch, 2, 384),
                         "plane_weights": torch.randn(batch, 2, 160, 160)}


class Resample(nn.Module):
    """Spatial transformers' resampling (`F.affine_grid`, `F.grid_sample`):
    a localization head predicts each image's affine transform; the image's
    features are sampled bilinearly (zero padding), bicubically (reflection,
    align_corners) and at the nearest positions (border), and a volume's
    trilinearly (border), then box-summed over 20 (avg_pool3d's
    divisor_override). The features and the grids both take gradients."""

    def __init__(self):
        super().__init__()
        self.loc = nn.Linear(2 * 8 * 8, 6)
        self.loc3 = nn.Linear(2 * 8 * 8, 12)
        self.features = nn.Conv2d(2, 3, 3, padding=1)
        self.volume = nn.Conv3d(1, 2, 1)
        self.head = nn.Linear(3 * 6 * 7 * 3 + 2 * 3 * 4 * 5, 4)

    def forward(self, image, volume, target):
        f = torch.nn.functional
        n = image.shape[0]
        theta = self.loc(image.flatten(1)).view(n, 2, 3) * 0.3 + torch.eye(2, 3)
        grid = f.affine_grid(theta, [n, 3, 6, 7], align_corners=False)
        features = self.features(image)
        sampled = [f.grid_sample(features, grid, mode="bilinear", padding_mode="zeros",
                                 align_corners=False),
                   f.grid_sample(features, grid * 1.4, mode="bicubic", padding_mode="reflection",
                                 align_corners=True),
                   f.grid_sample(features, grid, mode="nearest", padding_mode="border",
                                 align_corners=False)]
        theta3 = self.loc3(image.flatten(1)).view(n, 3, 4) * 0.3 + torch.eye(3, 4)
        grid3 = f.affine_grid(theta3, [n, 2, 3, 4, 5], align_corners=True)
        volume = f.grid_sample(self.volume(volume), grid3 * 1.2, mode="bilinear",
                               padding_mode="border", align_corners=True)
        sampled.append(volume + f.avg_pool3d(volume, 3, stride=1, padding=1, divisor_override=20))
        logits = self.head(torch.cat([s.flatten(1) for s in sampled], 1))
        return f.cross_entropy(logits, target)


def resample(batch=5):
    torch.manual_seed(0)
    return Resample(), {"image": torch.randn(batch, 2, 8, 8),
                        "volume": torch.randn(batch, 1, 4, 5, 6),
                        "target": torch.randint(0, 4, (batch,))}


class Regression(nn.Module):
    """A mean squared error (F.mse_loss: the elements' mean) and a mean over
    the batch."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, y):
        out = self.fc(x)
        return nn.functional.mse_loss(out, y) + out.mean(0).square().sum()


def regression(batch=5):
    torch.manual_seed(0)
    return Regression(), {"x": torch.randn(batch, 4), "y": torch.randn(batch, 3)}


class Prototypes(nn.Module):
    """Prototypical classification: logits are negated distances from the
    embeddings to learned prototypes (torch.cdist, p = 2, 1 and inf), and
    the embeddings' pairwise distances within a batch are spread apart."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 4)
        self.prototypes = nn.Parameter(torch.randn(3, 4))

    def forward(self, x, target):
        e = self.embed(x)
        logits = -torch.cdist(e, self.prototypes) - 0.1 * torch.cdist(e, self.prototypes, p=1)
        logits = logits - 0.1 * torch.cdist(e[None], self.prototypes[None], p=float("inf"))[0]
        spread = torch.cdist(e, e.detach() + 0.5, p=1.5).mean()
        return nn.functional.cross_entropy(logits, target) - 0.01 * spread


def prototypes(batch=5):
    torch.manual_seed(0)
    return Prototypes(), {"x": torch.randn(batch, 6), "target": torch.randint(0, 3, (batch,))}


class Ensemble(nn.Module):
    """Heads stacked and averaged (an ensemble, multi-crop logits): stacks at
    a new leading dim, in the middle and last, of batch-major tensors."""

    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleList(nn.Linear(6, 4) for _ in range(3))

    def forward(self, x, target):
        outs = [head(x) for head in self.heads]
        mean = torch.stack(outs).mean(0)
        spread = torch.stack(outs, dim=1).std(1)
        last = torch.stack(outs, dim=-1).amax(-1)
        return nn.functional.cross_entropy(mean + spread + last, target)


def ensemble(batch=5):
    torch.manual_seed(0)
    return Ensemble(), {"x": torch.randn(batch, 6), "target": torch.randint(0, 4, (batch,))}


class InstanceNorms(nn.Module):
    """InstanceNorm 1-d, 2-d (affine, with running statistics) and 3-d
    (affine) after convolutions: style transfer's and image-to-image
    generators' normalization."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.plane = nn.InstanceNorm2d(4, affine=True, track_running_stats=True)
        self.line = nn.InstanceNorm1d(4)
        self.volume = nn.InstanceNorm3d(2, affine=True)
        self.head = nn.Linear(4 + 4 + 2, 3)

    def forward(self, image, sequence, volume, target):
        h = torch.relu(self.plane(self.conv(image))).mean((2, 3))
        s = self.line(sequence * 3 + 1).amax(2)
        v = torch.tanh(self.volume(volume)).mean((2, 3, 4))
        return nn.functional.cross_entropy(self.head(torch.cat([h, s, v], 1)), target)


def instance_norms(batch=5):
    torch.manual_seed(0)
    return InstanceNorms(), {"image": torch.randn(batch, 3, 6, 6),
                             "sequence": torch.randn(batch, 4, 7),
                             "volume": torch.randn(batch, 2, 3, 4, 5),
                             "target": torch.randint(0, 3, (batch,))}


class Siamese(nn.Module):
    """One encoder run on two images concatenated along the batch and split
    again (RAFT's feature encoder): the concatenation of two batch-sharded
    tensors is a StridedShard of the doubled batch, which the convolutions
    and instance norms take as it is."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1),
                                     nn.InstanceNorm2d(4), nn.ReLU(),
                                     nn.Conv2d(4, 4, 3, padding=1))

    def forward(self, first, second, target):
        a, b = torch.chunk(self.encoder(torch.cat([first, second], 0)), 2, 0)
        return ((a * b).sum(1) - target).square().mean()


def siamese(batch=6):
    torch.manual_seed(0)
    return Siamese(), {"first": torch.randn(batch, 3, 8, 8), "second": torch.randn(batch, 3, 8, 8),
                       "target": torch.randn(batch, 4, 4)}


class DilatedTranspose(nn.Module):
    """Transposed convolutions whose output_padding reaches the stride,
    which PyTorch allows below the dilation (1-D: stride 2, dilation 3,
    output_padding 2; 2-D grouped: stride 1, dilation 2, output_padding 1)."""

    def __init__(self):
        super().__init__()
        self.line = nn.ConvTranspose1d(3, 4, 3, stride=2, dilation=3, output_padding=2)
        self.plane = nn.ConvTranspose2d(4, 6, 2, stride=1, padding=1, dilation=2,
                                        output_padding=1, groups=2)

    def forward(self, x, image):
        return (self.line(x) ** 2).mean() + (self.plane(image) ** 2).mean()


def dilated_transpose(batch=5):
    torch.manual_seed(0)
    return DilatedTranspose(), {"x": torch.randn(batch, 3, 7), "image": torch.randn(batch, 4, 5, 6)}


class SplitAtEnd(nn.Module):
    """`torch.tensor_split` at a dim's end (a recurrent scan's split of its
    input into the part it scans and an empty rest): the whole piece is the
    tensor itself, and its backward writes the full gradient into zeros
    (`aten.slice_scatter` covering everything), which the capture drops.
    A split in the middle keeps its slices and scatters."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(8, 12)

    def forward(self, x, target):
        h = self.up(x)
        scanned, rest = torch.tensor_split(h, [h.shape[1]], dim=1)
        left, right = torch.tensor_split(h, [5], dim=1)
        y = scanned.tanh().sum(1) + left.sigmoid().sum(1) * right.exp().mean(1) + rest.sum(1)
        return ((y - target) ** 2).mean()


def split_at_end(batch=5):
    torch.manual_seed(0)
    return SplitAtEnd(), {"x": torch.randn(batch, 8), "target": torch.randn(batch)}


class DropoutAfterUpsampling(nn.Module):
    """Dropout on a tensor whose layout eager and the traced graph disagree
    on (DPT's fusion stage): tokens reshaped into a channels-last feature
    map, convolved down to 1x1, where channels-last and contiguous strides
    are both valid, a residual block and bilinear upsampling. ATen's
    kernels give the upsampled map contiguous strides, PyTorch's
    decompositions channels-last ones, and the convolution after it and
    the dropout's `empty_like(x)` follow. The mask must still be the eager step's."""

    def __init__(self):
        super().__init__()
        self.down = nn.Conv2d(8, 8, 2, stride=2)
        self.mix = nn.Conv2d(8, 8, 1)
        self.up = nn.Conv2d(8, 8, 1)
        self.head = nn.Conv2d(8, 2, 1)
        self.drop = nn.Dropout(0.5)

    def forward(self, tokens, target):
        b = tokens.shape[0]
        h = self.down(tokens.permute(0, 2, 1).reshape(b, 8, 2, 2))
        h = h + self.mix(h.relu())
        h = nn.functional.interpolate(h, scale_factor=2, mode="bilinear", align_corners=True)
        return ((self.head(self.drop(self.up(h).relu())) - target) ** 2).mean()


def dropout_after_upsampling(batch=5):
    torch.manual_seed(0)
    return DropoutAfterUpsampling(), {"tokens": torch.randn(batch, 4, 8),
                                      "target": torch.randn(batch, 2, 2, 2)}
