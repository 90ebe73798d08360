"""Each op spmd-capture rewrites to real pairs (spmd_capture/complex.py),
checked against PyTorch's complex op: a function of complex and real
tensors is traced as the capture's first stage traces (make_fx, no
decompositions), replayed on real pairs as its second stage replays
(trace._Replay), and its results compared with PyTorch's, viewed as real
pairs. Prints one line per op that differs, then the count."""
import sys
import warnings

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from spmd_capture import CaptureError, trace
from spmd_capture.complex import as_pairs

g = torch.Generator().manual_seed(0)
Z = torch.randn(3, 4, dtype=torch.complex64, generator=g)
W = torch.randn(3, 4, dtype=torch.complex64, generator=g)
R = torch.randn(3, 4, generator=g)
IDX = torch.tensor([2, 0, 2])


def _inplace(z, w, r):
    y = z.clone()
    torch.view_as_complex(torch.view_as_real(y)).mul_(w)  # through a view
    y.add_(r)
    return y


CASES = {
    "add": lambda z, w, r: z + w, "add real": lambda z, w, r: z + r,
    "add scalar": lambda z, w, r: z + (1 - 2j), "radd real": lambda z, w, r: r + z,
    "sub alpha": lambda z, w, r: torch.sub(z, w, alpha=3), "rsub": lambda z, w, r: 2 - z,
    "mul": lambda z, w, r: z * w, "mul real": lambda z, w, r: r * z,
    "mul scalar": lambda z, w, r: z * 0.5j,
    "div": lambda z, w, r: z / w, "div real": lambda z, w, r: z / (r.abs() + 1),
    "rdiv real": lambda z, w, r: r / w, "div scalar": lambda z, w, r: z / (1 + 1j),
    "neg": lambda z, w, r: -z, "conj": lambda z, w, r: z.conj() * w,
    "conj_physical": lambda z, w, r: torch.conj_physical(z),
    "reciprocal": lambda z, w, r: z.reciprocal(), "abs": lambda z, w, r: z.abs(),
    "sgn": lambda z, w, r: z.sgn(), "exp": lambda z, w, r: z.exp(),
    "polar": lambda z, w, r: torch.polar(r.abs(), r * 2),
    "complex": lambda z, w, r: torch.complex(r, r * 3),
    "real/imag": lambda z, w, r: z.real * 2 + z.imag,
    "view_as_real": lambda z, w, r: torch.view_as_real(z * w),
    "mm": lambda z, w, r: z @ w.t(),
    "bmm": lambda z, w, r: torch.bmm(z[None], w.t()[None]),
    "where": lambda z, w, r: torch.where(r > 0, z, w),
    "view/reshape": lambda z, w, r: z.view(2, 6).reshape(12, 1),
    "expand": lambda z, w, r: z[:, None].expand(3, 5, 4),
    "permute/transpose": lambda z, w, r: z[None].permute(2, 0, 1).transpose(0, -1),
    "unsqueeze/squeeze": lambda z, w, r: z.unsqueeze(-1).unsqueeze(0).squeeze(),
    "squeeze dim": lambda z, w, r: z[:, None].squeeze(1),
    "slice/select": lambda z, w, r: z[1:, ::2].select(-1, 1),
    "narrow": lambda z, w, r: z.narrow(1, 1, 2),
    "cat": lambda z, w, r: torch.cat([z, w], -1), "cat real": lambda z, w, r: torch.cat([z, r]),
    "stack": lambda z, w, r: torch.stack([z, w], 1),
    "split": lambda z, w, r: z.split([1, 3], -1)[1], "chunk": lambda z, w, r: z.chunk(2)[1],
    "unbind": lambda z, w, r: z.unbind(1)[2],
    "flip": lambda z, w, r: z.flip(-1), "roll": lambda z, w, r: z.roll(1, 0),
    "roll flat": lambda z, w, r: z.roll(5),
    "repeat": lambda z, w, r: z.repeat(2, 1),
    "index": lambda z, w, r: z[IDX], "index_select": lambda z, w, r: z.index_select(1, IDX),
    "index_put": lambda z, w, r: z.index_put((IDX,), w[0], accumulate=True),
    "slice_scatter": lambda z, w, r: torch.slice_scatter(z, w[:, :2], 1, 2),
    "select_scatter": lambda z, w, r: torch.select_scatter(z, w[0], 0, 1),
    "pad": lambda z, w, r: torch.nn.functional.pad(z, (1, 2)),
    "sum": lambda z, w, r: z.sum(-1, keepdim=True) + z.sum(),
    "mean": lambda z, w, r: z.mean(0) + z.mean(),
    "zeros/ones/full": lambda z, w, r: torch.zeros_like(z) + torch.ones_like(z) +
    torch.full_like(z, 2 - 1j) + z.new_zeros(4),
    "to complex128": lambda z, w, r: z.to(torch.complex128),
    "real to complex": lambda z, w, r: r.to(torch.complex64) * z,
    "to real": lambda z, w, r: (z * w).to(torch.float32),
    "in place": _inplace,
    "fft": lambda z, w, r: torch.fft.fft(z), "ifft ortho": lambda z, w, r: torch.fft.ifft(
        z, norm="ortho"),
    "fft2 forward": lambda z, w, r: torch.fft.fft2(z, norm="forward"),
    "fftn real (FNet)": lambda z, w, r: torch.fft.fftn(r, dim=(0, 1)).real,
    "rfft": lambda z, w, r: torch.fft.rfft(r), "rfft2": lambda z, w, r: torch.fft.rfft2(r),
    "irfft": lambda z, w, r: torch.fft.irfft(z), "irfft odd n": lambda z, w, r: torch.fft.irfft(
        z, n=5, norm="ortho"),
    "irfft2": lambda z, w, r: torch.fft.irfft2(z[:, :3]),
    "hfft": lambda z, w, r: torch.fft.hfft(z),
    "fftshift": lambda z, w, r: torch.fft.fftshift(torch.fft.fft(z)),
}


