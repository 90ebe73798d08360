"""Complex tensors as real pairs.

The aten dialect has no complex element types. A step that computes on
complex values (rotary embeddings written with torch.view_as_complex and
torch.polar, as torchtitan's and Meta's reference Llama and DeepSeek-V2 write
them; a complex buffer of precomputed frequencies) is traced as PyTorch runs
it. Then, while the first-stage graph is replayed (trace._Replay), every op
that reads or makes a complex tensor runs on real pairs instead: a complex
tensor of shape S is the real tensor of shape S + [2] that
torch.view_as_real gives (real part at index 0 of the last dim, imaginary
part at 1). view_as_complex and view_as_real are then the tensor itself; a
complex product is four real products (COMPLEX_OPS). The second-stage graph,
and the dialect, see real ops only.

Views of a complex tensor stay views of its pairs, and an in-place op on a
complex tensor writes its pairs in place, so aliasing (an in-place product
on view_as_complex(x) changes x) is PyTorch's.
"""
import math
import operator

import torch
import torch.nn.functional as F

from . import CaptureError

aten = torch.ops.aten

# The real dtype of each complex dtype's parts.
REAL_OF = {torch.complex32: torch.float16, torch.complex64: torch.float32,
           torch.complex128: torch.float64}


def is_complex(value):
    """Whether a traced value (a tensor, or a list of them) is complex."""
    if isinstance(value, (list, tuple)):
        return any(is_complex(v) for v in value)
    return isinstance(value, torch.Tensor) and value.is_complex()


def node_is_complex(node):
    return isinstance(node, torch.fx.Node) and is_complex(node.meta.get("val"))


def as_pairs(tensor):
    """A complex tensor as its real pairs (a copy); any other as it is."""
    if isinstance(tensor, torch.Tensor) and tensor.is_complex():
        return torch.view_as_real(tensor).clone()
    return tensor


class Pair:
    """A complex tensor of shape S held as the real tensor `t`, shape S + [2]."""
    __slots__ = ("t",)

    def __init__(self, t):
        self.t = t

    @property
    def re(self):
        return self.t[..., 0]

    @property
    def im(self):
        return self.t[..., 1]

    @property
    def ndim(self):
        return self.t.dim() - 1


def _pair(re, im):
    """The Pair of real and imaginary parts (tensors or numbers, broadcast)."""
    if not isinstance(re, torch.Tensor) and not isinstance(im, torch.Tensor):
        return Pair(torch.tensor([re, im]))
    if not isinstance(re, torch.Tensor):
        re = torch.full_like(im, re)
    if not isinstance(im, torch.Tensor):
        im = torch.full_like(re, im)
    return Pair(torch.stack(torch.broadcast_tensors(re, im), -1))


def _parts(x):
    """(real, imaginary) of a Pair, a complex number, or a real tensor or
    number (imaginary None)."""
    if isinstance(x, Pair):
        return x.re, x.im
    if isinstance(x, complex):
        return x.real, x.imag
    return x, None


def _to_pair(x):
    """A Pair of `x`: a real tensor gets a zero imaginary part."""
    if isinstance(x, Pair):
        return x
    re, im = _parts(x)
    return _pair(re, 0.0 if im is None else im)


def _last(x):
    """A real operand broadcast against pairs: a tensor gains a trailing dim."""
    return x.unsqueeze(-1) if isinstance(x, torch.Tensor) else x


def _dim(d, n):
    """Dim `d` of a complex tensor with `n` dims, as a dim of its pairs."""
    return d % n if n else 0


def _dims(dims, n):
    return [_dim(d, n) for d in dims]


# -- arithmetic ---------------------------------------------------------------

def _add(a, b, alpha=1):
    (ar, ai), (br, bi) = _parts(a), _parts(b)
    if isinstance(alpha, complex):
        return _add(a, _mul(b, alpha))
    if isinstance(a, Pair) and isinstance(b, Pair):
        return Pair(torch.add(a.t, b.t, alpha=alpha))
    im = ai if bi is None else alpha * bi if ai is None else ai + alpha * bi
    return _pair(ar + alpha * br, 0.0 if im is None else im)