def _grad(loss):
    """The gradient of a real loss of (z, w, r) with respect to r, through
    the complex ops' backward (what autograd records in a training step)."""
    def fn(z, w, r):
        r = r.detach().requires_grad_()
        return torch.autograd.grad(loss(z, w, r), r)[0]
    return fn


CASES.update({
    "grad polar/mul/abs": _grad(lambda z, w, r: (torch.polar(r.abs() + 1, r) * w).abs().sum()),
    "grad rotary": _grad(lambda z, w, r: torch.view_as_real(
        torch.view_as_complex(r.reshape(3, 2, 2)) * w[:, :2]).pow(2).sum()),
    "grad div/exp/conj": _grad(lambda z, w, r: torch.view_as_real(
        (z * r).exp() / (w.conj() + 2)).sum()),
    "grad matmul/sum": _grad(lambda z, w, r: (torch.complex(r, r.flip(0)) @ w.t()).sum().abs()),
    "grad real/imag/cat": _grad(lambda z, w, r: torch.cat([(z * r).real, (w * r).imag]).sum()),
    "grad fftn real (FNet)": _grad(lambda z, w, r: (torch.fft.fftn(r, dim=(0, 1)).real *
                                                    r.flip(1)).sum()),
    "grad rfft/irfft": _grad(lambda z, w, r: (torch.fft.irfft(torch.fft.rfft(r) * w[:, :3],
                                                             n=4) ** 2).sum()),
    "grad fft/ifft": _grad(lambda z, w, r: torch.fft.ifft(torch.fft.fft(z * r) * w).abs().sum()),
    "grad slice/select": _grad(lambda z, w, r: (torch.complex(r, r)[1:, :2] * w[1:, :2]).abs()
                               .sum() + torch.complex(r, -r)[0].abs().sum()),
    "grad index/expand": _grad(lambda z, w, r: (torch.complex(r, -r)[IDX][:, None].expand(
        3, 2, 4) * z[:, None]).abs().mean()),
})


def main():
    warnings.simplefilter("ignore")  # "Casting complex values to real discards ..."
    bad = 0
    for name, fn in CASES.items():
        gm = make_fx(fn)(Z, W, R)
        try:
            got = trace._Replay(gm, trace._Scope()).run(as_pairs(Z), as_pairs(W), R.clone())
        except CaptureError as e:
            bad += 1
            print("FAILS: %s: %s" % (name, e))
            continue
        want = fn(Z, W, R)
        want = torch.view_as_real(want) if want.is_complex() else want
        if got.shape != want.shape or got.dtype != want.dtype or \
                not torch.allclose(got, want, rtol=1e-5, atol=1e-6):
            bad += 1
            print("DIFFERS: %s: %s %s vs PyTorch's %s %s" % (
                name, got.dtype, list(got.shape), want.dtype, list(want.shape)))
    print("complex ops: %d of %d match PyTorch" % (len(CASES) - bad, len(CASES)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