def _sub(a, b, alpha=1):
    return _add(a, b, -alpha)


def _rsub(a, b, alpha=1):
    return _add(b, a, -alpha)


def _mul(a, b):
    (ar, ai), (br, bi) = _parts(a), _parts(b)
    if bi is None:
        return Pair(a.t * _last(b)) if isinstance(a, Pair) else _pair(ar * br, ai * br)
    if ai is None:
        return _mul(b, a)
    return _pair(ar * br - ai * bi, ar * bi + ai * br)


def _conj(a):
    re, im = _parts(a)
    return _pair(re, -im)


def _abs2(b):
    br, bi = _parts(b)
    return br * br + bi * bi


def _div(a, b, rounding_mode=None):
    if rounding_mode is not None:
        raise CaptureError("division of complex values with rounding_mode=%r" % rounding_mode)
    br, bi = _parts(b)
    if bi is None:
        return Pair(a.t / _last(b))
    if isinstance(b, complex):
        return _mul(a, b.conjugate() / abs(b) ** 2)
    return Pair(_to_pair(_mul(a, _conj(b))).t / _abs2(b).unsqueeze(-1))


def _reciprocal(a):
    return Pair(_conj(a).t / _abs2(a).unsqueeze(-1))


def _abs(a):
    return torch.sqrt(_abs2(a))


def _sgn(a):
    # z / |z|, and 0 at 0 (ATen's sgn).
    r = _abs(a)
    return Pair(a.t / torch.where(r == 0, torch.ones_like(r), r).unsqueeze(-1))


def _exp(a):
    m = torch.exp(a.re)
    return _pair(m * torch.cos(a.im), m * torch.sin(a.im))


def _polar(abs, angle):
    return _pair(abs * torch.cos(angle), abs * torch.sin(angle))


def _matmul(op):
    def product(a, b):
        (ar, ai), (br, bi) = _parts(a), _parts(b)
        if ai is None:
            return _pair(op(ar, br), op(ar, bi))
        if bi is None:
            return _pair(op(ar, br), op(ai, br))
        return _pair(op(ar, br) - op(ai, bi), op(ar, bi) + op(ai, br))
    return product


# -- discrete Fourier transforms ----------------------------------------------
# ATen's _fft_* ops (torch.fft's functions, FNet's token mixing) as products
# with the DFT matrix along each transformed dim: O(n^2) per dim where an FFT
# is O(n log n), in ops the dialect has. The matrix's angles 2*pi*(j*k mod
# n)/n come from exact integers, so that cos and sin see angles below 2*pi.

def _dft(n, rows, dtype, device):
    """(cos, sin) of the angles 2*pi*j*k/n, j < rows, k < n: [rows, n]."""
    j = torch.arange(rows, device=device)
    k = torch.arange(n, device=device)
    angle = torch.remainder(j[:, None] * k[None, :], n).to(dtype) * (2 * math.pi / n)
    return torch.cos(angle), torch.sin(angle)


def _scale(normalization, sizes):
    """ATen's fft_norm_mode: 0 none, 1 by 1/sqrt(n), 2 by 1/n (n the
    product of the transformed sizes)."""
    n = math.prod(sizes)
    return {0: 1.0, 1: 1.0 / math.sqrt(n), 2: 1.0 / n}[normalization]


def _dft_dim(re, im, d, forward, columns=None):
    """(re + i im) transformed along dim d: sum_j x_j e^(-+2 pi i j k / n)
    (minus forward), for k < `columns` (default n)."""
    n = re.shape[d]
    c, s = _dft(n, n, re.dtype, re.device)
    if columns is not None:
        c, s = c[:, :columns], s[:, :columns]
    sign = 1.0 if forward else -1.0
    re, im = re.movedim(d, -1), None if im is None else im.movedim(d, -1)
    out_re, out_im = re @ c, -sign * (re @ s)
    if im is not None:
        out_re, out_im = out_re + sign * (im @ s), out_im + im @ c
    return out_re.movedim(-1, d), out_im.movedim(-1, d)


def _fft(re, im, dims, normalization, forward, onesided=False):
    sizes = [re.shape[d] for d in dims]
    for k, d in enumerate(dims):
        last = k == len(dims) - 1
        re, im = _dft_dim(re, im, d, forward,
                          re.shape[d] // 2 + 1 if onesided and last else None)
    scale = _scale(normalization, sizes)
    return _pair(re * scale, im * scale)


def _fft_c2c(a, dim, normalization, forward):
    return _fft(a.re, a.im, _dims(dim, a.ndim), normalization, forward)


def _fft_r2c(x, dim, normalization, onesided):
    return _fft(x, None, [d % x.dim() for d in dim], normalization, True, onesided)


def _fft_c2r(a, dim, normalization, last_dim_size):
    """The inverse transform of a Hermitian spectrum whose last transformed
    dim holds its first n // 2 + 1 entries (n = last_dim_size): a real
    tensor. As pocketfft, the imaginary parts of entries 0 and n / 2 are
    not read."""
    dims = _dims(dim, a.ndim)
    re, im = a.re, a.im
    for d in dims[:-1]:
        re, im = _dft_dim(re, im, d, False)
    d, n = dims[-1], last_dim_size
    half = n // 2 + 1
    re, im = re.narrow(d, 0, half).movedim(d, -1), im.narrow(d, 0, half).movedim(d, -1)
    c, s = _dft(n, half, re.dtype, re.device)
    # Entries 1 .. ceil(n / 2) - 1 stand for their conjugate mirror too.
    k = torch.arange(half, device=re.device)
    weight = torch.where((k == 0) | (2 * k == n), 1.0, 2.0).to(re.dtype)[:, None]
    out = re @ (c * weight) - im @ (s * weight)
    return out.movedim(-1, d) * _scale(normalization, [a.t.shape[x] for x in dims[:-1]] + [n])


def _where(cond, a, b):
    return Pair(torch.where(cond.unsqueeze(-1), _to_pair(a).t, _to_pair(b).t))


def _to_copy(node):
    def convert(a, dtype=None, **_):
        want = node.meta["val"].dtype
        if not want.is_complex:  # complex to real keeps the real part (ATen's cast)
            return a.re.to(want)
        return Pair(_to_pair(a).t.to(REAL_OF[want]))
    return convert


# -- shapes -------------------------------------------------------------------

def _view(a, size):
    size = list(size) + [2]
    return Pair(a.t.view(size) if a.t.is_contiguous() else a.t.reshape(size))


def _squeeze(node):
    def squeeze(a, dims=None):
        shape = node.args[0].meta["val"].shape
        if dims is None:
            dims = [d for d, s in enumerate(shape) if s == 1]
        elif isinstance(dims, int):
            dims = [dims]
        keep = [s for d, s in enumerate(shape)
                if not (d in _dims(dims, len(shape)) and s == 1)]
        return Pair(a.t.reshape(keep + [2]))
    return squeeze


def _cat(tensors, dim=0):
    pairs = [_to_pair(t) for t in tensors]
    return Pair(torch.cat([p.t for p in pairs], _dim(dim, pairs[0].ndim)))


def _stack(tensors, dim=0):
    pairs = [_to_pair(t) for t in tensors]
    return Pair(torch.stack([p.t for p in pairs], _dim(dim, pairs[0].ndim + 1)))


def _sum(a, dims=None, keepdim=False, dtype=None):
    dims = _dims(dims, a.ndim) if dims else list(range(a.ndim))
    out = a.t.sum(dims, keepdim=keepdim) if dims else a.t.clone()
    return Pair(out if dtype is None else out.to(REAL_OF[dtype]))


def _mean(a, dims=None, keepdim=False, dtype=None):
    dims = _dims(dims, a.ndim) if dims else list(range(a.ndim))
    out = a.t.mean(dims, keepdim=keepdim) if dims else a.t.clone()
    return Pair(out if dtype is None else out.to(REAL_OF[dtype]))


def _index_put(a, indices, values, accumulate=False):
    return Pair(aten.index_put.default(a.t, indices, _to_pair(values).t, accumulate))


def _made(node, value=0.0, at=None):
    """A factory op making a complex tensor (zeros, ones, full, empty and
    their _like/new_ forms): the pairs of the node's shape, filled with
    `value` or with positional argument `at` (a number)."""
    val = node.meta["val"]

    def make(*args, **kwargs):
        fill = value if at is None else args[at]
        re, im = (fill.real, fill.imag) if isinstance(fill, complex) else (fill, 0.0)
        base = torch.zeros(list(val.shape) + [2], dtype=REAL_OF[val.dtype], device=val.device)
        return _pair(base[..., 0] + re, base[..., 1] + im)
    return make


# {ATen overload: the op on pairs}. Each takes the op's arguments, complex
# tensors as Pair, and returns a Pair where the op makes a complex tensor.
# Factories that need the node (its shape, its input's shape) are built per
# node (_PER_NODE).
COMPLEX_OPS = {
    aten.view_as_complex.default: lambda x: Pair(x),
    aten.view_as_real.default: lambda a: a.t,
    aten.real.default: lambda a: a.re,
    aten.imag.default: lambda a: a.im,
    aten.complex.default: _pair,
    aten.polar.default: _polar,
    aten.add.Tensor: _add, aten.add.Scalar: _add,
    aten.sub.Tensor: _sub, aten.sub.Scalar: _sub, aten.rsub.Tensor: _rsub,
    aten.rsub.Scalar: _rsub,
    aten.mul.Tensor: _mul, aten.mul.Scalar: _mul,
    aten.div.Tensor: _div, aten.div.Scalar: _div, aten.div.Tensor_mode: _div,
    aten.neg.default: lambda a: Pair(-a.t),
    aten._conj.default: _conj, aten.conj_physical.default: _conj,
    aten._conj_physical.default: _conj,
    aten.resolve_conj.default: lambda a: a, aten.resolve_neg.default: lambda a: a,
    aten.reciprocal.default: _reciprocal,
    aten.abs.default: _abs,
    aten.sgn.default: _sgn,
    aten.exp.default: _exp,
    aten.angle.default: lambda a: torch.atan2(a.im, a.re),
    aten.mm.default: _matmul(torch.mm), aten.bmm.default: _matmul(torch.bmm),
    aten.where.self: _where,
    aten.clone.default: lambda a, memory_format=None: Pair(a.t.clone()),
    aten.alias.default: lambda a: Pair(a.t.view(a.t.shape)),
    aten.detach.default: lambda a: Pair(a.t.detach()),
    aten.lift_fresh_copy.default: lambda a: Pair(a.t.clone()),
    aten.view.default: _view, aten._unsafe_view.default: _view,
    aten.reshape.default: _view,
    aten.expand.default: lambda a, size, implicit=False: Pair(a.t.expand(list(size) + [2])),
    aten.permute.default: lambda a, dims: Pair(a.t.permute(_dims(dims, a.ndim) + [a.ndim])),
    aten.transpose.int: lambda a, d0, d1: Pair(a.t.transpose(_dim(d0, a.ndim),
                                                             _dim(d1, a.ndim))),
    aten.t.default: lambda a: Pair(a.t.transpose(0, 1) if a.ndim == 2 else a.t),
    aten.unsqueeze.default: lambda a, d: Pair(a.t.unsqueeze(_dim(d, a.ndim + 1))),
    aten.slice.Tensor: lambda a, dim=0, start=None, end=None, step=1: Pair(
        aten.slice.Tensor(a.t, _dim(dim, a.ndim), start, end, step)),
    aten.select.int: lambda a, dim, index: Pair(a.t.select(_dim(dim, a.ndim), index)),
    aten.narrow.default: lambda a, dim, start, length: Pair(
        a.t.narrow(_dim(dim, a.ndim), start, length)),
    aten.cat.default: _cat,
    aten.stack.default: _stack,
    aten.split.Tensor: lambda a, size, dim=0: [
        Pair(t) for t in a.t.split(size, _dim(dim, a.ndim))],
    aten.split_with_sizes.default: lambda a, sizes, dim=0: [
        Pair(t) for t in a.t.split(list(sizes), _dim(dim, a.ndim))],
    aten.unbind.int: lambda a, dim=0: [Pair(t) for t in a.t.unbind(_dim(dim, a.ndim))],
    aten.chunk.default: lambda a, chunks, dim=0: [
        Pair(t) for t in a.t.chunk(chunks, _dim(dim, a.ndim))],
    aten.flip.default: lambda a, dims: Pair(a.t.flip(_dims(dims, a.ndim))),
    aten.roll.default: lambda a, shifts, dims=(): Pair(a.t.roll(shifts, _dims(dims, a.ndim)))
    if dims else Pair(a.t.reshape(-1, 2).roll(shifts, 0).reshape(a.t.shape)),
    aten.repeat.default: lambda a, repeats: Pair(a.t.repeat(list(repeats) + [1])),
    aten.index.Tensor: lambda a, indices: Pair(aten.index.Tensor(a.t, indices)),
    aten.index_select.default: lambda a, dim, index: Pair(
        a.t.index_select(_dim(dim, a.ndim), index)),
    aten.index_put.default: _index_put,
    aten.slice_scatter.default: lambda a, src, dim=0, start=None, end=None, step=1: Pair(
        aten.slice_scatter.default(_to_pair(a).t, _to_pair(src).t, _dim(dim, a.ndim),
                                   start, end, step)),
    aten.select_scatter.default: lambda a, src, dim, index: Pair(
        aten.select_scatter.default(_to_pair(a).t, _to_pair(src).t, _dim(dim, a.ndim),
                                    index)),
    aten.slice_backward.default: lambda g, sizes, dim, start, end, step: Pair(
        aten.slice_scatter.default(g.t.new_zeros(list(sizes) + [2]), g.t,
                                   _dim(dim, len(sizes)), start, end, step)),
    aten.select_backward.default: lambda g, sizes, dim, index: Pair(
        aten.select_scatter.default(g.t.new_zeros(list(sizes) + [2]), g.t,
                                    _dim(dim, len(sizes)), index)),
    aten.sum.dim_IntList: _sum, aten.sum.default: lambda a, dtype=None: _sum(a, dtype=dtype),
    aten.mean.dim: _mean, aten.mean.default: lambda a, dtype=None: _mean(a, dtype=dtype),
    aten._fft_c2c.default: _fft_c2c, aten._fft_r2c.default: _fft_r2c,
    aten._fft_c2r.default: _fft_c2r,
    aten.constant_pad_nd.default: lambda a, pad, value=0: Pair(F.pad(a.t, [0, 0] + list(pad)))
    if value == 0 else None,
    aten.copy.default: lambda a, src, non_blocking=False: Pair(
        _to_pair(src).t.to(a.t.dtype).expand_as(a.t).clone()),
    aten.zero.default: lambda a: Pair(torch.zeros_like(a.t)),
}

# Ops that need their node: the result's dtype or shape, an input's shape.
_PER_NODE = {
    aten._to_copy.default: _to_copy,
    aten.squeeze.default: _squeeze, aten.squeeze.dim: _squeeze, aten.squeeze.dims: _squeeze,
    aten.zeros_like.default: _made, aten.empty_like.default: _made,
    aten.new_zeros.default: _made, aten.new_empty.default: _made,
    aten.zeros.default: _made, aten.empty.memory_format: _made,
    aten.new_empty_strided.default: _made, aten.empty_strided.default: _made,
    aten.ones_like.default: lambda n: _made(n, 1.0),
    aten.new_ones.default: lambda n: _made(n, 1.0), aten.ones.default: lambda n: _made(n, 1.0),
    aten.full_like.default: lambda n: _made(n, at=1),
    aten.new_full.default: lambda n: _made(n, at=2),
    aten.full.default: lambda n: _made(n, at=1),
    aten.scalar_tensor.default: lambda n: _made(n, at=0),
}


def _handler(node):
    """The op on pairs for `node`, or None. An in-place op (`mul_`) runs its
    functional form and writes the result into its first argument's pairs."""
    target = node.target
    if target in _PER_NODE:
        return _PER_NODE[target](node)
    if target in COMPLEX_OPS:
        return COMPLEX_OPS[target]
    schema = getattr(target, "_schema", None)
    if schema is None or not schema.name.endswith("_") or not schema.arguments or \
            not schema.arguments[0].alias_info or not schema.arguments[0].alias_info.is_write:
        return None
    packet = getattr(aten, schema.name.split("::")[1][:-1], None)
    functional = getattr(packet, target._overloadname, None) if packet else None
    if functional not in COMPLEX_OPS:
        return None

    def in_place(a, *args, **kwargs):
        a.t.copy_(_to_pair(COMPLEX_OPS[functional](a, *args, **kwargs)).t)
        return a
    return in_place


def run_node(node, env, describe):
    """Runs first-stage `node`, which reads or makes a complex tensor, on
    real pairs: `env` maps each node to its value (a complex one as its
    pairs). Returns the node's value, a complex result as its pairs.

    Raises CaptureError naming the op and `describe` (where it runs) for an
    op that has no form on pairs (COMPLEX_OPS)."""
    if node.target is operator.getitem:
        return env[node.args[0]][node.args[1]]
    handler = _handler(node)
    if handler is None:
        raise CaptureError(
            "%s in %s computes on complex values; the aten dialect has no complex types and "
            "spmd-capture has no real-pair form of this op (it has: view_as_complex, "
            "view_as_real, polar, complex, arithmetic, conj, abs, exp, views, cat, sums, "
            "indexing, torch.fft's transforms)" % (node.target, describe))

    def value(a):
        return Pair(env[a]) if node_is_complex(a) else env[a]
    args = torch.fx.node.map_arg(node.args, value)
    kwargs = torch.fx.node.map_arg(node.kwargs, value)
    try:
        out = handler(*args, **kwargs)
    except (AttributeError, TypeError) as e:  # a real operand where the form needs pairs
        raise CaptureError("%s in %s: these arguments have no real-pair form (%s)"
                           % (node.target, describe, e)) from None
    if out is None:
        raise CaptureError("%s in %s: these arguments have no real-pair form"
                           % (node.target, describe))
    want = node.meta["val"]
    if isinstance(out, list):
        return [_checked(o, w, node, describe) for o, w in zip(out, want)]
    return _checked(out, want, node, describe)


def _checked(out, want, node, describe):
    """The pairs (or real tensor) of a result, in the dtype the complex op
    makes; a shape other than the op's is a bug of its pair form."""
    t = out.t if isinstance(out, Pair) else out
    shape = list(want.shape) + ([2] if want.is_complex() else [])
    if list(t.shape) != shape:
        raise CaptureError("internal error: the real-pair form of %s in %s makes shape %s, "
                           "not %s" % (node.target, describe, list(t.shape), shape))
    dtype = REAL_OF[want.dtype] if want.is_complex() else want.dtype
    return t if t.dtype == dtype else t.to(dtype)
