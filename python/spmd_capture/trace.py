"""Load a model factory and trace its whole training step, op by op, with the
FQN of the module that executed each op.

The step (forward, loss, `torch.autograd.grad`, optimizer update) is traced in
two stages, as AOT autograd does: `make_fx(step)` records the forward and
autograd's backward ops (with views and in-place updates), then
`make_fx(functionalize(...), decomposition_table=...)` replays that graph into
a functional one (in-place updates become new values; views stay views) in
the Core ATen opset: PyTorch's Core ATen decomposition table, less the
composite ops kept whole (KEPT_WHOLE and scaled-dot-product attention).
Functionalization cannot run inside the autograd trace (torch.func's
transforms reject requires_grad_ on their inputs), hence the two stages.

Module FQNs are recorded while tracing: forward ops get the innermost module
whose `forward` is running (global module hooks); every autograd node created
in the forward is tagged with that module (a TorchFunctionMode walks the new
nodes after each torch function), and a pre-hook on the node sets the module
again when the engine runs it, so backward ops carry the FQN of the forward op
they differentiate. Optimizer ops get the module that owns the parameter.
"""
import ast
import collections
import contextlib
import dataclasses
import functools
import importlib.util
import itertools
import math
import os
import re
import sys
import traceback
import warnings
from typing import List, Optional

import torch
import torch.nn as nn
from torch._decomp import core_aten_decompositions
from torch.func import functionalize
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import make_fx
from torch.nn.utils.stateless import _reparametrize_module
from torch.overrides import TorchFunctionMode

from . import CaptureError
from . import complex as complex_pairs

aten = torch.ops.aten

# Composite ops kept whole instead of decomposed to the Core ATen opset
# (docs/capture.md, "Core ATen and the ops kept whole"). Each is one op with
# one sharding rule and one kernel; decomposed, it is a chain of reductions,
# indexing and pointwise ops whose sharding the propagation would have to
# rediscover and whose intermediates the runtime would have to hold.
KEPT_WHOLE = {
    # The backward ops of the core forward ops native_layer_norm, _softmax
    # and embedding, and the loss: fused kernels of the dialect.
    "native_layer_norm_backward", "_softmax_backward_data",
    "embedding_dense_backward",
    "nll_loss_forward", "nll_loss_backward",
    # Pointwise backward ops: one pass over memory instead of several.
    "threshold_backward", "gelu_backward", "silu_backward", "tanh_backward",
    "sigmoid_backward", "native_dropout_backward",
    # SiLU (Llama's SwiGLU activation): one pointwise op, as gelu (which is
    # core) is; decomposed, x * sigmoid(x).
    "silu",
    # One pass over memory, and no masks built from comparisons: Adam's
    # lerp (ATen's two-sided formula), the causal mask's triu. Adam's
    # addcmul/addcdiv also keep its gradient in one op linear in it, so the
    # gradient's Partial is reduce-scattered once; decomposed, grad * grad
    # needs it all-reduced besides (FSDP: +1 collective per parameter).
    "lerp", "triu", "addcmul", "addcdiv",
    # Dropout's mask, bernoulli_ on empty_like(x), is captured as
    # aten.bernoulli.p of x: sharded like x. Decomposed, its shape would come
    # from a factory that no sharding reaches.
    "empty_like",
}


def kept_whole(op):
    """Whether `op` (an OpOverload) stays one op. Scaled-dot-product attention
    (whichever fused kernel ATen picks: `_scaled_dot_product_flash_attention_for_cpu`,
    `_efficient_`, `_cudnn_`... and their backward ops) keeps its heads
    shardable as one op and lets the GPU backend run a fused kernel."""
    name = op._schema.name.split("::")[1]
    return name in KEPT_WHOLE or (name.startswith("_scaled_dot_product_") and
                                  "attention" in name)


# Core ATen ops that spmd writes as others, with PyTorch's own
# decompositions (torch._decomp): repeat as unsqueeze + expand + a copy
# (views and copies, sharded as such), index_select as index.Tensor, and
# log-softmax (forward: x - amax - log(sum(exp(x - amax))); backward:
# g - exp(out) * sum(g)) as reductions and pointwise ops, so that logits
# sharded on the vocabulary (a colwise LM head) stay sharded through the
# loss: the max and the sum of exponentials reduce over the shards, as
# DTensor's loss_parallel, instead of the logits being gathered.
DECOMPOSED_BEYOND_CORE = ("repeat.default", "index_select.default",
                          "_log_softmax.default", "_log_softmax_backward_data.default",
                          "native_group_norm.default", "upsample_bilinear2d.default",
                          "leaky_relu.default", "elu.default",
                          "upsample_bicubic2d.default", "upsample_trilinear3d.default",
                          "max_pool3d_with_indices.default")


def _standardized(x, dims, eps):
    """x standardized over `dims` by its biased variance, two-pass as ATen's
    CPU batch norm: (out, mean, sum of squared deviations, invstd, n), the
    statistics kept as size-1 dims. Sums, so that statistics over sharded
    dims are Partial sums."""
    n = math.prod(x.shape[d] for d in dims)
    mean = aten.div.Scalar(aten.sum.dim_IntList(x, dims, True), n)
    centered = aten.sub.Tensor(x, mean)
    squares = aten.sum.dim_IntList(aten.mul.Tensor(centered, centered), dims, True)
    invstd = aten.rsqrt.default(aten.add.Scalar(aten.div.Scalar(squares, n), eps))
    return aten.mul.Tensor(centered, invstd), mean, squares, invstd, n


def _by_running_stats(x, running_mean, running_var, eps):
    """x [N, C, ...] normalized by per-channel running statistics [C]
    (a normalization in eval mode)."""
    per_channel = [1, x.shape[1]] + [1] * (x.dim() - 2)
    invstd = aten.rsqrt.default(aten.add.Scalar(running_var, eps))
    return aten.mul.Tensor(aten.sub.Tensor(x, aten.view.default(running_mean, per_channel)),
                           aten.view.default(invstd, per_channel))


def _per_channel_affine(out, weight, bias):
    """out [N, C, ...] times weight [C] plus bias [C] (either None: left
    out), as a normalization's affine step."""
    per_channel = [1, out.shape[1]] + [1] * (out.dim() - 2)
    if weight is not None:
        out = aten.mul.Tensor(out, aten.view.default(weight, per_channel))
    if bias is not None:
        out = aten.add.Tensor(out, aten.view.default(bias, per_channel))
    return out


def _batch_norm(input, weight, bias, running_mean, running_var, training,
                momentum, eps):
    """native_batch_norm as its reductions and pointwise ops, so that the
    statistics of a batch sharded over ranks are sums over the shards
    (Partial, all-reduced): every rank normalizes with the statistics of the
    whole batch, exactly the single-device step, uneven batches included
    (DDP without SyncBatchNorm uses each rank's own). Training mode: the
    biased variance normalizes, the unbiased one (n - 1) updates
    running_var, as ATen's batch_norm_cpu_update_stats. Returns (output,
    save_mean, save_invstd), the latter two [C] (empty in eval mode), which
    PyTorch's native_batch_norm_backward decomposition reads."""
    dims = [0] + list(range(2, input.dim()))
    # A bf16 input with fp32 parameters (mixed precision) computes in fp32
    # and returns the input's dtype, as ATen's mixed-type batch norm.
    dtype = input.dtype
    if weight is not None and weight.dtype != dtype:
        input = aten._to_copy.default(input, dtype=weight.dtype)
    if training:
        out, mean, squares, invstd, n = _standardized(input, dims, eps)
        save_mean = aten.view.default(mean, [input.shape[1]])
        save_invstd = aten.view.default(invstd, [input.shape[1]])
        if running_mean is not None:
            unbiased = aten.div.Scalar(squares, n - 1)
            for stat, batch in ((running_mean, save_mean),
                                (running_var, aten.view.default(unbiased, [input.shape[1]]))):
                stat.copy_(aten.add.Tensor(aten.mul.Scalar(batch, momentum),
                                           aten.mul.Scalar(stat, 1 - momentum)))
    else:
        out = _by_running_stats(input, running_mean, running_var, eps)
        save_mean = save_invstd = aten.full.default([0], 0.0, dtype=input.dtype)
    out = _per_channel_affine(out, weight, bias)
    if out.dtype != dtype:
        out = aten._to_copy.default(out, dtype=dtype)
    return out, save_mean, save_invstd


def _var_mean(self, dim=None, *, correction=None, keepdim=False):
    """var_mean.correction as sums, two-pass as ATen's (the mean, then the
    squared deviations from it), divided by n - correction (1 when not
    given; none below 0), so that a variance over sharded dims sums over
    the shards; half-precision inputs accumulate in float32 and return
    their dtype, as ATen's opmath. GroupNorm's decomposition computes its
    statistics so."""
    dims = list(range(self.dim())) if not dim else [d % max(self.dim(), 1) for d in dim]
    n = math.prod(self.shape[d] for d in dims)
    correction = 1 if correction is None else correction
    dtype = self.dtype
    if dtype in (torch.float16, torch.bfloat16):
        self = aten._to_copy.default(self, dtype=torch.float32)
    mean = aten.div.Scalar(aten.sum.dim_IntList(self, dims, True), n)
    centered = aten.sub.Tensor(self, mean)
    var = aten.div.Scalar(aten.sum.dim_IntList(aten.mul.Tensor(centered, centered), dims, keepdim),
                          max(n - correction, 0))
    if not keepdim:
        mean = aten.squeeze.dims(mean, dims)
    if dtype != self.dtype:
        var, mean = (aten._to_copy.default(t, dtype=dtype) for t in (var, mean))
    return var, mean


def _var(self, dim=None, *, correction=None, keepdim=False):
    """var.correction: _var_mean's variance."""
    return _var_mean(self, dim, correction=correction, keepdim=keepdim)[0]


def _per_spatial_dim(input, *lists):
    """A convolution's window lists with one entry per spatial dim: ATen
    repeats a single entry (`nn.Conv2d(padding="valid")` gives [0])."""
    spatial = input.dim() - 2
    return [list(l) * spatial if len(l) == 1 else list(l) for l in lists]


def _convolution(input, weight, bias, stride, padding, dilation, transposed,
                 output_padding, groups):
    """convolution with its window lists spelled per spatial dim; a
    transposed one as _transposed_convolution."""
    lists = _per_spatial_dim(input, stride, padding, dilation, output_padding)
    if transposed:
        return _transposed_convolution(input, weight, bias, *lists, groups)
    if lists == [list(stride), list(padding), list(dilation), list(output_padding)]:
        return NotImplemented  # recorded as it is
    return aten.convolution.default(input, weight, bias, *lists[:3], transposed, lists[3],
                                    groups)


def _transposed_convolution(input, weight, bias, stride, padding, dilation,
                            output_padding, groups):
    """A transposed convolution (`nn.ConvTranspose{1,2,3}d`: input [N, C,
    *S], weight [C, O/g, *K]) as the convolution it is the adjoint of, run
    forward: the input with stride - 1 zeros between its elements along each
    spatial dim, padded by dilation * (K - 1) - padding on both sides
    (output_padding more after; a negative amount crops), convolved at
    stride 1 with the kernel flipped and its channel dims swapped per group
    ([O, C/g, *K]). Every op of it has a sharding rule (batch and channels
    shard through it as through a convolution); a stride above 1 convolves
    stride^d times as many positions as the input has, most of them zeros."""
    spatial = input.dim() - 2
    x = input
    for d in range(spatial):
        if stride[d] > 1:
            # [.., S, ..] -> [.., S, stride, ..] zero after each element -> [.., S * stride, ..]
            dim = 2 + d
            x = aten.unsqueeze.default(x, dim + 1)
            pad = [0, 0] * (x.dim() - dim - 2) + [0, stride[d] - 1]
            x = aten.constant_pad_nd.default(x, pad, 0.0)
            shape = list(x.shape)
            x = aten.view.default(x, shape[:dim] + [shape[dim] * stride[d]] + shape[dim + 2:])
    pad = []
    for d in reversed(range(spatial)):
        reach = dilation[d] * (weight.shape[2 + d] - 1) - padding[d]
        # The stuffing left stride - 1 zeros after the last element.
        pad += [reach, reach + output_padding[d] - (stride[d] - 1)]
    if any(pad):
        x = aten.constant_pad_nd.default(x, pad, 0.0)
    channels, per_group = weight.shape[0], weight.shape[1]
    kernel = list(weight.shape[2:])
    w = aten.flip.default(weight, list(range(2, weight.dim())))
    w = aten.view.default(w, [groups, channels // groups, per_group] + kernel)
    w = aten.transpose.int(w, 1, 2)
    w = aten.reshape.default(w, [groups * per_group, channels // groups] + kernel)
    return aten.convolution.default(x, w, bias, [1] * spatial, [0] * spatial, dilation, False,
                                    [0] * spatial, groups)


def _max_dim(self, dim, keepdim=False):
    """max.dim as amax and the first position that holds it (ATen's CPU
    tie rule; a NaN is the maximum and its first position the index),
    found as the largest of the negated positions: reductions that shard
    (a Partial max over the shards), where ATen's argmax would need the
    whole dim."""
    if self.dtype in (torch.bool, torch.uint8):
        return NotImplemented
    values = aten.amax.default(self, [dim], True)
    size = self.shape[dim]
    shape = [1] * self.dim()
    shape[dim] = size
    positions = aten.view.default(aten.arange.default(size, dtype=torch.int64), shape)
    hit = aten.bitwise_or.Tensor(aten.eq.Tensor(self, values), aten.ne.Tensor(self, self))
    negated = aten.where.self(hit, aten.neg.default(positions),
                              aten.scalar_tensor.default(-size, dtype=torch.int64))
    indices = aten.neg.default(aten.amax.default(negated, [dim], True))
    if not keepdim:
        values, indices = (aten.squeeze.dims(t, [dim]) for t in (values, indices))
    return values, indices


def _min_dim(self, dim, keepdim=False):
    """min.dim as _max_dim of the negated values."""
    if self.dtype in (torch.bool, torch.uint8):
        return NotImplemented
    values, indices = _max_dim(aten.neg.default(self), dim, keepdim)
    return aten.neg.default(values), indices


def _argmax(self, dim=None, keepdim=False):
    """argmax as _max_dim's indices; without `dim`, of the flattened tensor."""
    if dim is not None:
        found = _max_dim(self, dim, keepdim)
        return found if found is NotImplemented else found[1]
    found = _max_dim(aten.reshape.default(self, [-1]), 0, False)
    if found is NotImplemented or not keepdim:
        return found if found is NotImplemented else found[1]
    return aten.reshape.default(found[1], [1] * self.dim())


def _argmin(self, dim=None, keepdim=False):
    """argmin as argmax of the negated values."""
    if self.dtype in (torch.bool, torch.uint8):
        return NotImplemented
    return _argmax(aten.neg.default(self), dim, keepdim)


def _cat(tensors, dim=0):
    """cat without the 1-D empty tensors torch.cat skips next to tensors of
    other ranks (a key/value cache that starts as torch.tensor([]): the
    dialect's cat takes operands of one rank)."""
    kept = [t for t in tensors if not (t.dim() == 1 and t.shape[0] == 0)]
    if len(kept) == len(tensors) or not kept:
        return NotImplemented
    return aten.cat.default(kept, dim)


def _stack(tensors, dim=0):
    """stack as the cat of its tensors unsqueezed at `dim`. torch._refs.stack
    concatenates along an existing dim and views the result: a dim sharded
    there (stacking batch-sharded tensors at 0) then interleaves the ranks'
    pieces, local only when the mesh divides the dim; the new dim of size
    one keeps each tensor's sharding in place, uneven too."""
    dim %= tensors[0].dim() + 1
    return aten.cat.default([aten.unsqueeze.default(t, dim) for t in tensors], dim)


def _mean(self, dtype=None):
    """The mean of every element, as mean.dim over every dim."""
    return _mean_dim(self, list(range(self.dim())), False, dtype=dtype)


def _mean_dim(self, dim, keepdim=False, dtype=None):
    """mean.dim as ATen's CPU kernel computes it: the sum over `dim` (every
    dim when empty), divided by the number of elements summed; half
    precision sums and divides in float32 and casts back. A mean over a
    sharded dim is then a Partial(sum) of the shards' sums over the global
    count, which uneven shards allow (a Partial(avg) of their means needs
    even ones: a per-element loss's mean over a batch the mesh does not
    divide was gathered)."""
    dims = [d % max(self.dim(), 1) for d in dim] if dim else list(range(self.dim()))
    out_dtype = dtype or self.dtype
    sum_dtype = torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype
    total = aten.sum.dim_IntList(self, dims, keepdim,
                                 dtype=None if sum_dtype == self.dtype else sum_dtype)
    out = aten.div.Scalar(total, math.prod(self.shape[d] for d in dims))
    return out if out.dtype == out_dtype else aten._to_copy.default(out, dtype=out_dtype)


def _source_positions(in_size, out_size, align_corners, scale, dtype):
    """Along one dim of an interpolation: each output position's source
    position in the input, in `dtype`, as PyTorch's decompositions compute
    it (torch._decomp's _compute_scale and _compute_source_index)."""
    from torch._decomp.decompositions import _compute_scale, _compute_source_index
    factor = _compute_scale(in_size, out_size, align_corners, scale)
    i = aten._to_copy.default(aten.arange.default(out_size, dtype=torch.int64), dtype=dtype)
    return _compute_source_index(factor, i, align_corners)


def _bilinear_taps(in_size, out_size, align_corners, scale, dtype):
    """Along one dim of a linear interpolation: each output position's two
    source positions and the second one's weight, as PyTorch's
    decomposition (torch._decomp's _upsample_linear) computes them."""
    source = aten.clamp.default(
        _source_positions(in_size, out_size, align_corners, scale, dtype), 0.0)
    low = aten._to_copy.default(source, dtype=torch.int64)
    high = aten.clamp.default(aten.add.Scalar(low, 1), None, in_size - 1)
    weight = aten.clamp.default(aten.sub.Tensor(source, low), 0.0, 1.0)
    return low, high, weight


def _opmath(dtype):
    """The dtype ATen computes a half-precision op in."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def _scatter_taps(grad_output, input_size, taps):
    """The backward of an interpolation that reads, along each spatial dim
    d, taps[d] = [(positions, weights)...] (each [out_d]) and sums their
    product: each output position's gradient, times each combination of
    taps' weights, summed into the input where the combination reads it
    (index_put with accumulate, a row scatter that shards on the batch and
    the channels), in float32 for half inputs."""
    dtype = grad_output.dtype
    opmath = _opmath(dtype)
    grad = aten._to_copy.default(grad_output, dtype=opmath) if opmath != dtype else grad_output
    spatial = len(taps)
    shaped = []
    for d, dim_taps in enumerate(taps):
        shape = [1] * spatial
        shape[d] = -1
        shaped.append([tuple(aten.view.default(t, shape) for t in tap) for tap in dim_taps])
    result = aten.full.default(list(input_size), 0.0, dtype=opmath)
    for combination in itertools.product(*shaped):
        weight = functools.reduce(aten.mul.Tensor, [w for _, w in combination])
        result = aten.index_put.default(result, [None, None] + [p for p, _ in combination],
                                        aten.mul.Tensor(grad, weight), True)
    return aten._to_copy.default(result, dtype=dtype) if opmath != dtype else result


def _upsample_linear_backward(grad_output, output_size, input_size, align_corners, *scales):
    """upsample_linear1d's, upsample_bilinear2d's and upsample_trilinear3d's
    backward: the two taps along each dim (_bilinear_taps) scattered."""
    scales = list(scales) + [None] * (len(output_size) - len(scales))
    taps = []
    for size, out, scale in zip(input_size[2:], output_size, scales):
        low, high, weight = _bilinear_taps(size, out, align_corners, scale,
                                           _opmath(grad_output.dtype))
        taps.append([(low, aten.rsub.Scalar(weight, 1.0)), (high, weight)])
    return _scatter_taps(grad_output, input_size, taps)


def _upsample_bicubic2d_backward(grad_output, output_size, input_size, align_corners,
                                 scales_h=None, scales_w=None):
    """upsample_bicubic2d's backward: the 4 taps along each dim (the border
    clamped) and their cubic weights, those of PyTorch's decomposition of
    the forward (torch._decomp's upsample_bicubic2d_default), scattered."""
    from torch._decomp.decompositions import _upsample_get_cubic_coefficients
    opmath = _opmath(grad_output.dtype)
    taps = []
    for size, out, scale in zip(input_size[2:], output_size, (scales_h, scales_w)):
        source = _source_positions(size, out, align_corners, scale, opmath)
        first = aten.floor.default(source)
        weights = _upsample_get_cubic_coefficients(
            aten.clamp.default(aten.sub.Tensor(source, first), 0.0, 1.0))
        first = aten._to_copy.default(first, dtype=torch.int64)
        taps.append([(aten.clamp.default(aten.add.Tensor(first, k - 1), 0, size - 1), w)
                     for k, w in enumerate(weights)])
    return _scatter_taps(grad_output, input_size, taps)


def _upsample_nearest_backward(exact):
    """upsample_nearest{1,2,3}d's backward (`exact`: nearest-exact's): each
    output position's gradient summed into the input position it copies
    (index_put with accumulate, as bilinear's: a row scatter that shards
    on the batch and the channels). The positions are those PyTorch's
    decomposition of the forward copies from (torch._decomp's
    _compute_upsample_nearest_indices)."""
    def backward(grad_output, output_size, input_size, *scales):
        from torch._decomp.decompositions import _compute_upsample_nearest_indices
        result = aten.full.default(list(input_size), 0.0, dtype=grad_output.dtype)
        scales = list(scales) + [None] * (len(output_size) - len(scales))
        sources = _compute_upsample_nearest_indices(result, output_size, scales, exact)
        return aten.index_put.default(result, [None, None] + sources, grad_output, True)
    return backward


def _copy(self, src, non_blocking=False):
    """The functional copy_(self, src) (a slice assignment; affine_grid's
    backward fills its base grid with `select(...).copy_(linspace)`): src
    in self's dtype, broadcast to self's shape. A src of self's shape and
    dtype is recorded as it is (the emitter passes src through)."""
    if src.shape == self.shape and src.dtype == self.dtype:
        return NotImplemented
    if src.dtype != self.dtype:
        src = aten._to_copy.default(src, dtype=self.dtype)
    if src.shape != self.shape:
        src = aten.clone.default(aten.expand.default(src, list(self.shape)))
    return src


def _grid_padding(u, size, padding_mode, align_corners):
    """A grid sampler's padding of source positions `u` along a dim of
    `size` (0 zeros: as they are, 1 border: clipped to [0, size - 1], 2
    reflection: reflected at the borders, then clipped) and its derivative
    by `u`, as ATen's clip_coordinates_set_grad and
    reflect_coordinates_set_grad (GridSampler.h): 0 where clipped (the
    borders included), -1 where reflected an odd number of times."""
    if padding_mode == 0:
        return u, None
    if padding_mode == 2:
        twice_low, twice_high = (0, 2 * (size - 1)) if align_corners else (-1, 2 * size - 1)
        if twice_low == twice_high:
            zeros = aten.mul.Scalar(u, 0.0)
            return zeros, zeros
        low, span = twice_low / 2, (twice_high - twice_low) / 2
        shifted = aten.sub.Scalar(u, low)
        sign = aten.where.self(aten.lt.Scalar(shifted, 0.0), aten.full_like.default(u, -1.0),
                               aten.full_like.default(u, 1.0))
        distance = aten.abs.default(shifted)
        extra = aten.fmod.Tensor(distance, aten.full_like.default(u, span))
        odd = aten.ne.Scalar(aten.fmod.Tensor(aten.floor.default(aten.div.Scalar(distance, span)),
                                              aten.full_like.default(u, 2.0)), 0.0)
        u = aten.where.self(odd, aten.rsub.Scalar(extra, span + low), aten.add.Scalar(extra, low))
        slope = aten.where.self(odd, aten.neg.default(sign), sign)
    else:
        slope = aten.full_like.default(u, 1.0)
    inside = aten.logical_and.default(aten.gt.Scalar(u, 0.0), aten.lt.Scalar(u, size - 1.0))
    return (aten.clamp.default(u, 0.0, size - 1.0),
            aten.mul.Tensor(slope, aten._to_copy.default(inside, dtype=u.dtype)))


def _cubic_weights(t):
    """The 4 cubic convolution weights at offset t of the first tap past the
    second (A = -0.75, ATen's get_cubic_upsample_coefficients), tap by tap:
    torch._decomp's _upsample_get_cubic_coefficients stacks the taps on a
    new leading dim on the CPU, which a batch-sharded t cannot shard on."""
    from torch._decomp.decompositions import (_upsample_cubic_convolution1,
                                              _upsample_cubic_convolution2)
    a = -0.75
    return (_upsample_cubic_convolution2(aten.add.Scalar(t, 1.0), a),
            _upsample_cubic_convolution1(t, a),
            _upsample_cubic_convolution1(aten.rsub.Scalar(t, 1.0), a),
            _upsample_cubic_convolution2(aten.rsub.Scalar(t, 2.0), a))


def _cubic_slopes(t):
    """The derivatives by t of _cubic_weights, as ATen's
    get_cubic_coefficients_grad."""
    a = -0.75

    def outer(x):  # d/dx of ((A x - 5A) x + 8A) x - 4A
        return aten.add.Scalar(aten.mul.Tensor(aten.add.Scalar(aten.mul.Scalar(x, 3 * a),
                                                               -10 * a), x), 8 * a)

    def inner(x):  # d/dx of ((A + 2) x - (A + 3)) x^2 + 1
        return aten.mul.Tensor(aten.add.Scalar(aten.mul.Scalar(x, 3 * (a + 2)),
                                               -2 * (a + 3)), x)

    return (outer(aten.add.Scalar(t, 1.0)), inner(t),
            aten.neg.default(inner(aten.rsub.Scalar(t, 1.0))),
            aten.neg.default(outer(aten.rsub.Scalar(t, 2.0))))


def _grid_sample_taps(grid, sizes, interpolation_mode, padding_mode, align_corners):
    """The reads of grid_sampler_2d/3d along each spatial dim of the input
    (`sizes`: [H, W] or [D, H, W]; the grid's last dim holds x, y[, z], the
    reverse order), as ATen's CPU kernels (GridSampler.h,
    GridSamplerKernel.cpp): per dim, the taps [(position, weight,
    slope)...], each [N, *out]: an int64 position, its weight (None: 1)
    and the weight's derivative by the grid's coordinate (None: 0).
    Bilinear: the two positions around the padded source position;
    nearest: the nearest (ties to even); bicubic: the 4 around the
    unpadded source position, each padded as an integer position."""
    spatial = len(sizes)
    dims = []
    for d, size in enumerate(sizes):
        coordinate = aten.select.int(grid, -1, spatial - 1 - d)
        scale = (size - 1) / 2 if align_corners else size / 2
        u = aten.add.Scalar(aten.mul.Scalar(coordinate, scale), (size - 1) / 2)
        if interpolation_mode == 2:  # bicubic: the taps are padded, not u
            first = aten.floor.default(u)
            t = aten.sub.Tensor(u, first)
            weights = _cubic_weights(t)
            slopes = [aten.mul.Scalar(s, scale) for s in _cubic_slopes(t)]
            positions = [_grid_padding(aten.add.Scalar(first, k - 1.0), size, padding_mode,
                                       align_corners)[0] for k in range(4)]
            dims.append(list(zip(positions, weights, slopes)))
            continue
        u, slope = _grid_padding(u, size, padding_mode, align_corners)
        slope = aten.mul.Scalar(slope, scale) if slope is not None else \
            aten.full_like.default(u, scale)
        if interpolation_mode == 1:
            dims.append([(aten.round.default(u), None, None)])
            continue
        low = aten.floor.default(u)
        high = aten.add.Scalar(low, 1.0)
        dims.append([(low, aten.sub.Tensor(high, u), aten.neg.default(slope)),
                     (high, aten.sub.Tensor(u, low), slope)])
    return [[(aten._to_copy.default(p, dtype=torch.int64), w, s) for p, w, s in taps]
            for taps in dims]


def _grid_sample_reads(input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler_2d/3d's reads of `input` [N, C, *sizes] at `grid` [N,
    *out, spatial]: per combination of the dims' taps, the flat position
    in `input`'s spatial dims (0 where outside them) expanded to [N, C, P]
    (P: the outputs), its weight [N, 1, P] (0 outside: zeros padding, or
    bilinear's second tap past the border) and per dim the weight's
    derivative by that dim's coordinate ([N, P]; None: 0)."""
    n, c, sizes = input.shape[0], input.shape[1], list(input.shape[2:])
    points = math.prod(grid.shape[1:-1])
    taps = _grid_sample_taps(grid, sizes, interpolation_mode, padding_mode, align_corners)
    strides = [math.prod(sizes[d + 1:]) for d in range(len(sizes))]
    reads = []
    for combination in itertools.product(*taps):
        inside = functools.reduce(aten.logical_and.default, [
            aten.logical_and.default(aten.ge.Scalar(p, 0), aten.lt.Scalar(p, size))
            for (p, _, _), size in zip(combination, sizes)])
        flat = functools.reduce(aten.add.Tensor, [aten.mul.Scalar(p, stride) for (p, _, _), stride
                                                  in zip(combination, strides)])
        flat = aten.where.self(inside, flat, aten.full_like.default(flat, 0))
        mask = aten._to_copy.default(inside, dtype=grid.dtype)
        weights = [w for _, w, _ in combination]
        weight = functools.reduce(aten.mul.Tensor, [w for w in weights if w is not None], mask)
        slopes = []
        for d, (_, _, slope) in enumerate(combination):
            if slope is None:
                slopes.append(None)
                continue
            others = [w for e, w in enumerate(weights) if e != d and w is not None]
            slopes.append(aten.view.default(functools.reduce(aten.mul.Tensor, others, aten.mul.Tensor(
                slope, mask)), [n, points]))
        position = aten.expand.default(aten.view.default(flat, [n, 1, points]), [n, c, points])
        reads.append((position, aten.view.default(weight, [n, 1, points]), slopes))
    return reads


def _grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sampler_2d and grid_sampler_3d (`F.grid_sample`: spatial
    transformers' resampling): per combination of taps (_grid_sample_reads)
    a `gather` along `input`'s flattened spatial dims, weighted and summed.
    The gathers shard on the batch and the channels."""
    n, c = input.shape[:2]
    flat = aten.view.default(input, [n, c, math.prod(input.shape[2:])])
    out = functools.reduce(aten.add.Tensor, [
        aten.mul.Tensor(aten.gather.default(flat, 2, position), weight)
        for position, weight, _ in _grid_sample_reads(input, grid, interpolation_mode,
                                                      padding_mode, align_corners)])
    return aten.view.default(out, [n, c] + list(grid.shape[1:-1]))


def _grid_sampler_backward(grad_output, input, grid, interpolation_mode, padding_mode,
                           align_corners, output_mask):
    """grid_sampler_2d_backward and grid_sampler_3d_backward: the input's
    gradient is one `scatter_add` of each read's weighted grad_output into
    the flattened spatial dims (the gathers' backward); each grid
    coordinate's is the sum over the channels and reads of grad_output
    times the value read times the weight's derivative by it (0 for
    nearest), as ATen's CPU backward kernels."""
    n, c = input.shape[:2]
    points = math.prod(grid.shape[1:-1])
    grad = aten.view.default(grad_output, [n, c, points])
    flat = aten.view.default(input, [n, c, math.prod(input.shape[2:])])
    reads = _grid_sample_reads(input, grid, interpolation_mode, padding_mode, align_corners)
    grad_input = grad_grid = None
    if output_mask[0]:
        grad_input = aten.view.default(aten.scatter_add.default(
            aten.full.default(list(flat.shape), 0.0, dtype=input.dtype), 2,
            aten.cat.default([position for position, _, _ in reads], 2),
            aten.cat.default([aten.mul.Tensor(grad, weight) for _, weight, _ in reads], 2)),
            list(input.shape))
    if output_mask[1]:
        spatial = grid.shape[-1]
        if interpolation_mode == 1:
            grad_grid = aten.full.default(list(grid.shape), 0.0, dtype=grid.dtype)
        else:
            per_dim = [None] * spatial
            for position, _, slopes in reads:
                value = aten.sum.dim_IntList(
                    aten.mul.Tensor(grad, aten.gather.default(flat, 2, position)), [1])
                for d, slope in enumerate(slopes):
                    term = aten.mul.Tensor(value, slope)
                    per_dim[d] = term if per_dim[d] is None else aten.add.Tensor(per_dim[d], term)
            grad_grid = aten.view.default(
                aten.cat.default([aten.unsqueeze.default(per_dim[spatial - 1 - k], -1)
                                  for k in range(spatial)], -1), list(grid.shape))
    return grad_input, grad_grid


def _hardtanh(self, min_val=-1.0, max_val=1.0):
    """hardtanh with integer bounds (`F.relu6`) as hardtanh with float
    ones, the dialect's attributes."""
    if isinstance(min_val, float) and isinstance(max_val, float):
        return NotImplemented
    return aten.hardtanh.default(self, float(min_val), float(max_val))


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
                          dilation, transposed, output_padding, groups, output_mask):
    """convolution_backward without its bias gradient, which is the sum of
    grad_output over every dim but the channels: one reduction with its own
    sharding (the dialect's convolution_backward computes the input and
    weight gradients only), and with its window lists per spatial dim."""
    lists = _per_spatial_dim(input, stride, padding, dilation, output_padding)
    if transposed:
        return _transposed_convolution_backward(grad_output, input, weight, *lists, groups,
                                                output_mask)
    spelled = lists == [list(stride), list(padding), list(dilation), list(output_padding)]
    if spelled and not output_mask[2]:
        return NotImplemented  # recorded as it is
    stride, padding, dilation, output_padding = lists
    if not output_mask[2]:
        return aten.convolution_backward.default(
            grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
            output_padding, groups, output_mask)
    grad_input = grad_weight = None
    if output_mask[0] or output_mask[1]:
        grad_input, grad_weight, _ = aten.convolution_backward.default(
            grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
            output_padding, groups, [output_mask[0], output_mask[1], False])
    dims = [0] + list(range(2, grad_output.dim()))
    return grad_input, grad_weight, aten.sum.dim_IntList(grad_output, dims)


def _transposed_convolution_backward(grad_output, input, weight, stride, padding, dilation,
                                     output_padding, groups, output_mask):
    """A transposed convolution's gradients from the convolution `weight`
    is the transpose of: the input's is that convolution of grad_output,
    the weight's that convolution's weight gradient with grad_output as its
    input and the transposed convolution's input as its grad_output, the
    bias's the sum of grad_output over every dim but the channels. No
    zeros are stuffed: both run at the transposed convolution's stride.
    An `output_padding` of at least the stride (allowed below the
    dilation) gives that convolution `output_padding // stride` more
    positions per dim than the input has, which no input position reads:
    the input's gradient drops them, and the weight's pads the input with
    zeros there (`constant_pad_nd`)."""
    spatial = input.dim() - 2
    zeros = [0] * spatial
    extra = []
    for o, st in reversed(list(zip(output_padding, stride))):
        extra += [0, o // st]
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        grad_input = aten.convolution.default(grad_output, weight, None, stride, padding,
                                              dilation, False, zeros, groups)
        if any(extra):
            grad_input = aten.constant_pad_nd.default(grad_input, [-e for e in extra])
    if output_mask[1]:
        padded = aten.constant_pad_nd.default(input, extra) if any(extra) else input
        _, grad_weight, _ = aten.convolution_backward.default(
            padded, grad_output, weight, None, stride, padding, dilation, False, zeros, groups,
            [False, True, False])
    if output_mask[2]:
        grad_bias = aten.sum.dim_IntList(grad_output, [0] + list(range(2, grad_output.dim())))
    return grad_input, grad_weight, grad_bias


def _replication_pad_backward(grad_output, self, padding):
    """replication_pad{1,2,3}d's backward: each output position's gradient
    summed into the input position it copies, the nearest inside (index_put
    with accumulate, as the nearest upsampling's backward)."""
    spatial = len(padding) // 2
    result = aten.full.default(list(self.shape), 0.0, dtype=grad_output.dtype)
    sources = []
    for k, d in enumerate(range(self.dim() - spatial, self.dim())):
        before = padding[2 * (self.dim() - 1 - d)]
        positions = aten.arange.start_step(-before, grad_output.shape[d] - before, 1,
                                           dtype=torch.int64)
        positions = aten.clamp.default(positions, 0, self.shape[d] - 1)
        shape = [1] * spatial
        shape[k] = grad_output.shape[d]
        sources.append(aten.view.default(positions, shape))
    leading = [None] * (self.dim() - spatial)
    return aten.index_put.default(result, leading + sources, grad_output, True)


def _max_pool_backward_by_indices(grad_output, self, indices, spatial):
    """The backward of a max pooling over `spatial` dims that returns its
    indices in the flattened spatial plane (adaptive_max_pool2d's,
    max_pool3d's): each output's gradient added into the input position
    its index names (scatter_add along the flattened plane: it shards on
    the batch and the channels)."""
    lead = list(self.shape[:self.dim() - spatial])
    plane = math.prod(self.shape[len(lead):])
    result = aten.full.default(lead + [plane], 0.0, dtype=grad_output.dtype)
    flat = lead + [-1]
    result = aten.scatter_add.default(result, len(lead), aten.reshape.default(indices, flat),
                                      aten.reshape.default(grad_output, flat))
    return aten.view.default(result, list(self.shape))


def _adaptive_max_pool2d(self, output_size):
    """adaptive_max_pool2d: PyTorch's decomposition where the output is 1x1
    or divides the input; otherwise output position i of a dim of size n
    pooled to m covers [floor(i n / m), ceil((i + 1) n / m)). Each window
    is gathered at L = its dim's longest window positions, those past its
    end clamped to its last (`index.Tensor`, [.., Oh, Lh, Ow, Lw]), then
    `max.dim` over the L_h * L_w taps: the clamped repeats come after the
    position they repeat, so the first maximum is an input position, the
    first in (row, column) order as ATen's kernel picks, and its index in
    the [H * W] plane is (start_h + l_h) * W + start_w + l_w."""
    found = torch._decomp.decomposition_table[aten.adaptive_max_pool2d.default](self,
                                                                                 output_size)
    if found is not NotImplemented:
        return found
    sizes = self.shape[-2:]
    starts, taps, lengths = [], [], []
    for size, out in zip(sizes, output_size):
        i = aten.arange.default(out, dtype=torch.int64)
        start = aten.div.Tensor_mode(aten.mul.Tensor(i, size), out, rounding_mode="floor")
        end = aten.div.Tensor_mode(aten.add.Tensor(aten.mul.Tensor(i, size), size + out - 1),
                                   out, rounding_mode="floor")
        length = max(-(-(k + 1) * size // out) - k * size // out for k in range(out))
        position = aten.add.Tensor(aten.unsqueeze.default(start, 1),
                                   aten.arange.default(length, dtype=torch.int64))
        taps.append(aten.minimum.default(position, aten.sub.Tensor(aten.unsqueeze.default(end, 1),
                                                                    1)))
        starts.append(start)
        lengths.append(length)
    (oh, ow), (lh, lw) = output_size, lengths
    rows = aten.view.default(taps[0], [oh, lh, 1, 1])
    windows = aten.index.Tensor(self, [None] * (self.dim() - 2) + [rows, taps[1]])
    lead = list(self.shape[:-2])
    windows = aten.permute.default(windows, list(range(len(lead))) + [
        len(lead) + k for k in (0, 2, 1, 3)])
    values, tap = _max_dim(aten.reshape.default(windows, lead + [oh, ow, lh * lw]), -1)
    row = aten.add.Tensor(aten.view.default(starts[0], [oh, 1]),
                          aten.div.Tensor_mode(tap, lw, rounding_mode="floor"))
    col = aten.add.Tensor(starts[1], aten.remainder.Scalar(tap, lw))
    return values, aten.add.Tensor(aten.mul.Tensor(row, sizes[1]), col)


def _adaptive_max_pool2d_backward(grad_output, self, indices):
    """adaptive_max_pool2d's backward (_max_pool_backward_by_indices)."""
    return _max_pool_backward_by_indices(grad_output, self, indices, 2)


def _max_pool3d_backward(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode,
                         indices):
    """max_pool3d_with_indices' backward (_max_pool_backward_by_indices)."""
    return _max_pool_backward_by_indices(grad_output, self, indices, 3)


def _planes(x):
    """x [N, C, D, H, W] (or [C, D, H, W]) viewed as [N, C * D, H, W] (or
    [C, D, H, W]): 2-D pooling over (H, W) of every (channel, depth) plane,
    the batch dim kept whole so that its sharding passes through."""
    if x.dim() == 4:
        return x
    return aten.reshape.default(x, [x.shape[0], x.shape[1] * x.shape[2]] + list(x.shape[3:]))


def _depths(x, like):
    """x [N, C * D, H', W'] (from _planes of `like`) viewed as
    [N, C, D, H' * W']: 2-D pooling over (D, 1) pools the depth."""
    lead = list(like.shape[:-3])
    return aten.reshape.default(x, lead + [like.shape[-3], x.shape[-2] * x.shape[-1]])


def _volume(x, like, hw):
    """x [N, C, D', H' * W'] back to [N, C, D', H', W']."""
    return aten.view.default(x, list(like.shape[:-3]) + [x.shape[-2]] + list(hw))


def _by_planes(self, plane_pool, depth_pool):
    """A 3-D pooling whose windows are boxes chosen per dim, as two 2-D
    poolings: `plane_pool` over (H, W) of _planes(self), then `depth_pool`
    over the depth of its result (_depths). A box's average is the product
    of its per-dim averages, and its divisor (with or without the padding,
    ceil_mode's clipped windows, adaptive windows) the product of its
    per-dim extents, so this is ATen's op up to rounding."""
    planes = plane_pool(_planes(self))
    return _volume(depth_pool(_depths(planes, self)), self, planes.shape[-2:])


def _by_planes_backward(grad_output, self, plane_backward, depth_backward):
    """_by_planes' backward: `depth_backward(grad, like)` of the depth
    pooling first, then `plane_backward(grad, like)` of the plane pooling,
    `like` a tensor of the pooling's input shape (the planes' pooled shape
    is only needed as a shape: zeros, which shard as anything)."""
    planes = _planes(self)
    pooled = aten.full.default(list(planes.shape[:-2]) + list(grad_output.shape[-2:]), 0.0,
                               dtype=grad_output.dtype)
    grad = depth_backward(aten.view.default(grad_output, list(grad_output.shape[:-2]) + [-1]),
                          _depths(pooled, self))
    grad = plane_backward(aten.view.default(grad, list(pooled.shape)), planes)
    return aten.view.default(grad, list(self.shape))


def _pool3d_lists(kernel_size, stride, padding):
    """avg_pool3d's kernel_size, stride (its kernel_size when empty) and
    padding with one entry per spatial dim."""
    def three(v):
        v = [v] if isinstance(v, int) else list(v)
        return v * 3 if len(v) == 1 else v
    k = three(kernel_size)
    return k, three(stride) if stride else k, three(padding)


def _avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False,
                count_include_pad=True, divisor_override=None):
    """avg_pool3d as two avg_pool2d (_by_planes): over (H, W), then over the
    depth with kernel (kD, 1). A `divisor_override` d divides the box's sum:
    the planes' sums over d, summed over the depth (divisor 1)."""
    k, st, pad = _pool3d_lists(kernel_size, stride, padding)
    depth_divisor = None if divisor_override is None else 1
    return _by_planes(
        self,
        lambda x: aten.avg_pool2d.default(x, k[1:], st[1:], pad[1:], ceil_mode,
                                          count_include_pad, divisor_override),
        lambda x: aten.avg_pool2d.default(x, [k[0], 1], [st[0], 1], [pad[0], 0], ceil_mode,
                                          count_include_pad, depth_divisor))


def _avg_pool3d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override):
    """avg_pool3d's backward: _avg_pool3d's two avg_pool2d's backward."""
    k, st, pad = _pool3d_lists(kernel_size, stride, padding)
    depth_divisor = None if divisor_override is None else 1
    return _by_planes_backward(
        grad_output, self,
        lambda g, x: aten.avg_pool2d_backward.default(g, x, k[1:], st[1:], pad[1:], ceil_mode,
                                                      count_include_pad, divisor_override),
        lambda g, x: aten.avg_pool2d_backward.default(g, x, [k[0], 1], [st[0], 1], [pad[0], 0],
                                                      ceil_mode, count_include_pad,
                                                      depth_divisor))


def _adaptive_avg_pool3d(self, output_size):
    """_adaptive_avg_pool3d as two _adaptive_avg_pool2d (_by_planes): over
    (H, W), then over the depth (the flattened plane's size kept)."""
    return _by_planes(
        self, lambda x: aten._adaptive_avg_pool2d.default(x, list(output_size[1:])),
        lambda x: aten._adaptive_avg_pool2d.default(x, [output_size[0], x.shape[-1]]))


def _adaptive_avg_pool3d_backward(grad_output, self):
    """_adaptive_avg_pool3d's backward: the two _adaptive_avg_pool2d's
    backward."""
    backward = aten._adaptive_avg_pool2d_backward.default
    return _by_planes_backward(grad_output, self, backward, backward)


def _shrink_backward(grad_output, self, lambd=0.5):
    """hardshrink's and softshrink's backward: 0 where `-lambd <= self <=
    lambd`, else grad_output (ATen's kernels)."""
    inside = aten.bitwise_and.Tensor(aten.ge.Scalar(self, -lambd), aten.le.Scalar(self, lambd))
    return aten.where.self(inside, aten.scalar_tensor.default(0.0, dtype=grad_output.dtype),
                           grad_output)


def _indexed_layout(self, indices):
    """Where advanced indexing puts things (NumPy's rule, as PyTorch):
    returns (dims, order, front), `dims` the indexed dims (a `None` index
    is a slice), `order` the permutation of `self` that brings them first,
    and `front` the position of the indices' broadcast dims in the result:
    the first indexed dim's when the indexed dims are adjacent, else 0."""
    dims = [d for d, i in enumerate(indices) if i is not None]
    order = dims + [d for d in range(self.dim()) if d not in dims]
    adjacent = dims == list(range(dims[0], dims[-1] + 1))
    return dims, order, dims[0] if adjacent else 0


def _batch_to(tensor, batch, front):
    """Moves `batch` leading dims of `tensor` to position `front`."""
    rest = list(range(batch, tensor.dim()))
    return aten.permute.default(tensor, rest[:front] + list(range(batch)) + rest[front:])


def _index(self, indices):
    """index.Tensor with a `None` (a slice) before an indexed dim, as the
    dialect's index of leading dims between permutes: the indexed dims are
    brought to the front, and the indices' broadcast dims moved to where
    NumPy's rule puts them (Falcon's `fused_qkv[..., [-2], :]`)."""
    if all(i is not None for i in indices) or _has_mask(indices):
        return NotImplemented
    dims, order, front = _indexed_layout(self, indices)
    out = aten.index.Tensor(aten.permute.default(self, order), [indices[d] for d in dims])
    batch = out.dim() - (self.dim() - len(dims))
    return _batch_to(out, batch, front)


def _index_put(self, indices, values, accumulate=False):
    """index_put as a scatter of rows: the indexed dims brought to the front
    and flattened into one row index (negative indices wrapped), `values`
    broadcast and flattened into rows of the other dims. With accumulate
    (what index.Tensor's backward writes) the rows of a floating `self` are
    summed into place by embedding_dense_backward, whose sharding and
    kernels serve, and added to `self` (other dtypes: scatter_add); without,
    scatter.src writes them, a repeated index keeping its last row as
    ATen's CPU kernel (`inv[perm] = arange`, a permutation's inverse).
    A boolean mask selects data-dependent positions: only a mask over the
    leading dims with one value (`x[mask] = v`) is written, as `where`."""
    if _has_mask(indices):
        mask = [i for i in indices if i is not None]
        if (accumulate or len(mask) != 1 or indices[0] is None or values.numel() != 1
                or mask[0].dim() > self.dim()):
            return NotImplemented
        mask = mask[0].reshape(list(mask[0].shape) + [1] * (self.dim() - mask[0].dim()))
        return aten.where.self(mask, aten._to_copy.default(values.reshape([]), dtype=self.dtype),
                               self)
    indices = list(indices) + [None] * (self.dim() - len(indices))
    dims, order, front = _indexed_layout(self, indices)
    indexed = [self.shape[d] for d in dims]
    rest = [self.shape[d] for d in order[len(dims):]]
    batch = list(torch.broadcast_shapes(*(indices[d].shape for d in dims)))
    # values broadcast to self[indices]'s shape; its broadcast dims first.
    values = aten.expand.default(values, rest[:front] + batch + rest[front:])
    first = list(range(front, front + len(batch)))
    values = aten.permute.default(values, first + [d for d in range(values.dim())
                                                   if d not in first])
    rows = values.reshape([-1, math.prod(rest)])
    flat = None
    for d, size in zip(dims, indexed):
        index = indices[d]
        index = aten.where.self(aten.lt.Scalar(index, 0), aten.add.Scalar(index, size), index)
        flat = index if flat is None else aten.add.Tensor(aten.mul.Scalar(flat, size), index)
    flat = aten.expand.default(flat, batch).reshape([-1])
    back = [order.index(d) for d in range(self.dim())]
    if accumulate and self.is_floating_point():
        summed = aten.embedding_dense_backward.default(rows, flat, math.prod(indexed), -1, False)
        summed = summed.reshape(indexed + rest)
        return aten.add.Tensor(self, aten.permute.default(summed, back))
    target = aten.permute.default(self, order).reshape([math.prod(indexed), math.prod(rest)])
    where = aten.expand.default(aten.unsqueeze.default(flat, 1), list(rows.shape))
    scatter = aten.scatter_add.default if accumulate else aten.scatter.src
    out = scatter(target, 0, where, rows).reshape(indexed + rest)
    return aten.permute.default(out, back)


def _has_mask(indices):
    """Whether an index is a boolean (or uint8) mask."""
    return any(i is not None and i.dtype in (torch.bool, torch.uint8) for i in indices)


def _cdist_differences(x1, x2):
    """x1 [..., P, M] and x2 [..., R, M] broadcast to their differences
    [..., P, R, M]."""
    return aten.sub.Tensor(aten.unsqueeze.default(x1, -2), aten.unsqueeze.default(x2, -3))


def _cdist_forward(x1, x2, p, compute_mode=None):
    """torch.cdist's direct path (ATen's cdist_impl without matrix products:
    p != 2, or at most 25 rows on each side by default) as the p-norm of
    the broadcast differences over the last dim: the count of nonzero ones
    (p = 0), sum |d| (1), sqrt(sum d^2) (2), max |d| (inf), (sum |d|^p)^(1/p)
    otherwise. Pointwise ops and one reduction, which shard on the batch
    and on either side's rows; [..., P, R, M] is held once."""
    diff = _cdist_differences(x1, x2)
    if p == 0:
        return aten.sum.dim_IntList(aten._to_copy.default(aten.ne.Scalar(diff, 0), dtype=diff.dtype),
                                    [-1])
    if p == 1:
        return aten.sum.dim_IntList(aten.abs.default(diff), [-1])
    if p == 2:
        return aten.sqrt.default(aten.sum.dim_IntList(aten.mul.Tensor(diff, diff), [-1]))
    if math.isinf(p):
        return aten.amax.default(aten.abs.default(diff), [-1])
    return aten.pow.Tensor_Scalar(
        aten.sum.dim_IntList(aten.pow.Tensor_Scalar(aten.abs.default(diff), p), [-1]), 1 / p)


def _cdist_backward(grad, x1, x2, p, cdist):
    """The gradient of _cdist_forward by x1 (autograd asks for x2's with
    the operands swapped and grad and cdist transposed), as ATen's CPU
    kernels (DistanceOpsKernel.cpp): per difference d = x1 - x2 with the
    pair's distance r, sign(d) (p = 1); d / r (2);
    sign(d) |d|^(p-1) / r^(p-1) (p < 2, and 0 where d = 0 when p < 1);
    d |d|^(p-2) / r^(p-1) (other p); sign(d) where |d| = r (inf); 0 for
    p = 0 and wherever r = 0; times the pair's grad, summed over x2's rows."""
    diff = _cdist_differences(x1, x2)
    if p == 0:
        return aten.sum.dim_IntList(aten.mul.Scalar(diff, 0), [-2])
    g, r = aten.unsqueeze.default(grad, -1), aten.unsqueeze.default(cdist, -1)
    if p == 1:
        each = aten.mul.Tensor(aten.sign.default(diff), g)
    elif math.isinf(p):
        each = aten.mul.Tensor(aten.mul.Tensor(aten.sign.default(diff), g),
                               aten._to_copy.default(aten.eq.Tensor(aten.abs.default(diff), r),
                                                     dtype=diff.dtype))
    else:
        if p == 2:
            scaled = diff
        elif p < 2:
            scaled = aten.mul.Tensor(aten.sign.default(diff),
                                     aten.pow.Tensor_Scalar(aten.abs.default(diff), p - 1))
        else:
            scaled = aten.mul.Tensor(diff, aten.pow.Tensor_Scalar(aten.abs.default(diff), p - 2))
        denominator = r if p == 2 else aten.pow.Tensor_Scalar(r, p - 1)
        each = aten.div.Tensor(aten.mul.Tensor(scaled, g), denominator)
        vanishes = aten.eq.Scalar(r, 0)
        if p < 1:
            vanishes = aten.logical_or.default(vanishes, aten.eq.Scalar(diff, 0))
        each = aten.where.self(vanishes, aten.mul.Scalar(diff, 0), each)
    return aten.sum.dim_IntList(each, [-2])


def _by_tensor(op):
    """A pointwise op of a tensor and a number (a Scalar overload) as `op`,
    its Tensor overload, of both in the promoted dtype, the number a 0-dim
    constant (an integer tensor's fmod by 2.5 is f32; ATen converts the
    number to it too)."""
    def decomposition(self, other, **kwargs):
        dtype = torch.result_type(self, other)
        if self.dtype != dtype:
            self = aten._to_copy.default(self, dtype=dtype)
        return op(self, aten.scalar_tensor.default(other, dtype=dtype), **kwargs)
    return decomposition


def _div_mode(self, other, *, rounding_mode=None):
    """div.Tensor_mode by a number (`perm // k`) as _by_tensor's
    div.Tensor_mode, so that the result's dtype is PyTorch's (an integer
    tensor floor-divided by an int stays integer)."""
    if isinstance(other, torch.Tensor) or rounding_mode is None:
        return NotImplemented
    return _by_tensor(aten.div.Tensor_mode)(self, other, rounding_mode=rounding_mode)


def _sort(self, dim=-1, descending=False):
    """sort.default as sort.stable with stable=False (what ATen runs
    underneath), the dialect's one sort op."""
    return aten.sort.stable(self, stable=False, dim=dim, descending=descending)


def _sort_stable(self, *, stable=None, dim=-1, descending=False):
    """sort.stable with stable=None spelled out (False, ATen's default)."""
    return NotImplemented if stable is not None else _sort(self, dim, descending)


def _group_of(offs, count):
    """For each of `count` positions, its group under the cumulative group
    ends `offs` (the groups of _grouped_mm): how many ends are <= it."""
    positions = aten.arange.default(count, dtype=torch.int64)
    ends = aten._to_copy.default(offs, dtype=torch.int64)
    below = aten.le.Tensor(aten.unsqueeze.default(ends, 0), aten.unsqueeze.default(positions, 1))
    return aten.sum.dim_IntList(aten._to_copy.default(below, dtype=torch.int64), [1])


def _grouped_mm(self, mat2, offs=None, bias=None, out_dtype=None):
    """_grouped_mm (transformers' grouped_mm experts) on fixed shapes: 2d x
    3d (row s of `self` times `mat2[g]`, g its group) as each row's matrix
    gathered by index and a bmm; 2d x 2d (the weight gradient: the
    contracted dim grouped, one [M, N] product per group) as `self` masked
    per group and a bmm. Rows past the last group end, which ATen leaves
    unwritten, are zero."""
    if offs is None or bias is not None or out_dtype is not None or self.dim() != 2:
        return NotImplemented
    if mat2.dim() == 3:
        groups = mat2.shape[0]
        group = _group_of(offs, self.shape[0])
        inside = aten.lt.Scalar(group, groups)
        picked = aten.index.Tensor(mat2, [aten.clamp.default(group, None, groups - 1)])
        out = aten.squeeze.dims(aten.bmm.default(aten.unsqueeze.default(self, 1), picked), [1])
        return aten.where.self(aten.unsqueeze.default(inside, 1), out,
                               aten.full_like.default(out, 0))
    if mat2.dim() == 2:
        groups, k, n = offs.shape[0], self.shape[1], mat2.shape[1]
        group = _group_of(offs, k)
        member = aten.eq.Tensor(aten.unsqueeze.default(group, 0),
                                aten.unsqueeze.default(aten.arange.default(groups), 1))
        masked = aten.mul.Tensor(aten.unsqueeze.default(self, 0),
                                 aten.unsqueeze.default(
                                     aten._to_copy.default(member, dtype=self.dtype), 1))
        return aten.bmm.default(masked, aten.expand.default(mat2, [groups, k, n]))
    return NotImplemented


def _histc(self, bins=100, min=0, max=0):
    """histc over a given range as ATen's CPU kernel: elements outside
    [min, max] (and NaN) are left out; an element's bin is linearly
    interpolated in self's dtype, `(x - min) * bins / (max - min)`
    truncated, the last bin closed on the right (histc's linear
    interpolation has no search against the edges); a one-hot of the bins
    summed, counts in self's dtype. A range taken from the data
    (min == max) is not supported."""
    if min == max or self.dtype not in (torch.float32, torch.float64):
        return NotImplemented
    flat = self.reshape([-1])
    inside = aten.bitwise_and.Tensor(aten.ge.Scalar(flat, min), aten.le.Scalar(flat, max))
    scaled = aten.div.Scalar(aten.mul.Scalar(aten.sub.Scalar(flat, min), bins), max - min)
    scaled = aten.where.self(inside, scaled, aten.full_like.default(scaled, 0))
    bin_ = aten.clamp.default(aten._to_copy.default(scaled, dtype=torch.int64), None, bins - 1)
    hit = aten.bitwise_and.Tensor(
        aten.eq.Tensor(aten.unsqueeze.default(bin_, 1),
                       aten.unsqueeze.default(aten.arange.default(bins), 0)),
        aten.unsqueeze.default(inside, 1))
    return aten.sum.dim_IntList(aten._to_copy.default(hit, dtype=self.dtype), [0])


def _repeat_heads(kv, heads):
    """`kv` [B, Hkv, S, D] with each head repeated for the `heads // Hkv`
    query heads that read it (repeat_interleave on dim 1: query head h reads
    kv head h // (heads // Hkv), SDPA's enable_gqa rule)."""
    b, h, s, d = kv.shape
    wide = aten.expand.default(aten.unsqueeze.default(kv, 2), [b, h, heads // h, s, d])
    return wide.reshape(b, heads, s, d)


def _attention_gqa(query, key, value, dropout_p=0.0, is_causal=False, *, attn_mask=None,
                   scale=None):
    """SDPA with fewer key/value heads than query heads (grouped- and
    multi-query attention called with enable_gqa, Falcon's) as SDPA on
    key/value heads repeated to the query's: the dialect's attention has
    one number of heads, and its head sharding serves the repeat."""
    if key.shape[1] == query.shape[1]:
        return NotImplemented
    heads = query.shape[1]
    return aten._scaled_dot_product_flash_attention_for_cpu.default(
        query, _repeat_heads(key, heads), _repeat_heads(value, heads), dropout_p, is_causal,
        attn_mask=attn_mask, scale=scale)


def _attention_gqa_backward(grad_out, query, key, value, out, logsumexp, dropout_p,
                            is_causal, *, attn_mask=None, scale=None):
    """The backward of _attention_gqa: each key/value head's gradient sums
    those of its repeats."""
    if key.shape[1] == query.shape[1]:
        return NotImplemented
    heads = query.shape[1]
    grad_query, grad_key, grad_value = (
        aten._scaled_dot_product_flash_attention_for_cpu_backward.default(
            grad_out, query, _repeat_heads(key, heads), _repeat_heads(value, heads), out,
            logsumexp, dropout_p, is_causal, attn_mask=attn_mask, scale=scale))

    def fold(grad, like):
        b, h, s, d = like.shape
        return aten.sum.dim_IntList(grad.reshape(b, h, heads // h, s, d), [2])
    return grad_query, fold(grad_key, key), fold(grad_value, value)


def _bitwise_not(self):
    """~x: logical_not on bools (DeBERTa's inverted masks), -1 - x on
    integers (two's complement)."""
    if self.dtype == torch.bool:
        return aten.logical_not.default(self)
    return aten.rsub.Scalar(self, -1)


def _truth(x):
    """Whether each element of `x` is nonzero, a bool tensor (x itself when
    it is one): what ATen's logical ops read of their operands."""
    return x if x.dtype == torch.bool else aten.ne.Scalar(x, 0)


def _logical_and(self, other):
    return aten.bitwise_and.Tensor(_truth(self), _truth(other))


def _logical_or(self, other):
    return aten.bitwise_or.Tensor(_truth(self), _truth(other))


def _logical_xor(self, other):
    return aten.ne.Tensor(_truth(self), _truth(other))


def _covers_contiguously(tensor, size, stride, storage_offset):
    """Whether as_strided(tensor, size, stride, storage_offset) takes every
    element of a contiguous `tensor` in its row-major order: the strides of
    `size`'s dims longer than 1 are row-major's (ATen's adaptive pooling to
    1 re-strides its mean so for a channels-last input)."""
    if not tensor.is_contiguous() or math.prod(size) != tensor.numel():
        return False
    offset = tensor.storage_offset() if storage_offset is None else storage_offset
    if offset != tensor.storage_offset():
        return False
    expected = 1
    for n, st in reversed(list(zip(size, stride))):
        if n != 1 and st != expected:
            return False
        expected *= n
    return True


def _as_strided(self, size, stride, storage_offset=None):
    """as_strided that re-strides a contiguous tensor without moving an
    element, as a view."""
    if not _covers_contiguously(self, size, stride, storage_offset):
        return NotImplemented
    return aten.view.default(self, list(size))


def _as_strided_scatter(self, src, size, stride, storage_offset=None):
    """as_strided_scatter whose strided view is the whole of a contiguous
    `self` in order (the backward of _as_strided): `src` in self's shape."""
    if not _covers_contiguously(self, size, stride, storage_offset):
        return NotImplemented
    return aten.clone.default(aten.view.default(src, list(self.shape)))


def _layer_norm_mixed(input, normalized_shape, weight, bias, eps):
    """native_layer_norm of a bf16 input with fp32 parameters (a Linear's
    bf16 output under torch.autocast): in fp32, the output rounded to the
    input's dtype, mean and rstd kept fp32, as ATen's mixed-type CPU kernel
    computes (its output bit for bit). Same dtypes: the op itself."""
    if weight is None or weight.dtype == input.dtype:
        return NotImplemented
    out, mean, rstd = aten.native_layer_norm.default(
        aten._to_copy.default(input, dtype=weight.dtype), normalized_shape, weight, bias, eps)
    return aten._to_copy.default(out, dtype=input.dtype), mean, rstd


def _layer_norm_backward_mixed(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                               output_mask):
    """native_layer_norm_backward of a bf16 input with fp32 parameters: in
    fp32, the input's gradient rounded to its dtype; the parameters'
    gradients in fp32, accumulated in fp32 (ATen's mixed-type CPU kernel
    accumulates them in bf16: 0.2 off float64 where this is exact on a
    [64, 8] batch). Same dtypes: the op itself."""
    if weight is None or weight.dtype == input.dtype:
        return NotImplemented
    wide = weight.dtype
    grad_input, grad_weight, grad_bias = aten.native_layer_norm_backward.default(
        aten._to_copy.default(grad_out, dtype=wide), aten._to_copy.default(input, dtype=wide),
        normalized_shape, aten._to_copy.default(mean, dtype=wide),
        aten._to_copy.default(rstd, dtype=wide), weight, bias, output_mask)
    return (None if grad_input is None else aten._to_copy.default(grad_input, dtype=input.dtype),
            grad_weight, grad_bias)


def _lerp_tensor(self, end, weight):
    """lerp with a tensor weight, as ATen computes it: self + weight * (end -
    self) where |weight| < 0.5, end - (end - self) * (1 - weight) elsewhere
    (Adam's moment with a scheduled beta)."""
    diff = aten.sub.Tensor(end, self)
    return aten.where.self(aten.lt.Scalar(aten.abs.default(weight), 0.5),
                           aten.add.Tensor(self, aten.mul.Tensor(weight, diff)),
                           aten.sub.Tensor(end, aten.mul.Tensor(diff,
                                                                aten.rsub.Scalar(weight, 1))))


def _clamp_tensor(self, min=None, max=None):
    """clamp with tensor bounds as maximum and minimum: the promoted dtype,
    NaN from any operand propagating (torch._refs.clamp)."""
    if min is not None:
        self = aten.maximum.default(self, min)
    if max is not None:
        self = aten.minimum.default(self, max)
    return self


def _max(self):
    """max of all elements as amax over every dim (a Partial(max) over
    sharded dims)."""
    if self.dtype in (torch.bool, torch.uint8) or self.dim() == 0:
        return NotImplemented
    return aten.amax.default(self, list(range(self.dim())))


def _min(self):
    """min of all elements as _max of the negated values."""
    if self.dtype in (torch.bool, torch.uint8) or self.dim() == 0:
        return NotImplemented
    return aten.neg.default(_max(aten.neg.default(self)))


def _amin(self, dim=(), keepdim=False):
    """amin as amax of the negated values (a Partial(max) over sharded
    dims, negated back); bool and uint8 inputs stay unsupported."""
    if self.dtype in (torch.bool, torch.uint8):
        return NotImplemented
    return aten.neg.default(aten.amax.default(aten.neg.default(self), list(dim), keepdim))


def _flip(self, dims):
    """flip as index_select of each flipped dim's positions in reverse
    (cumsum's backward flips the gradient)."""
    flipped = self
    for d in dims:
        size = self.shape[d % self.dim()]
        if size > 1:
            flipped = aten.index_select.default(
                flipped, d, aten.arange.start_step(size - 1, -1, -1, dtype=torch.int64))
    # A flip of dims of size 1 alone is a copy.
    return flipped if flipped is not self else aten.clone.default(self)


def _isnan(self):
    """isnan as self != self (the max of all elements' backward asks where
    a NaN is)."""
    return aten.ne.Tensor(self, self)


def _add_number(self, other, *, alpha=1):
    """add.Tensor of a number and a tensor with an alpha (`torch.add(0.33,
    mask, alpha=0.67)`) as add.Scalar of alpha * tensor, ATen's order."""
    if isinstance(self, torch.Tensor) or alpha == 1:
        return NotImplemented
    return aten.add.Scalar(aten.mul.Scalar(other, alpha), self)


def _scatter_value(self, dim, index, value):
    """scatter of a number as scatter.src of that number shaped like
    `index` (PhiMoE masks its chosen expert's score with -inf so)."""
    return aten.scatter.src(self, dim, index,
                            aten.full_like.default(index, value, dtype=self.dtype))


def _rand(size, *, dtype=None, **_):
    """rand as uniform over [0, 1) of a zero tensor of its shape."""
    zeros = aten.full.default(list(size), 0.0, dtype=dtype or torch.get_default_dtype())
    return aten.uniform.default(zeros, 0.0, 1.0)


def _rand_like(self, *, dtype=None, **_):
    """rand_like as uniform over [0, 1) of a zero tensor like `self`:
    sharded as `self`, each element drawn by its global index."""
    return aten.uniform.default(aten.full_like.default(self, 0.0, dtype=dtype), 0.0, 1.0)


def _eye(n, m=None, *, dtype=None, device=None, **_):
    """eye as int64 positions compared: PyTorch's decomposition counts in
    uint8 below 256 (_strength_reduce_integer), a type the dialect lacks."""
    m = n if m is None else m
    rows = aten.arange.start_step(0, n, 1, dtype=torch.int64, device=device)
    cols = aten.arange.start_step(0, m, 1, dtype=torch.int64, device=device)
    return aten.eq.Tensor(aten.unsqueeze.default(rows, -1), cols).to(
        dtype or torch.get_default_dtype())


def _solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """linalg_solve_triangular as matrix products: A = D (I - N) with D its
    diagonal (I when unitriangular) and N strictly triangular, hence
    nilpotent (N^n = 0), so A^-1 B = (I + N)(I + N^2)(I + N^4)... D^-1 B, a
    product of ceil(log2 n) factors. X A = B (left=False) is the transposed
    system. The chunked delta rule's (Qwen3-Next's Gated DeltaNet) system is
    unitriangular with off-diagonal entries below one."""
    if not left:
        return _solve_triangular(A.mT, B.mT, upper=not upper,
                                 unitriangular=unitriangular).mT
    n = A.shape[-1]
    rows = aten.unsqueeze.default(aten.arange.start_step(0, n, 1, device=A.device), -1)
    cols = aten.arange.start_step(0, n, 1, device=A.device)
    strict = (cols > rows) if upper else (cols < rows)
    N = -torch.where(strict, A, torch.zeros_like(A))
    if not unitriangular:
        diagonal = torch.where(rows == cols, A, torch.zeros_like(A)).sum(-1, keepdim=True)
        N, B = N / diagonal, B / diagonal
    X, power, factors = B, N, max(n - 1, 0).bit_length()
    for k in range(factors):
        X = X + power @ X
        if k + 1 < factors:
            power = power @ power
    return X


def _per_tensor(op):
    """A functional torch._foreach_<op> (what functionalization makes of
    `torch._foreach_lerp_`, EMA updates' favourite) as `op` on each tensor
    of its lists: list arguments (tensors, or a ScalarList's numbers) are
    taken element by element, others shared."""
    def decomposition(*args, **kwargs):
        def pick(value, k):
            return value[k] if isinstance(value, (list, tuple)) else value
        count = next(len(a) for a in args if isinstance(a, (list, tuple)))
        return [op(*[pick(a, k) for a in args], **{n: pick(v, k) for n, v in kwargs.items()})
                for k in range(count)]
    return decomposition


def _foreach_decompositions():
    """{functional _foreach_* overload: its per-tensor decomposition} for
    every one whose per-tensor op ATen has (_foreach_norm is
    linalg_vector_norm)."""
    table = {}
    names = {schema.name.split("::")[1] for schema in torch._C._jit_get_all_schemas()
             if schema.name.startswith("aten::_foreach_")}
    for name in sorted(names):
        if name.endswith("_"):
            continue
        base = {"norm": "linalg_vector_norm"}.get(name[len("_foreach_"):],
                                                  name[len("_foreach_"):])
        if not hasattr(aten, base):
            continue
        packet = getattr(aten, name)
        for overload in packet.overloads():
            table[getattr(packet, overload)] = _per_tensor(getattr(aten, base))
    return table


# Ops written as others by spmd's own decompositions.
DECOMPOSED_BY_SPMD = {
    aten.lerp.Tensor: _lerp_tensor,
    aten.clamp.Tensor: _clamp_tensor,
    aten.max.default: _max,
    aten.min.default: _min,
    aten.amin.default: _amin,
    aten.flip.default: _flip,
    aten.isnan.default: _isnan,
    aten.fmod.Scalar: _by_tensor(aten.fmod.Tensor),
    aten.remainder.Scalar: _by_tensor(aten.remainder.Tensor),
    aten.rand.default: _rand,
    aten.add.Tensor: _add_number,
    aten.scatter.value: _scatter_value,
    aten.rand_like.default: _rand_like,
    aten.eye.default: _eye, aten.eye.m: _eye,
    aten.linalg_solve_triangular.default: _solve_triangular,
    aten.native_batch_norm.default: _batch_norm,
    aten.native_layer_norm.default: _layer_norm_mixed,
    aten.native_layer_norm_backward.default: _layer_norm_backward_mixed,
    aten.convolution.default: _convolution,
    aten.hardtanh.default: _hardtanh,
    aten.copy.default: _copy,
    aten._cdist_forward.default: _cdist_forward,
    aten._cdist_backward.default: _cdist_backward,
    aten.grid_sampler_2d.default: _grid_sampler,
    aten.grid_sampler_3d.default: _grid_sampler,
    aten.grid_sampler_2d_backward.default: _grid_sampler_backward,
    aten.grid_sampler_3d_backward.default: _grid_sampler_backward,
    aten.adaptive_max_pool2d.default: _adaptive_max_pool2d,
    aten.adaptive_max_pool2d_backward.default: _adaptive_max_pool2d_backward,
    aten.max_pool3d_with_indices_backward.default: _max_pool3d_backward,
    aten.avg_pool3d.default: _avg_pool3d,
    aten.avg_pool3d_backward.default: _avg_pool3d_backward,
    aten._adaptive_avg_pool3d.default: _adaptive_avg_pool3d,
    aten._adaptive_avg_pool3d_backward.default: _adaptive_avg_pool3d_backward,
    aten.hardshrink_backward.default: _shrink_backward,
    aten.softshrink_backward.default: _shrink_backward,
    **{op: _replication_pad_backward for op in (
        aten.replication_pad1d_backward.default, aten.replication_pad2d_backward.default,
        aten.replication_pad3d_backward.default)},
    **{op: _upsample_linear_backward for op in (
        aten.upsample_linear1d_backward.default, aten.upsample_bilinear2d_backward.default,
        aten.upsample_trilinear3d_backward.default)},
    aten.upsample_bicubic2d_backward.default: _upsample_bicubic2d_backward,
    **{op: _upsample_nearest_backward(exact=False) for op in (
        aten.upsample_nearest1d_backward.default, aten.upsample_nearest2d_backward.default,
        aten.upsample_nearest3d_backward.default)},
    **{op: _upsample_nearest_backward(exact=True) for op in (
        aten._upsample_nearest_exact1d_backward.default,
        aten._upsample_nearest_exact2d_backward.default,
        aten._upsample_nearest_exact3d_backward.default)},
    aten.max.dim: _max_dim,
    aten.min.dim: _min_dim,
    aten.argmax.default: _argmax,
    aten.argmin.default: _argmin,
    aten.mean.default: _mean,
    aten.mean.dim: _mean_dim,
    aten.cat.default: _cat,
    aten.stack.default: _stack,
    aten.convolution_backward.default: _convolution_backward,
    aten.index.Tensor: _index,
    aten.index_put.default: _index_put,
    aten.bitwise_not.default: _bitwise_not,
    aten.logical_and.default: _logical_and,
    aten.logical_or.default: _logical_or,
    aten.logical_xor.default: _logical_xor,
    aten.var_mean.correction: _var_mean,
    aten.var.correction: _var,
    aten.as_strided.default: _as_strided,
    aten.as_strided_scatter.default: _as_strided_scatter,
    aten.sort.default: _sort,
    aten.div.Tensor_mode: _div_mode,
    aten.sort.stable: _sort_stable,
    aten._grouped_mm.default: _grouped_mm,
    aten.histc.default: _histc,
    aten._scaled_dot_product_flash_attention_for_cpu.default: _attention_gqa,
    aten._scaled_dot_product_flash_attention_for_cpu_backward.default: _attention_gqa_backward,
    **_foreach_decompositions(),
}


# Ops whose ATen CPU kernels refuse float64: the float64 reference step
# (bundle.py) computes them by these decompositions.
FLOAT64_BY_DECOMPOSITION = {aten._grouped_mm.default: _grouped_mm}


def decompositions():
    """PyTorch's Core ATen decomposition table, less the ops kept whole,
    plus DECOMPOSED_BEYOND_CORE and DECOMPOSED_BY_SPMD."""
    table = {op: fn for op, fn in core_aten_decompositions().items() if not kept_whole(op)}
    for name in DECOMPOSED_BEYOND_CORE:
        op = getattr(getattr(aten, name.split(".")[0]), name.split(".")[1])
        table[op] = torch._decomp.decomposition_table[op]
    table.update(DECOMPOSED_BY_SPMD)
    return table


@dataclasses.dataclass
class Arg:
    """An argument of @train_step: role is
    param|buffer|optim_state|grad|lr|hyperparameter|step|input|target.
    Inputs and targets record which of the factory's tensors they are (`slot`)
    and, with gradient accumulation, which micro-batch (`micro`; None for a
    tensor every micro-step shares). A `grad` (a parameter's `.grad` that an
    earlier call left, carried from call to call) whose .grad is None has
    `holds_none`: the step does not read it."""
    fqn: str
    role: str
    value: torch.Tensor
    slot: Optional[int] = None
    micro: Optional[int] = None
    # A complex tensor, which the step takes as its real pairs (`value` is
    # torch.view_as_real of it after tracing: complex.py).
    complex: bool = False
    holds_none: bool = False

    def carried(self, tensor):
        """A tensor the user holds for this argument as the step takes it."""
        return torch.view_as_real(torch.as_tensor(tensor)) if self.complex else tensor

    def restored(self, tensor):
        """A value of this argument as the user holds it."""
        return torch.view_as_complex(tensor) if self.complex else tensor


@dataclasses.dataclass(frozen=True)
class ResultIndex:
    """A tensor a user's train_step returns: result `index` of the step."""
    index: int


@dataclasses.dataclass
class Result:
    """A result of @train_step: the loss (updates is None), another value a
    user's train_step returns (role "output", `output.<k>` for its k-th
    tensor), or a new value of argument `updates`."""
    fqn: str
    updates: Optional[int]
    role: str = "loss"


@dataclasses.dataclass
class Factory:
    """What a model factory returned, normalised. `inputs` and `targets` are
    lists of (key, value): an int key is a positional argument, a str key a
    keyword argument; values are tensors (the step's arguments) or Python
    constants (None, numbers, strings: baked into the graph)."""
    model: nn.Module
    inputs: list
    loss_fn: object
    targets: list
    # A user's whole step, train_step(model, optimizer, *inputs) (the
    # Python API, spmd.compile): it computes the loss, calls loss.backward()
    # and optimizer.step() itself; loss_fn and targets are then unused.
    train_step: object = None
    optimizer: object = None  # the torch.optim optimizer train_step is given (or Optimizers)
    # A user's forward-only step, eval_step(model, *inputs) (spmd.compile's
    # CompiledStep.eval_step): run without gradients, what it returns are
    # the step's outputs; there is no loss, backward or optimizer.
    eval_step: object = None

    def tensors(self, role):
        """(key, tensor) of the tensors among `role`'s ("input"/"target") entries."""
        return [(k, v) for k, v in getattr(self, role + "s") if isinstance(v, torch.Tensor)]

    def converted(self, convert):
        """The same factory with every input and target tensor t replaced by
        convert(t) (a rank's piece of the batch, a copy on the GPU...)."""
        def entries(items):
            return [(k, convert(v) if isinstance(v, torch.Tensor) else v) for k, v in items]
        return dataclasses.replace(self, inputs=entries(self.inputs),
                                   targets=entries(self.targets))

    def loss(self, model=None):
        """The loss of `model` (default: the factory's own) on the factory's
        inputs and targets, as the captured step computes it."""
        model = model or self.model
        return loss_of(self, forward(self, lambda a, kw: model(*a, **kw), [], {}), [], {})


def call_arguments(entries, tensors):
    """(args, kwargs) of a call from a factory's entries, with the tensors
    taken from `tensors` (key -> tensor) and constants as they are."""
    args, kwargs = [], {}
    for key, value in entries:
        value = tensors.get(key, value) if isinstance(value, torch.Tensor) else value
        if isinstance(key, int):
            args.append(value)
        else:
            kwargs[key] = value
    return tuple(args), kwargs


@dataclasses.dataclass
class Step:
    """A traced training step: the functional FX graph, its arguments (in
    placeholder order) and results (in output order)."""
    graph_module: torch.fx.GraphModule
    args: List[Arg]
    results: List[Result]
    # The traced graph's own results on the argument values (seeded as the
    # eager step is), to be compared with PyTorch's.
    outputs: List[torch.Tensor]
    # (FQN, class names, attributes) of every submodule, for plans keyed by
    # module (TP styles check the module's type).
    modules: List[tuple] = dataclasses.field(default_factory=list)
    # What a user's train_step returns: its pytree spec and, per leaf, the
    # ResultIndex of its "output" result (a tensor) or the leaf itself (a
    # constant); None when it returns the loss alone.
    returned: Optional[tuple] = None
    # The tensors the step reads that are neither arguments nor its own
    # (globals, closures: class weights, a frozen model outside the model),
    # baked into the graph as constants.
    constants: List[torch.Tensor] = dataclasses.field(default_factory=list)
    # Of a user's train_step: whether it calls optimizer.step() (a step
    # that only accumulates gradients does not), and the FQNs of the
    # trainable parameters whose .grad it leaves set, as `grad` results or
    # untouched (`grads_after`) and, traced without `grad` arguments, as
    # new values the step does not keep (`grads_dropped`).
    stepped: bool = True
    grads_after: frozenset = frozenset()
    grads_dropped: frozenset = frozenset()
    # The strides of the masks `outputs` drew (Run.drawn), in order.
    draws: tuple = ()


class CarriesGradients(CaptureError):
    """A user's train_step leaves .grads set for the next call to add into
    or step on: it adds into the .grads an earlier call left (`reads`), or
    steps no optimizer. Traced without `grad` arguments it cannot be
    compiled: spmd.compile then traces it again with them."""

    def __init__(self, message, reads):
        super().__init__(message)
        self.reads = reads


def _attention_heads(module):
    """(heads, key/value heads) of an attention module: nn.MultiheadAttention
    or a class named *Attention (transformers' attentions keep them as
    attributes or in their config); (None, None) otherwise."""
    if not isinstance(module, nn.MultiheadAttention) and \
            not type(module).__name__.endswith("Attention"):
        return None, None
    config = getattr(module, "config", None)

    def first(names):
        for owner in (module, config):
            for n in names:
                v = getattr(owner, n, None)
                if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                    return v
        return None
    heads = first(("num_heads", "num_attention_heads", "n_heads", "n_head"))
    return heads, first(("num_key_value_heads", "num_kv_heads")) if heads else None


def clear_model_caches(model):
    """Empties the functools.lru_caches of the model's module classes, the
    functions themselves or (transformers' compile_compatible_method_lru_cache)
    in their closures: a helper cached while tracing returns a fake tensor,
    which an eager step must not be given, nor a trace a real one (BEiT's
    relative position index)."""
    seen = set()
    classes = {cls for module in model.modules() for cls in type(module).__mro__}
    for cls in classes:
        for attr in vars(cls).values():
            fn = getattr(attr, "__func__", attr)  # staticmethod, classmethod
            candidates = [fn] + [cell.cell_contents for cell in
                                 getattr(fn, "__closure__", None) or ()
                                 if _cell_is_set(cell)]
            for f in candidates:
                if isinstance(f, functools._lru_cache_wrapper) and id(f) not in seen:
                    seen.add(id(f))
                    f.cache_clear()


def _cell_is_set(cell):
    """Whether a closure cell holds a value (an unset one raises)."""
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def module_records(model):
    """(FQN, class names, attributes) of each submodule of `model` (the root
    excluded): the class and its bases up to nn.Module (a subclass of
    nn.Linear is a Linear to a plan), and what a plan's checks need (an
    attention's num_heads and num_kv_heads)."""
    records = []
    for name, module in model.named_modules():
        if not name:
            continue
        attrs = {}
        heads, kv_heads = _attention_heads(module)
        if heads:
            attrs["num_heads"] = heads
        if kv_heads:
            attrs["num_kv_heads"] = kv_heads
        classes = [c.__name__ for c in type(module).__mro__
                   if issubclass(c, nn.Module) and c is not nn.Module]
        records.append((name, classes, attrs))
    return records


def _parse_spec(spec):
    """`FILE.py:NAME` or `FILE.py:NAME(key=literal, ...)` -> (path, name, kwargs)."""
    path, sep, call = spec.rpartition(":")
    if not sep or not path.endswith(".py"):
        raise CaptureError("--model must be FILE.py:FACTORY, got '%s'" % spec)
    try:
        expr = ast.parse(call.strip(), mode="eval").body
        if isinstance(expr, ast.Name):
            return path, expr.id, {}
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and not expr.args:
            return path, expr.func.id, {k.arg: ast.literal_eval(k.value) for k in expr.keywords}
    except (SyntaxError, ValueError):
        pass
    raise CaptureError("FACTORY must be a name, optionally called with literal keyword "
                       "arguments (e.g. gpt(layers=2)), got '%s'" % call)


CONSTANT_TYPES = (type(None), bool, int, float, str)


def _entries(value, what):
    """A factory's inputs or targets as (key, value) entries: a tensor, a
    tuple or list (positional arguments) or a dict with str keys (keyword
    arguments, e.g. {"input_ids": ..., "attention_mask": ...}). Values are
    tensors or Python constants."""
    if isinstance(value, torch.Tensor):
        value = (value,)
    if isinstance(value, dict):
        items = list(value.items())
        bad = [k for k, _ in items if not isinstance(k, str) or not k.isidentifier()]
        if bad:
            raise CaptureError("the factory's %s are a dict whose keys must be argument "
                               "names, got %r" % (what, bad[0]))
    elif isinstance(value, (tuple, list)):
        items = list(enumerate(value))
    else:
        raise CaptureError("the factory's %s must be a tensor, a tuple of tensors or a dict of "
                           "tensors (keyword arguments), got a %s" % (what, type(value).__name__))
    for key, v in items:
        if not isinstance(v, torch.Tensor) and not isinstance(v, CONSTANT_TYPES):
            raise CaptureError("the factory's %s must be tensors (or Python constants), %s %s "
                               "is a %s" % (what, "element" if isinstance(key, int) else "entry",
                                            key if isinstance(key, int) else repr(key),
                                            type(v).__name__))
    return items


@contextlib.contextmanager
def _user_code(what):
    """Runs the user's code: whatever it raises, sys.exit() included, becomes a
    CaptureError naming `what` and the cause (the original stays chained for
    --verbose)."""
    try:
        yield
    except CaptureError:
        raise
    except SystemExit as e:
        raise CaptureError("%s called sys.exit(%s)" % (what, e.code)) from e
    except Exception as e:
        raise CaptureError("%s raised %s: %s" % (what, type(e).__name__, e)) from e


def load_factory(spec):
    """Imports FILE.py, calls FACTORY(**kwargs) and checks what it returns."""
    path, name, kwargs = _parse_spec(spec)
    if not os.path.isfile(path):
        raise CaptureError("model file '%s' not found" % path)
    module_spec = importlib.util.spec_from_file_location(
        "spmd_model_" + os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(module_spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with _user_code("importing '%s'" % path):
            module_spec.loader.exec_module(module)
    finally:
        sys.path.pop(0)
    factory = getattr(module, name, None)
    if not callable(factory):
        raise CaptureError("'%s' has no factory function '%s'" % (path, name))
    with _user_code("the factory %s" % spec):
        made = factory(**kwargs)
    if not isinstance(made, (tuple, list)) or len(made) not in (2, 4):
        raise CaptureError("%s() must return (module, inputs) or (module, inputs, loss_fn, "
                           "targets)" % name)
    if not isinstance(made[0], nn.Module):
        raise CaptureError("%s() returned a %s, not an nn.Module, as its first element"
                           % (name, type(made[0]).__name__))
    if not any(p.requires_grad for p in made[0].parameters()):
        raise CaptureError("%s() returned a module with no trainable parameter: a training "
                           "step needs one" % name)
    inputs = _entries(made[1], "inputs")
    if len(made) == 2 or (made[2] is None and not made[3]):
        return Factory(made[0], inputs, None, [])
    if not callable(made[2]):
        raise CaptureError("the factory's loss_fn is not callable")
    return Factory(made[0], inputs, made[2], _entries(made[3], "targets"))


def total_norm(tensors, p):
    """The p-norm of `tensors` seen as one vector (torch.nn.utils.
    get_total_norm) written as one reduction over every tensor,
    (sum_i sum |t_i|^p)^(1/p) or max_i max |t_i|: PyTorch's norm of the
    per-tensor norms up to rounding. Under sharding each tensor's partial
    sum (or max) then stays Partial until the one total is reduced;
    PyTorch's order (a root per tensor first) needs an all_reduce per
    sharded tensor."""
    if math.isinf(p):
        return torch.stack([t.abs().amax() for t in tensors]).amax()
    # |z|^2 of a complex gradient is the sum of its pairs' squares.
    power = (lambda t: (torch.view_as_real(t) if t.is_complex() else t).pow(2)) if p == 2 \
        else (lambda t: t.abs().pow(p))
    return torch.stack([power(t).sum() for t in tensors]).sum().pow(1 / p)


@contextlib.contextmanager
def _one_reduction_norms():
    """torch.nn.utils' gradient norms (clip_grad_norm_, get_total_norm) as
    total_norm() writes them while a user's step is traced. Its
    error_if_nonfinite check reads the norm's value: PyTorch's own code then
    runs (and the trace reports the read)."""
    clip_grad, utils = torch.nn.utils.clip_grad, torch.nn.utils
    original, public = clip_grad._get_total_norm, utils.get_total_norm

    def norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
        tensors = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors)
        if error_if_nonfinite or not tensors:
            return original(tensors, norm_type, error_if_nonfinite, foreach)
        with torch.no_grad():
            return total_norm(tensors, float(norm_type))
    clip_grad._get_total_norm = utils.get_total_norm = norm
    try:
        yield
    finally:
        clip_grad._get_total_norm, utils.get_total_norm = original, public


@contextlib.contextmanager
def _branch_free_averaging():
    """torch.optim.swa_utils.AveragedModel.update_parameters without its
    branch on the count of averages (`n_averaged == 0`: copy the model,
    else average), which reads the count's value: both are computed, and
    torch.where picks per element. The averaging itself (avg_fn,
    multi_avg_fn, SWA's mean by default) and the buffers' handling are
    PyTorch's."""
    from torch.optim import swa_utils
    original = swa_utils.AveragedModel.update_parameters

    def update_parameters(self, model):
        def tensors(m):
            return list(itertools.chain(m.parameters(), m.buffers()) if self.use_buffers
                        else m.parameters())
        mine = tensors(self.module) if self.use_buffers else tensors(self)
        theirs = [t.detach() for t in tensors(model)]
        averaged = [t.detach().clone() for t in mine]
        n = self.n_averaged
        if self.multi_avg_fn is not None:
            self.multi_avg_fn(averaged, theirs, n)
        elif self.avg_fn is None:
            # SWA's running mean: PyTorch's lerp by the weight 1 / (n + 1),
            # which its multi_avg_fn reads as a Python float.
            weight = 1.0 / (n + 1)
            for a, t in zip(averaged, theirs):
                if a.is_floating_point() or a.is_complex():
                    a.lerp_(t, weight.to(a.dtype))
                else:
                    swa_utils.get_swa_multi_avg_fn()([a], [t], n)
        else:
            averaged = [self.avg_fn(a, t, n) for a, t in zip(averaged, theirs)]
        for p, t, a in zip(mine, theirs, averaged):
            p.detach().copy_(torch.where(n == 0, t, a))
        if not self.use_buffers:
            for b, t in zip(self.module.buffers(), model.buffers()):
                b.detach().copy_(t.detach())
        self.n_averaged += 1
    swa_utils.AveragedModel.update_parameters = update_parameters
    try:
        yield
    finally:
        swa_utils.AveragedModel.update_parameters = original


class Optimizer:
    """The optimizer of the step (torch.optim's SGD, Adam, AdamW, RMSprop,
    Adagrad, Adamax, RAdam, NAdam, Adadelta, Adafactor or Muon;
    spmd-capture's --optimizer takes the first three), traced functionally
    and run eagerly.

    Its state starts as torch.optim leaves it before the first step: SGD's
    momentum buffers and Adam's moments zero. The learning rate and the step
    count are inputs of the traced step (`inputs()`), not constants, so a
    scheduler changes them between steps without recompiling: `lr` is this
    step's learning rate and `step` the number of steps taken before this
    one (torch.optim's state `step` before `optimizer.step()`; 0 first).

    The traced update is torch.optim's per-parameter formula (its `foreach`
    implementation is the same math on lists of tensors, but on CPU it reads
    the step count with .item(), which a graph cannot); `foreach` picks
    PyTorch's implementation for the eager reference (None: as PyTorch would
    pick). `clip_grad_norm` clips the gradients' total norm
    (torch.nn.utils.clip_grad_norm_, `clip_norm_type` 2 or inf or any p > 0)
    before the update.
    """

    def __init__(self, name, lr, momentum=0.0, dampening=0.0, nesterov=False,
                 weight_decay=0.0, betas=(0.9, 0.999), eps=1e-8, amsgrad=False, foreach=None,
                 clip_grad_norm=None, clip_norm_type=2.0, alpha=0.99, centered=False,
                 lr_decay=0.0, rho=0.9, maximize=False, decoupled_weight_decay=False,
                 momentum_decay=4e-3, ns_coefficients=(3.4445, -4.7750, 2.0315), ns_steps=5,
                 adjust_lr_fn=None, beta2_decay=-0.8, d=1.0):
        if name not in self.NAMES:
            raise CaptureError("--optimizer must be sgd, adam or adamw (spmd.compile also takes "
                               "rmsprop, adagrad, adamax, radam, nadam, adadelta, adafactor, "
                               "muon), got '%s'" % name)
        if not lr >= 0:  # torch.optim's rule: a warm-up starts at 0
            raise CaptureError("the learning rate (--lr) must be >= 0, got %g" % lr)
        if name in ("adam", "adamw"):
            for flag, value in (("--momentum", momentum), ("--dampening", dampening),
                                ("--nesterov", nesterov)):
                if value:
                    raise CaptureError("%s applies to sgd only (%s uses betas %s)"
                                       % (flag, name, tuple(betas)))
        elif amsgrad:
            raise CaptureError("--amsgrad applies to adam and adamw only")
        if name == "sgd" and nesterov and (momentum <= 0 or dampening != 0):
            raise CaptureError("--nesterov needs a momentum and zero dampening "
                               "(torch.optim.SGD's rule)")
        if clip_grad_norm is not None and not clip_grad_norm > 0:
            raise CaptureError("--clip-grad-norm must be positive, got %g" % clip_grad_norm)
        if not clip_norm_type > 0:
            raise CaptureError("--clip-norm-type must be positive or inf, got %g"
                               % clip_norm_type)
        self.name, self.lr, self.weight_decay = name, lr, weight_decay
        self.momentum, self.dampening, self.nesterov = momentum, dampening, nesterov
        self.betas, self.eps, self.amsgrad, self.foreach = tuple(betas), eps, amsgrad, foreach
        self.clip_grad_norm, self.clip_norm_type = clip_grad_norm, clip_norm_type
        self.alpha, self.centered, self.lr_decay = alpha, centered, lr_decay
        self.rho, self.maximize, self.momentum_decay = rho, maximize, momentum_decay
        # Muon's Newton-Schulz orthogonalization and its learning-rate
        # adjustment by shape; Adafactor's decay rate exponent and update
        # clipping threshold (its eps the pair (eps1 or None, eps2)).
        self.ns_coefficients, self.ns_steps = tuple(ns_coefficients), ns_steps
        self.adjust_lr_fn, self.beta2_decay, self.d = adjust_lr_fn, beta2_decay, d
        # RAdam's and NAdam's decoupled weight decay (AdamW's is its name).
        self.decoupled_weight_decay = decoupled_weight_decay
        # torch.optim's state keys, in the order update() takes them.
        self.state_keys = {
            "sgd": ["momentum_buffer"] if momentum else [],
            "rmsprop": ["square_avg"] + (["momentum_buffer"] if momentum else []) +
                       (["grad_avg"] if centered else []),
            "adagrad": ["sum"],
            "adamax": ["exp_avg", "exp_inf"],
            "adadelta": ["square_avg", "acc_delta"],
            # NAdam's product of the momentum coefficients so far, 0-dim.
            "nadam": ["exp_avg", "exp_avg_sq", "mu_product"],
            "muon": ["momentum_buffer"],
            # Adafactor's factored second moment of a matrix (the mean of
            # g^2 over each row and each column), or its whole one of a
            # vector; which ones a parameter has, initial_state() says.
            "adafactor": ["row_var", "col_var", "variance"],
        }.get(name, ["exp_avg", "exp_avg_sq"] + (["max_exp_avg_sq"] if amsgrad else []))
        # The SCHEDULED hyperparameters that are inputs of the step, as lr
        # is (spmd.compile sets them once a schedule changes one).
        self.dynamic = ()
        # SGD's first step copies the gradient into its buffer; with dampening
        # later steps do not, so the formula needs the step count; so does
        # Adagrad's learning-rate decay.
        self.uses_step = name in ("adam", "adamw", "adamax", "radam", "nadam",
                                  "adafactor") or bool(
            name == "sgd" and momentum and dampening) or bool(name == "adagrad" and lr_decay)
        self.groups = None  # one group of every trainable parameter (grouped())

    #: The torch.optim optimizers whose formula update() traces.
    NAMES = ("sgd", "adam", "adamw", "rmsprop", "adagrad", "adamax", "radam", "nadam",
             "adadelta", "adafactor", "muon")

    #: The hyperparameters besides lr that schedules change as training
    #: goes: the momentum, or Adam's first beta (OneCycleLR and CyclicLR
    #: cycle them: cycle_momentum), and the weight decay (cosine
    #: weight-decay schedules, as DINO's, set it in param_groups).
    SCHEDULED = {"sgd": ("momentum", "weight_decay"), "rmsprop": ("momentum", "weight_decay"),
                 "adam": ("beta1", "weight_decay"), "adamw": ("beta1", "weight_decay"),
                 "adamax": ("beta1", "weight_decay"), "radam": ("beta1", "weight_decay"),
                 "nadam": ("beta1", "weight_decay"), "adagrad": ("weight_decay",),
                 "adadelta": ("weight_decay",), "adafactor": ("weight_decay",),
                 "muon": ("momentum", "weight_decay")}

    @staticmethod
    def scheduled_value(name, group):
        """The SCHEDULED hyperparameter `name` of torch.optim's param group
        `group` (a dict; an Optimizer's vars() too)."""
        return group["betas"][0] if name == "beta1" else group[name]

    @classmethod
    def schedulable(cls, name, group):
        """The SCHEDULED hyperparameters of optimizer `name`'s param group
        `group` that can be inputs of the step: those that are not 0 (a
        momentum of 0 has no buffer, a weight decay of 0 no term, so that
        their change recompiles)."""
        return tuple(h for h in cls.SCHEDULED.get(name, ()) if cls.scheduled_value(h, group))

    def keys_of(self, param):
        """The state keys of `param` (state_keys but Adafactor's: row_var
        and col_var of a tensor of 2 or more dims, variance of a vector or
        a number)."""
        if self.name != "adafactor":
            return self.state_keys
        return ["row_var", "col_var"] if param.dim() > 1 else ["variance"]

    def initial_state(self, key, param):
        """State `key` of `param` as torch.optim creates it at the first
        step: zeros of the parameter's shape; NAdam's mu_product a 0-dim
        one; Adafactor's row_var of shape [..., R, 1] and col_var
        [..., 1, C] for a parameter [..., R, C]."""
        if key == "mu_product":
            return torch.ones(())
        if key in ("row_var", "col_var"):
            shape = list(param.shape)
            shape[-1 if key == "row_var" else -2] = 1
            return torch.zeros(shape, dtype=param.dtype)
        return torch.zeros_like(param)

    def grouped(self, groups):
        """torch.optim's parameter groups: `groups` is a list of (FQNs,
        Optimizer of that group's formula and hyperparameters; several
        optimizers' groups (Optimizers) may differ in formula). Each
        group's learning rate is an input of its own; a trainable parameter
        in no group is not updated (torch.optim does not see it). This
        optimizer keeps the step's gradient clipping, which spans every
        group. Returns self."""
        self.groups = [(frozenset(fqns), g) for fqns, g in groups]
        self.uses_step = any(g.uses_step for _, g in self.groups)
        return self

    def of(self, fqn):
        """(group index, that group's Optimizer) of parameter `fqn`, or None
        when no group has it."""
        if self.groups is None:
            return 0, self
        return next(((i, g) for i, (fqns, g) in enumerate(self.groups) if fqn in fqns), None)

    def describe(self):
        d = {"name": self.name, "lr": self.lr, "weight_decay": self.weight_decay,
             "foreach": self.foreach}
        if self.name == "sgd":
            d.update(momentum=self.momentum, dampening=self.dampening, nesterov=self.nesterov)
        else:
            d.update(betas=list(self.betas), eps=self.eps, amsgrad=self.amsgrad)
        if self.clip_grad_norm is not None:
            # JSON has no infinity: norm inf is the string "inf" (float() reads it).
            d.update(clip_grad_norm=self.clip_grad_norm,
                     clip_norm_type=self.clip_norm_type if math.isfinite(self.clip_norm_type)
                     else "inf")
        return d

    def inputs(self):
        """(FQN, role, group index, initial value) of the step's
        hyperparameter inputs: each group's learning rate (`optimizer.lr`,
        then `optimizer.lr.<g>` for group g > 0), its `dynamic`
        hyperparameters (`optimizer.beta1`, `optimizer.momentum`,
        `optimizer.weight_decay`, the same suffix), and the step count."""
        groups = [self] if self.groups is None else [g for _, g in self.groups]
        scheduled = [("optimizer.%s%s" % (h, ".%d" % i if i else ""), "hyperparameter", i,
                      torch.tensor(float(g.scheduled_value(h, vars(g)))))
                     for i, g in enumerate(groups) for h in g.dynamic]
        return [("optimizer.lr" + (".%d" % i if i else ""), "lr", i, torch.tensor(g.lr))
                for i, g in enumerate(groups)] + scheduled + \
            ([("optimizer.step", "step", None, torch.tensor(0.0))] if self.uses_step else [])

    def clip(self, grads):
        """torch.nn.utils.clip_grad_norm_ on `grads` (None: no gradient):
        each scaled by min(1, max_norm / (total norm + 1e-6)), the total
        norm as total_norm() writes it."""
        total = total_norm([g for g in grads if g is not None], self.clip_norm_type)
        coef = torch.clamp(self.clip_grad_norm / (total + 1e-6), max=1.0)
        return [None if g is None else g * coef for g in grads]

    def update(self, param, grad, state, lr, step, scheduled=None):
        """In place on `param` and the `state` tensors (ordered as
        state_keys); `lr` and `step` are the 0-dim inputs, `scheduled`
        {name: 0-dim input} of the `dynamic` hyperparameters."""
        scheduled = scheduled or {}
        if self.maximize:  # every torch.optim formula's first line
            grad = grad.neg()
        # Every formula's next: L2 decay adds to the gradient, decoupled decay
        # (AdamW, RAdam's and NAdam's flag) scales the parameter.
        if self.weight_decay and self.name not in ("muon", "adafactor"):
            decay = scheduled.get("weight_decay", self.weight_decay)
            if self.name == "adamw" or self.decoupled_weight_decay:
                param.mul_(1 - lr * decay)
            elif "weight_decay" in scheduled:  # add's alpha is a number
                grad = grad + param * decay
            else:
                grad = grad.add(param, alpha=decay)
        momentum = scheduled.get("momentum", self.momentum)
        beta1 = scheduled.get("beta1", self.betas[0])
        if self.name == "sgd":
            # torch.optim.SGD's _single_tensor_sgd, with the learning rate a tensor.
            if self.momentum:
                buf = state[0]
                if self.dampening:  # torch: the first step's buffer is the gradient
                    buf.copy_(torch.where(step == 0, grad,
                                          buf * momentum + grad * (1 - self.dampening)))
                else:  # from a zero buffer, exactly the gradient on the first step
                    buf.mul_(momentum).add_(grad)
                if not self.nesterov:
                    grad = buf
                elif "momentum" in scheduled:  # add's alpha is a number
                    grad = grad + buf * momentum
                else:
                    grad = grad.add(buf, alpha=momentum)
            param.sub_(grad * lr)
            return
        if self.name in ("rmsprop", "adagrad", "adadelta"):
            self._scaled_update(param, grad, state, lr, step, momentum)
            return
        if self.name in ("adamax", "radam", "nadam"):
            self._adam_variant(param, grad, state, lr, step, beta1)
            return
        if self.name == "muon":
            self._muon(param, grad, state[0], lr, momentum,
                       scheduled.get("weight_decay", self.weight_decay))
            return
        if self.name == "adafactor":
            self._adafactor(param, grad, state, lr, step,
                            scheduled.get("weight_decay", self.weight_decay))
            return
        # torch.optim.Adam's _single_tensor_adam, its eager branch with the
        # learning rate and step count tensors. Eager's addcdiv_(exp_avg, denom,
        # value=-step_size) takes a number: here the step size divides
        # denom (which eps keeps positive), so a learning rate of 0 updates
        # by 0 and no temporary beyond eager's is live. (The capturable
        # branch divides sqrt(exp_avg_sq) by the step size first: NaN where
        # a warm-up's learning rate is 0 and a moment is 0.)
        beta2 = self.betas[1]
        exp_avg, exp_avg_sq = state[0], state[1]
        t = step + 1
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size = lr / (1 - torch.pow(beta1, t))
        bias_correction2_sqrt = (1 - torch.pow(beta2, t)).sqrt()
        if self.amsgrad:
            state[2].copy_(torch.maximum(state[2], exp_avg_sq))
            exp_avg_sq = state[2]
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(self.eps)
        param.addcdiv_(exp_avg, denom / step_size.neg())

    def _scaled_update(self, param, grad, state, lr, step, momentum):
        """torch.optim's RMSprop, Adagrad and Adadelta (_single_tensor_rmsprop,
        _single_tensor_adagrad, _single_tensor_adadelta) with the learning
        rate and step count tensors (`momentum` RMSprop's, a tensor when
        dynamic). Their addcdiv_(grad, avg, value=-lr) takes a number: the
        learning rate divides avg instead (eps keeps it positive), as in
        Adam's update."""
        if self.name == "adadelta":
            square_avg, acc_delta = state
            square_avg.mul_(self.rho).addcmul_(grad, grad, value=1 - self.rho)
            std = square_avg.add(self.eps).sqrt_()
            delta = acc_delta.add(self.eps).sqrt_().div_(std).mul_(grad)
            acc_delta.mul_(self.rho).addcmul_(delta, delta, value=1 - self.rho)
            param.add_(delta * lr.neg())
            return
        if self.name == "adagrad":
            if self.lr_decay:
                lr = lr / (1 + step * self.lr_decay)
            state[0].addcmul_(grad, grad, value=1)
            param.addcdiv_(grad, state[0].sqrt().add_(self.eps) / lr.neg())
            return
        square_avg = state[0].mul_(self.alpha).addcmul_(grad, grad, value=1 - self.alpha)
        if self.centered:
            grad_avg = state[-1].lerp_(grad, 1 - self.alpha)
            avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(self.eps)
        if self.momentum:
            buf = state[1].mul_(momentum).addcdiv_(grad, avg)
            param.add_(buf * lr.neg())
        else:
            param.addcdiv_(grad, avg / lr.neg())

    def _adam_variant(self, param, grad, state, lr, step, beta1):
        """torch.optim's Adamax, RAdam and NAdam (_single_tensor_adamax,
        _single_tensor_radam, _single_tensor_nadam) with the learning rate
        and step count tensors. RAdam's branch on the variance's
        tractability (rho_t > 5) is a torch.where, its rectification taken
        at rho_t >= 5 so that the branch not taken stays finite. NAdam's
        addcdiv_ values (numbers in eager) divide its denominator instead,
        as in Adam's update."""
        beta2 = self.betas[1]
        exp_avg = state[0]
        t = step + 1
        exp_avg.lerp_(grad, 1 - beta1)
        if self.name == "adamax":
            exp_inf = state[1]
            exp_inf.copy_(torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(self.eps)))
            clr = lr / (1 - torch.pow(beta1, t))
            param.addcdiv_(exp_avg, exp_inf / clr.neg())
            return
        exp_avg_sq = state[1]
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        if self.name == "nadam":
            mu_product = state[2]
            mu = beta1 * (1.0 - 0.5 * torch.pow(0.96, t * self.momentum_decay))
            mu_next = beta1 * (1.0 - 0.5 * torch.pow(0.96, (t + 1) * self.momentum_decay))
            mu_product.mul_(mu)
            denom = exp_avg_sq.div(1 - torch.pow(beta2, t)).sqrt().add_(self.eps)
            param.addcdiv_(grad, denom / (-lr * (1.0 - mu) / (1.0 - mu_product)))
            param.addcdiv_(exp_avg, denom / (-lr * mu_next / (1.0 - mu_product * mu_next)))
            return
        bias_correction1 = 1 - torch.pow(beta1, t)
        bias_correction2 = 1 - torch.pow(beta2, t)
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * t * torch.pow(beta2, t) / bias_correction2
        rho = torch.clamp(rho_t, min=5.0)
        rect = ((rho - 4) * (rho - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho)).sqrt()
        adaptive_lr = bias_correction2.sqrt() / exp_avg_sq.sqrt().add_(self.eps)
        update = torch.where(rho_t > 5.0, adaptive_lr * rect, torch.ones_like(adaptive_lr))
        param.sub_(exp_avg / bias_correction1 * lr * update)

    def _muon(self, param, grad, buf, lr, momentum, decay):
        """torch.optim.Muon's _single_tensor_muon with the learning rate a
        tensor: momentum (Nesterov's by default), the orthogonalization of
        the [A, B] update by PyTorch's own Newton-Schulz iteration
        (torch.optim._muon._zeropower_via_newtonschulz, looked up at each
        trace: bf16 matrix products; a replacement patched in is traced
        too), the learning rate scaled by the shape as its _adjust_lr does,
        decoupled weight decay (`decay`, a tensor when scheduled: Muon's
        own, so update() leaves it to this). The iteration is computed
        whole (computed_whole): a sharded update is gathered once, and its
        bf16 products never contract over shards."""
        from torch.optim import _muon
        buf.lerp_(grad, 1 - momentum)
        update = grad.lerp(buf, momentum) if self.nesterov else buf
        with computed_whole():
            ortho = _muon._zeropower_via_newtonschulz(update, self.ns_coefficients,
                                                      self.ns_steps, self.eps)
        ratio = _muon._adjust_lr(1.0, self.adjust_lr_fn, param.shape)
        if self.weight_decay:
            param.mul_(1 - lr * decay)
        # Eager's add_(update, alpha=-lr * ratio) computes in the
        # parameter's dtype: the bf16 update is widened first.
        param.add_(ortho.to(param.dtype) * (lr * -ratio))

    def _adafactor(self, param, grad, state, lr, step, decay):
        """torch.optim.Adafactor's _single_tensor_adafactor with the
        learning rate and step count tensors: its Python numbers of the
        step (the decay rate t^beta2_decay, the relative step size
        min(lr, 1/sqrt(t))), of the parameter's RMS (the scale alpha) and of
        the update's RMS (the clipping denominator) are 0-dim tensors here,
        computed by the same formulas. (The weight decay `decay`, a tensor
        when scheduled, is Adafactor's own, so update() leaves it to
        this.)"""
        t = step + 1
        one_minus_beta2 = torch.pow(t, self.beta2_decay)
        rho = torch.minimum(lr, t.rsqrt())
        alpha = torch.clamp(param.norm(2) / (param.numel() ** 0.5), min=self.eps[1]) * rho
        if self.weight_decay:
            param.mul_(1 - lr * decay)
        eps1 = self.eps[0] if self.eps[0] is not None else torch.finfo(param.dtype).eps
        if grad.dim() > 1:
            row_var, col_var = state
            row_var.lerp_(torch.linalg.vector_norm(grad, dim=-1, keepdim=True).square_()
                          .div_(grad.size(-1)), one_minus_beta2)
            col_var.lerp_(torch.linalg.vector_norm(grad, dim=-2, keepdim=True).square_()
                          .div_(grad.size(-2)), one_minus_beta2)
            estimate = (row_var @ col_var).div_(row_var.mean(dim=-2, keepdim=True)
                                                .clamp_(min=eps1))
        else:
            state[0].lerp_(grad * grad, one_minus_beta2)
            estimate = state[0].clone()
        update = estimate.clamp_(min=eps1 * eps1).rsqrt_().mul_(grad)
        denom = torch.clamp(update.norm(2) / ((update.numel() ** 0.5) * self.d), min=1.0)
        param.sub_(update * (alpha / denom))

    def eager(self, params):
        """torch.optim's optimizer over `params`, and the gradient clipping
        to run before its step (None without --clip-grad-norm)."""
        if self.name == "sgd":
            opt = torch.optim.SGD(params, lr=self.lr, momentum=self.momentum,
                                  dampening=self.dampening, nesterov=self.nesterov,
                                  weight_decay=self.weight_decay, foreach=self.foreach)
        else:
            adam = torch.optim.AdamW if self.name == "adamw" else torch.optim.Adam
            opt = adam(params, lr=self.lr, betas=self.betas, eps=self.eps,
                       weight_decay=self.weight_decay, amsgrad=self.amsgrad,
                       foreach=self.foreach)
        clip = None if self.clip_grad_norm is None else functools.partial(
            torch.nn.utils.clip_grad_norm_, params, self.clip_grad_norm, self.clip_norm_type,
            foreach=self.foreach)
        return opt, clip


def describe(fqn):
    """How messages name the module with this FQN."""
    return "module '%s'" % fqn if fqn else "the root module"


def owner(fqn):
    """FQN of the module owning parameter/buffer `fqn` ('' for the root)."""
    return fqn.rpartition(".")[0]


class _Scope:
    """Where the tracer is: module FQN and phase (forward|loss|backward|optimizer),
    and whether the ops computed now need whole values (`replicated`: inside
    computed_whole(), or replaying such an op)."""
    fqn, phase, replicated = "", "forward", False
    # Whether the op traced now adds a gradient into a .grad (AccumulateGrad).
    accumulates = False

    def set(self, fqn, phase):
        self.fqn, self.phase = fqn, phase


# How many computed_whole() contexts are open.
_WHOLE = [0]


@contextlib.contextmanager
def computed_whole():
    """The ops traced inside compute on whole values: they carry
    `spmd.replicated`, which has propagation run them with every operand
    and result Replicate (Muon's Newton-Schulz iteration, whose bf16
    products must not contract over shards)."""
    _WHOLE[0] += 1
    try:
        yield
    finally:
        _WHOLE[0] -= 1


@contextlib.contextmanager
def _tag_nodes(scope):
    """Records the scope in `meta` of every FX node created inside."""
    create_node = torch.fx.Graph.create_node

    def tagged(graph, *args, **kwargs):
        node = create_node(graph, *args, **kwargs)
        node.meta["spmd_fqn"], node.meta["spmd_phase"] = scope.fqn, scope.phase
        if scope.replicated or _WHOLE[0]:
            node.meta["spmd_replicated"] = True
        if scope.accumulates:
            node.meta["spmd_accumulates"] = True
        if node.target is torch.ops.aten._local_scalar_dense.default or \
                _updates_constant(node):
            node.meta["spmd_where"] = _user_line(traceback.extract_stack())
        return node
    torch.fx.Graph.create_node = tagged
    try:
        yield
    finally:
        torch.fx.Graph.create_node = create_node


def _updates_constant(node):
    """Whether `node` writes in place into a constant of the graph: a tensor
    the step reads that is neither an argument (the model's, the batch) nor
    made by the step (a global, a closure's)."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable and \
        bool(node.args) and isinstance(node.args[0], torch.fx.Node) and \
        node.args[0].op == "get_attr" and bool(target._schema.arguments) and \
        target._schema.arguments[0].is_write


def _read_constants(gm):
    """The tensors `gm` reads as constants that the step did not make (a
    tensor literal is made: make_fx lifts it with lift_fresh_copy): the
    globals and closures it read, by identity."""
    read = {}
    for n in gm.graph.nodes:
        value = getattr(gm, n.target) if n.op == "get_attr" else None
        if isinstance(value, torch.Tensor) and \
                not all(u.target is aten.lift_fresh_copy.default for u in n.users):
            read[id(value)] = value
    return list(read.values())


@contextlib.contextmanager
def _module_scopes(model, scope):
    """Sets scope.fqn to the innermost module of `model` running `forward`."""
    names = {id(m): name for name, m in model.named_modules()}
    stack = []

    def pre(module, inputs):
        if id(module) in names:
            stack.append(scope.fqn)
            scope.fqn = names[id(module)]

    def post(module, inputs, output):
        if id(module) in names:
            scope.fqn = stack.pop()
    handles = [nn.modules.module.register_module_forward_pre_hook(pre),
               nn.modules.module.register_module_forward_hook(post)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


class _AutogradScopes(TorchFunctionMode):
    """Tags the autograd nodes each torch function creates with the current
    module, and makes the engine restore that module when it runs them."""

    def __init__(self, scope):
        super().__init__()
        self.scope = scope

    def _enter(self, fqn, grad_outputs):
        self.scope.set(fqn, "backward")

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.scope.phase not in ("forward", "loss"):
            return out
        with torch._C.DisableTorchFunction():
            todo = [t.grad_fn for t in _flat_tensors(out)]
            while todo:
                fn = todo.pop()
                if fn is None or "spmd_fqn" in fn.metadata or not hasattr(fn, "register_prehook"):
                    continue
                fn.metadata["spmd_fqn"] = self.scope.fqn
                fn.register_prehook(functools.partial(self._enter, self.scope.fqn))
                todo.extend(f for f, _ in fn.next_functions)
        return out


def _instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                   use_input_stats=True, momentum=0.1, eps=1e-5):
    """F.instance_norm with each sample's and channel's statistics reduced
    over the spatial dims of [N, C, *spatial] itself. ATen views the input
    as [1, N*C, *spatial] for a batch norm, merging the batch into the
    channels: a batch the mesh does not divide (and a StridedShard batch,
    RAFT's two images concatenated) had to be gathered, and the running
    statistics' update is a copy_ into an alias that functionalization
    misses. Same values: the biased variance normalizes; the running stats
    move by `momentum` toward the batch's mean of the instances' means and
    unbiased variances, as ATen's repeated batch-norm update averaged over
    the batch. Half-precision inputs compute in float32 (ATen's opmath)."""
    dtype, dims = input.dtype, list(range(2, input.dim()))
    x = input.float() if dtype in (torch.float16, torch.bfloat16) else input
    if use_input_stats:
        nn.functional._verify_spatial_size(input.size())
        out, mean, squares, _, n = _standardized(x, dims, eps)
        if running_mean is not None:
            with torch.no_grad():
                for stat, batch in ((running_mean, mean), (running_var, squares / (n - 1))):
                    if stat is not None:
                        # A sum over the batch, not its mean: a Partial(sum)
                        # of uneven shards (a Partial(avg) needs even ones).
                        batch = batch.sum(0).flatten() / input.shape[0]
                        stat.copy_(stat * (1 - momentum) + batch.to(stat.dtype) * momentum)
    else:
        out = _by_running_stats(x, running_mean, running_var, eps)
    out = _per_channel_affine(out, weight, bias)
    return out.to(dtype)


class _FunctionDecompositions(TorchFunctionMode):
    """Torch functions that the trace records as other torch functions
    (while ATen's composite kernel would write them in a form that shards
    worse): F.instance_norm as _instance_norm."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is nn.functional.instance_norm:
            return _instance_norm(*args, **kwargs)
        if func is torch.instance_norm:
            # torch.instance_norm's order: weight and bias before the stats.
            input, weight, bias, mean, var, use_input_stats, momentum, eps = args[:8]
            return _instance_norm(input, mean, var, weight, bias, use_input_stats, momentum, eps)
        return func(*args, **kwargs)


@contextlib.contextmanager
def _reentrant_checkpoint_replayed():
    """Activation checkpointing with use_reentrant=True runs its backward as
    a nested torch.autograd.backward, which torch.autograd.grad (the trace's
    backward) cannot run. Inside, it runs as the non-reentrant variant: the
    same gradients, the recomputation traced into the backward. As the
    reentrant variant, a call none of whose tensor inputs requires grad
    gives outputs without gradient (nothing inside gets one)."""
    import torch.utils.checkpoint as ckpt
    apply = ckpt.CheckpointFunction.apply

    def replay(function, preserve_rng_state, *args):
        if not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
            with torch.no_grad():
                return function(*args)
        return ckpt.checkpoint(function, *args, use_reentrant=False,
                               preserve_rng_state=preserve_rng_state)
    ckpt.CheckpointFunction.apply = replay
    try:
        yield
    finally:
        ckpt.CheckpointFunction.apply = apply


def _flat_tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat_tensors(v)]
    return []


def _as_meta(value):
    """`value` with every tensor replaced by a meta tensor of its shape and dtype."""
    return torch.fx.node.map_aggregate(
        value, lambda v: torch.empty(v.shape, dtype=v.dtype, device="meta")
        if isinstance(v, torch.Tensor) else v)


def _view_as_reshape(target, args):
    """`target`, or reshape for a view of a non-contiguous tensor, which a
    view cannot take: in value semantics a view is a reshape."""
    if target is aten.view.default and not args[0].is_contiguous():
        return aten.reshape.default
    return target


class Run(torch.fx.Interpreter):
    """Runs a traced graph on real values, drawing random numbers as the
    eager step did. `draws`: the strides of the tensors the eager step's
    bernoulli_ calls filled, in call order (bundle._DrawStrides), where
    they differ from the graph's layouts; None draws in the graph's."""

    def __init__(self, module, draws=None):
        super().__init__(module)
        self.draws = None if draws is None else list(draws)
        # The strides drawn in, in order (Step.draws).
        self.drawn = []

    def call_function(self, target, args, kwargs):
        # Functionalization turned dropout's `empty_like(x).bernoulli_(p)`
        # into `bernoulli.p`, which fills a contiguous tensor. PyTorch's
        # generator fills in memory order, so draw in eager's layout of x:
        # x's own here, unless eager laid it out otherwise (ATen's
        # upsampling of a 1x1 map is contiguous, PyTorch's decomposition
        # channels-last).
        if target is aten.bernoulli.p:
            x = args[0]
            mask = torch.empty_strided(x.shape, self.draws.pop(0), dtype=x.dtype) \
                if self.draws else torch.empty_like(x)
            self.drawn.append(tuple(mask.stride()))
            return mask.bernoulli_(*args[1:], **kwargs)
        # A slice_scatter dropped for its source (_drop_whole_slices) leaves
        # that source's layout, where the scatter's result was contiguous.
        return super().call_function(_view_as_reshape(target, args), args, kwargs)


class _Record(Run):
    """Runs a graph, recording every node's value as a meta tensor in meta['val']."""

    def run_node(self, n):
        value = super().run_node(n)
        n.meta["val"] = _as_meta(value)
        return value


class _Replay(torch.fx.Interpreter):
    """Runs the first-stage graph, restoring each node's scope for the
    second. Complex values run as real pairs (complex.py): the complex
    arguments come as their pairs."""

    def __init__(self, module, scope):
        super().__init__(module)
        self.scope = scope
        # A CaptureError raised here is the user's message, as it is.
        self.extra_traceback = False

    def run_node(self, n):
        fqn, phase = n.meta.get("spmd_fqn", ""), n.meta.get("spmd_phase", "forward")
        self.scope.set(fqn, phase)
        self.scope.replicated = n.meta.get("spmd_replicated", False)
        if n.op == "get_attr":
            return complex_pairs.as_pairs(super().run_node(n))
        if n.op == "call_function" and (complex_pairs.node_is_complex(n) or any(
                complex_pairs.node_is_complex(a) for a in n.all_input_nodes)):
            return complex_pairs.run_node(n, self.env, "%s (%s)" % (describe(fqn), phase))
        return super().run_node(n)

    def call_function(self, target, args, kwargs):
        # A decomposition may lay out a result other than eager did (BLOOM's
        # fused QKV), so that a view eager could take needs a copy here.
        return super().call_function(_view_as_reshape(target, args), args, kwargs)


def default_loss(output):
    """The loss when the factory gives no loss_fn: a tensor output's sum, or
    the `loss` a model computed itself (a ModelOutput or dict with a `loss`,
    as transformers' models return when given `labels`)."""
    if isinstance(output, torch.Tensor):
        return output.sum()
    loss = output.get("loss") if isinstance(output, dict) else None
    if isinstance(loss, torch.Tensor):
        return loss
    if isinstance(output, dict):
        raise CaptureError("the model's output is a %s without a 'loss' (keys: %s): pass the "
                           "model what it computes its loss from (e.g. labels) or give a "
                           "loss_fn" % (type(output).__name__, ", ".join(map(str, output))))
    raise CaptureError("the model's output is a %s, not a tensor: the default loss is "
                       "output.sum(); give a loss_fn" % type(output).__name__)


def batch_size(factory):
    """The batch size: dim 0 of the first tensor input."""
    first = next((t for _, t in factory.tensors("input")), None)
    return first.shape[0] if first is not None and first.dim() > 0 else None


def is_batched(tensor, batch):
    return batch is not None and tensor.dim() > 0 and tensor.shape[0] == batch


def step_args(factory, optimizer, accumulate=1, grads=None):
    """The arguments of @train_step, in order: parameters, buffers, optimizer
    state (per parameter, per state key), with `grads` ({FQN: .grad or None}
    of the trainable parameters) each one's carried gradient (`<fqn>.grad`,
    zeros and `holds_none` for None), the optimizer's hyperparameter
    inputs (`optimizer.lr` and, per further parameter group g,
    `optimizer.lr.<g>`, whose `slot` is g; `optimizer.step`), inputs,
    targets. An eval step has no `optimizer` (None): no state or
    hyperparameter of one.

    Inputs and targets are named `input.<key>` / `target.<key>`, the key
    being the position (`input.0`) or the keyword (`input.input_ids`). With
    `accumulate` K > 1 the step runs K micro-steps (gradient accumulation,
    DDP's no_sync): every input and target whose dim 0 is the batch size (dim
    0 of the first input) is split into K equal micro-batches,
    `micro<k>.input.<key>`, micro-batch by micro-batch; the others are shared
    by every micro-step."""
    params = [(n, p) for n, p in factory.model.named_parameters()]
    args = [Arg(n, "param", p.detach().clone()) for n, p in params]
    args += [Arg(n, "buffer", b.detach().clone()) for n, b in factory.model.named_buffers()]
    if optimizer is not None:
        args += [Arg("%s.%s" % (n, key), "optim_state",
                     optimizer.of(n)[1].initial_state(key, p))
                 for n, p in params if p.requires_grad and optimizer.of(n) is not None
                 for key in optimizer.of(n)[1].keys_of(p)]
        if grads is not None:
            args += [Arg(n + ".grad", "grad", torch.zeros_like(p.detach()) if grads[n] is None
                         else grads[n].detach().clone(), holds_none=grads[n] is None)
                     for n, p in params if p.requires_grad]
        args += [Arg(fqn, role, value, group) for fqn, role, group, value in optimizer.inputs()]
    tensors = [("input", k, t) for k, t in factory.tensors("input")] + \
        [("target", k, t) for k, t in factory.tensors("target")]
    if accumulate == 1:
        return args + [Arg("%s.%s" % (role, k), role, t.detach().clone(), k)
                       for role, k, t in tensors]
    batch = batch_size(factory)
    if batch is None or batch % accumulate:
        raise CaptureError("--accumulate %d needs a batch (dim 0 of the first input) that "
                           "divides into %d micro-batches, got %s" % (
                               accumulate, accumulate, batch))
    args += [Arg("%s.%s" % (role, k), role, t.detach().clone(), k)
             for role, k, t in tensors if not is_batched(t, batch)]
    chunks = [(role, k, t.detach().chunk(accumulate))
              for role, k, t in tensors if is_batched(t, batch)]
    for m in range(accumulate):
        args += [Arg("micro%d.%s.%s" % (m, role, k), role, pieces[m].clone(), k, m)
                 for role, k, pieces in chunks]
    return args


def micro_steps(args, accumulate):
    """Per micro-step, the argument index of each of the factory's tensor
    inputs and targets: ({input key: index}, {target key: index})."""
    steps = []
    for m in range(accumulate):
        picks = {"input": {}, "target": {}}
        for j, a in enumerate(args):
            if a.role in picks and a.micro in (None, m):
                picks[a.role][a.slot] = j
        steps.append((picks["input"], picks["target"]))
    return steps


def forward(factory, call, values, inputs):
    """`call(args, kwargs)` on the factory's inputs, the tensors taken from
    `values` by a micro-step's argument indices (micro_steps)."""
    args, kwargs = call_arguments(factory.inputs, {k: values[j] for k, j in inputs.items()})
    return call(args, kwargs)


def loss_of(factory, output, values, targets):
    """The factory's loss of `output` on its targets (as forward())."""
    if factory.loss_fn is None:
        return default_loss(output)
    args, kwargs = call_arguments(factory.targets, {k: values[j] for k, j in targets.items()})
    return factory.loss_fn(output, *args, **kwargs)


@dataclasses.dataclass(frozen=True)
class MixedPrecision:
    """FSDP2's MixedPrecisionPolicy(param_dtype, cast_forward_inputs=True) on
    one device: forward and backward run on the floating-point parameters
    cast to `param_dtype` (FSDP2 gathers and computes them in it), the root
    module's floating-point forward inputs are cast to it too, and autograd
    carries each gradient back through the cast, so the optimizer updates the
    fp32 parameters with fp32 gradients and fp32 state. Buffers keep their
    dtype, as FSDP2 leaves them. BatchNorm modules keep fp32 parameters (FSDP1
    MixedPrecision's default `_module_classes_to_ignore`; ATen's batch norm
    takes a bf16 input with fp32 parameters and statistics, not bf16
    parameters with fp32 statistics). The model's own code decides the rest
    (a softmax it upcasts stays in fp32). Where the distributed step reduces
    a gradient, before or after the cast back, is the reduce dtype of
    --spmd-parallelize."""
    param_dtype: torch.dtype

    def params(self, tensors, model):
        """`tensors` (fqn -> parameter of `model`) with the floating-point
        ones cast, but BatchNorm's."""
        kept = {"%s.%s" % (m, n) if m else n
                for m, module in model.named_modules()
                if isinstance(module, nn.modules.batchnorm._BatchNorm)
                for n, _ in module.named_parameters(recurse=False)}
        return {n: t.to(self.param_dtype) if t.is_floating_point() and n not in kept else t
                for n, t in tensors.items()}

    @contextlib.contextmanager
    def forward_inputs(self, model):
        """Casts the floating-point tensors among `model`'s forward inputs."""
        def cast(value):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                return value.to(self.param_dtype)
            return value

        def hook(module, args, kwargs):
            return (torch.utils._pytree.tree_map(cast, args),
                    torch.utils._pytree.tree_map(cast, kwargs))
        handle = model.register_forward_pre_hook(hook, with_kwargs=True)
        try:
            yield
        finally:
            handle.remove()

    def describe(self):
        return {"param_dtype": str(self.param_dtype)[6:], "cast_forward_inputs": True}


@contextlib.contextmanager
def _cell_rnns(model):
    """nn.LSTM, nn.GRU and nn.RNN on CPU run as oneDNN's fused layer
    (mkldnn_rnn_layer and its backward), which the dialect has no op for.
    With oneDNN off for the trace, ATen writes them as their cells
    (_rnn_impl): per time step the gates' matrix products, sigmoid, tanh
    and products, which it has. Only the trace runs so; eager PyTorch keeps
    its kernels. A PackedSequence input is refused by name: its batch size
    per time step comes from the data."""
    def refuse_packed(fqn):
        def hook(module, args):
            if args and isinstance(args[0], nn.utils.rnn.PackedSequence):
                raise CaptureError(
                    "module '%s' (%s) is given a PackedSequence: its batch size at each time "
                    "step comes from the sequence lengths, data that a static graph cannot "
                    "depend on; pass the padded batch (and mask the padding) instead"
                    % (fqn, type(module).__name__))
        return hook
    hooks = [m.register_forward_pre_hook(refuse_packed(fqn)) for fqn, m in model.named_modules()
             if isinstance(m, nn.RNNBase)]
    enabled = torch.backends.mkldnn.enabled
    torch.backends.mkldnn.enabled = False
    try:
        yield
    finally:
        torch.backends.mkldnn.enabled = enabled
        for h in hooks:
            h.remove()


def trace(factory, optimizer, args, seed, accumulate=1, fake=False,
          mixed_precision=None):
    """Traces one training step on fake tensors into a functional FX graph
    of ATen ops and runs it once on the real values after
    torch.manual_seed(seed) (with `fake`, runs nothing: only shapes and
    dtypes are known, and the step's outputs are meta tensors). With `accumulate` K, the step
    is K forward/backward micro-steps on the micro-batches of `args`
    (step_args), each loss divided by K, the gradients summed, then one
    optimizer update: PyTorch's gradient accumulation. The loss result is the
    sum of the divided losses.

    With `mixed_precision` (MixedPrecision) forward and backward compute in
    its param_dtype.

    Raises CaptureError for a non-scalar loss, data-dependent control flow
    and in-place updates of anything but buffers, naming the module."""
    model, scope = factory.model, _Scope()
    index = {(a.role, a.fqn): i for i, a in enumerate(args)}
    by_role = {r: [i for i, a in enumerate(args) if a.role == r] for r in ("param", "buffer")}
    requires_grad = {n: p.requires_grad for n, p in model.named_parameters()}
    trainable = [] if factory.eval_step is not None else \
        [i for i in by_role["param"] if requires_grad[args[i].fqn]]
    # The model's own parameters, which a user's optimizer names.
    param_index = {id(p): index["param", n] for n, p in model.named_parameters()}
    results = [] if factory.eval_step is not None else [Result("loss", None)]
    returned = []  # the user's train_step's (spec, leaves), as Step.returned
    # A carried gradient's argument, by its parameter's (step_args' grads).
    grad_args = {index["param", a.fqn[:-len(".grad")]]: j for j, a in enumerate(args)
                 if a.role == "grad"}
    user_info = {}  # what a user's step did (_UserStep.info), for Step

    def update(flat, grads, groups=None):
        """The optimizer step on `grads` (one per trainable parameter, None
        where it has none): [(argument index, new value)] of the updated
        parameters, then of their state. `groups` (indices into the
        optimizer's parameter groups; None: all) limits it to theirs: one
        optimizer's step() of several (Optimizers)."""
        new_params, new_state = [], []
        lrs = {a.slot: flat[j] for j, a in enumerate(args) if a.role == "lr"}
        # {group: {name: input}} of the dynamic hyperparameters
        # (optimizer.<name>[.<group>]).
        scheduled = collections.defaultdict(dict)
        for j, a in enumerate(args):
            if a.role == "hyperparameter":
                scheduled[a.slot][a.fqn.split(".")[1]] = flat[j]
        count = next((flat[j] for j, a in enumerate(args) if a.role == "step"), None)
        with torch.no_grad():
            if optimizer.clip_grad_norm is not None:
                scope.set("", "optimizer")
                grads = optimizer.clip(grads)
            for i, grad in zip(trainable, grads):
                fqn = args[i].fqn
                group = optimizer.of(fqn)
                # An unused parameter, or one the optimizer does not have:
                # torch.optim leaves it as it is too.
                if grad is None or group is None or \
                        (groups is not None and group[0] not in groups):
                    continue
                scope.set(owner(fqn), "optimizer")
                state_idx = [index[("optim_state", "%s.%s" % (fqn, k))]
                             for k in group[1].keys_of(flat[i])]
                param, state = flat[i].clone(), [flat[j].clone() for j in state_idx]
                # A complex parameter is updated on its real pairs, its
                # gradient's and its state's, as torch.optim does
                # (_view_as_real): in place, through the views.
                real = (lambda t: torch.view_as_real(t) if t.is_complex() else t)
                group[1].update(real(param), real(grad), [real(t) for t in state],
                                lrs[group[0]], count, scheduled[group[0]])
                new_params.append((i, param))
                new_state += list(zip(state_idx, state))
        return new_params + new_state

    def micro_step(flat, inputs, targets):
        """(loss, gradients) of a micro-step; of a user's train_step, (loss,
        updates, what it returned) (its optimizer.step() runs `update`)."""
        scope.set("", "forward")
        traced = {k: flat[i] for k, i in param_index.items()}

        def held(params):
            """What the model holds for `params` (FQN -> tensor): mixed
            precision's bf16 copies, or the tensors themselves."""
            return params if mixed_precision is None else mixed_precision.params(params, model)

        def holding_updates(updates):
            """(the model holding the parameters that `updates` (argument
            index, new value) gives, as an in-place optimizer step leaves
            them, {argument index: the tensor it holds}): trainable leaves
            still holding their .grad."""
            tensors = {i: t.detach().requires_grad_(flat[i].requires_grad)
                       for i, t in updates if args[i].role == "param"}
            for i, t in tensors.items():
                t.grad = flat[i].grad
            return _reparametrize_module(model, held({args[i].fqn: t for i, t in tensors.items()}),
                                         tie_weights=True), tensors
        tensors = held({args[i].fqn: flat[i] for i in by_role["param"]})
        tensors.update({args[i].fqn: flat[i] for i in by_role["buffer"]})
        # The model holds the traced tensors through backward too: activation
        # checkpointing re-runs its forward there.
        with _reparametrize_module(model, tensors, tie_weights=True), \
                mixed_precision.forward_inputs(model) if mixed_precision is not None \
                else contextlib.nullcontext():
            if factory.eval_step is not None:
                with torch.no_grad():
                    return forward(factory, lambda a, kw: factory.eval_step(model, *a, **kw),
                                   flat, inputs)
            if factory.train_step is not None:
                user = _UserStep(factory, flat, trainable, traced, mixed_precision is not None,
                                 functools.partial(update, flat), scope, holding_updates,
                                 {i: args[i].fqn.rpartition(".")[0] for i in trainable},
                                 {i: None if args[j].holds_none else flat[j]
                                  for i, j in grad_args.items()} if grad_args else None)
                out = user.run(inputs)
                user_info.update(user.info)
                user_info["grads"] = [(grad_args[i], g) for i, g in user.info["grads"]]
                return out
            out = forward(factory, lambda a, kw: model(*a, **kw), flat, inputs)
            scope.set("", "loss")
            loss = loss_of(factory, out, flat, targets)
            _loss_check(loss)
            if accumulate > 1:
                loss = loss / accumulate
            scope.set("", "backward")
            return loss, torch.autograd.grad(loss, [flat[i] for i in trainable],
                                             allow_unused=True)

    def returns(out, first):
        """The tensors among what a user's step returned, detached; its
        structure, as Step.returned, recorded once (they are results `first`
        on)."""
        leaves, spec = torch.utils._pytree.tree_flatten(out)
        outputs = [t.detach() for t in leaves if isinstance(t, torch.Tensor)]
        if not returned:
            k = iter(range(first, first + len(outputs)))
            returned.append((spec, [ResultIndex(next(k)) if isinstance(t, torch.Tensor)
                                    else t for t in leaves]))
            results.extend(Result("output.%d" % k, None, "output") for k in range(len(outputs)))
        return outputs

    def step(*flat):
        outputs = []
        if factory.eval_step is not None:
            outputs = returns(micro_step(flat, *micro_steps(args, 1)[0]), 0)
            if not outputs:
                raise CaptureError("eval_step returns no tensor: return what it computes "
                                   "(a loss, metrics, predictions)")
            return tuple(outputs)
        if factory.train_step is not None:
            loss, updates, out = micro_step(flat, *micro_steps(args, 1)[0])
            updates = (updates or []) + user_info["grads"]
            if out is not loss:
                outputs = returns(out, 1)
        else:
            loss, grads = None, None
            for inputs, targets in micro_steps(args, accumulate):
                micro_loss, micro_grads = micro_step(flat, inputs, targets)
                if grads is None:
                    loss, grads = micro_loss, list(micro_grads)
                    continue
                # As autograd accumulates into .grad: the first gradient as is,
                # later ones added, by the root (not the module whose backward
                # ran last).
                scope.set("", "backward")
                loss = loss + micro_loss
                grads = [g if m is None else m if g is None else g + m
                         for g, m in zip(grads, micro_grads)]
            updates = update(flat, grads)
        if len(results) == 1 + len(outputs):  # make_fx runs the step once
            results.extend(Result(args[i].fqn, i) for i, _ in updates)
        return (loss, *outputs, *(t for _, t in updates))

    # Always on fake tensors: the model's Python code then sees what it sees
    # under torch.compile and torch.export (transformers' `is_tracing`
    # picks its trace-safe paths rather than reading values), and a value
    # read into Python is a symbol, reported below. The graph then runs
    # once on the real values.
    flat = [a.value.clone().requires_grad_(i in trainable) for i, a in enumerate(args)]
    if fake and any(t.is_meta for t in flat):
        # Values built on the meta device (capture --meta) trace as CPU
        # tensors without data, so that ATen picks the CPU kernels (its fused
        # attention among them) as for real values.
        fake_mode = FakeTensorMode()
        with fake_mode:
            flat = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="cpu")
                    .requires_grad_(t.requires_grad) if t.is_meta else fake_mode.from_tensor(t)
                    for t in flat]
    clear_model_caches(model)
    try:
        with _tag_nodes(scope), _module_scopes(model, scope), _AutogradScopes(scope), \
                _FunctionDecompositions(), _reentrant_checkpoint_replayed(), _cell_rnns(model):
            raw = make_fx(step, tracing_mode="fake", _allow_non_fake_inputs=True)(*flat)
        # On fake tensors a value read into Python is a symbol, not an
        # error; this trace ran the user's code, so its node knows the line.
        for node in raw.graph.nodes:
            if node.target is aten._local_scalar_dense.default:
                raise _data_dependent(node.meta["spmd_fqn"], node.meta["spmd_phase"],
                                      node.meta["spmd_where"])
            if _updates_constant(node):
                raise CaptureError(
                    "%s (%s)%s: train_step updates in place a tensor of shape %s that is neither the "
                    "model's nor the batch's (a global, or a closure's: an EMA copy kept "
                    "outside the model); the compiled step holds only the model's state: "
                    "make the tensor part of the model (a submodule or a buffer), or pass "
                    "it in the batch" % (
                        describe(node.meta["spmd_fqn"]), node.meta["spmd_phase"],
                        node.meta.get("spmd_where", ("", ""))[0],
                        list(getattr(raw, node.args[0].target).shape)))
        constants = _read_constants(raw)
        _refuse_complex_results(raw, results)
        # The zero .grads a user's step starts from (_UserStep) are dead
        # unless its code read them.
        for node in list(raw.graph.nodes):
            if node.target is aten.zeros_like.default and not node.users:
                raw.graph.erase_node(node)
        _accumulate_early(raw.graph)
        raw.recompile()
        with _tag_nodes(scope):
            gm = make_fx(functionalize(_Replay(raw, scope).run, remove="mutations"),
                         decomposition_table=decompositions(),
                         tracing_mode="fake", _allow_non_fake_inputs=True)(
                             *[complex_pairs.as_pairs(t) if t.is_complex() else t.clone()
                               for t in flat])
    except CaptureError:
        raise
    except RuntimeError as e:
        if "value out of a tracing tensor" in str(e) or "data-dependent" in str(e):
            raise _data_dependent(scope.fqn, scope.phase,
                                  _user_line(traceback.extract_tb(e.__traceback__))) from None
        raise
    finally:
        clear_model_caches(model)
    # A value that a decomposition reads.
    for node in gm.graph.nodes:
        if node.target is aten._local_scalar_dense.default:
            raise _data_dependent(node.meta.get("spmd_fqn", ""),
                                  node.meta.get("spmd_phase", "forward"))
    _drop_whole_slices(gm.graph)
    _updates_to_results(gm, args, results,
                        frozen={i for i in by_role["param"]
                                if i not in {r.updates for r in results}})
    done = dict(stepped=user_info["stepped"],
                grads_after=frozenset(args[i].fqn for i in user_info["grads_after"]),
                grads_dropped=frozenset(args[i].fqn for i in user_info["grads_dropped"])) \
        if user_info else {}
    for a in args:
        if a.value.is_complex():
            a.value, a.complex = complex_pairs.as_pairs(a.value), True
    if fake:
        # make_fx recorded fake tensors: keep their shapes and dtypes only.
        for node in gm.graph.nodes:
            node.meta["val"] = _as_meta(node.meta.get("val"))
        output = next(n for n in gm.graph.nodes if n.op == "output")
        outputs = [o.meta["val"] for o in output.args[0]]
        return Step(gm, args, results, outputs, module_records(model),
                    returned[0] if returned else None, constants, **done)
    torch.manual_seed(seed)
    record = _Record(gm)
    outputs = record.run(*[a.value.clone() for a in args])
    return Step(gm, args, results, list(outputs), module_records(model),
                returned[0] if returned else None, constants, draws=tuple(record.drawn),
                **done)


def _accumulate_early(graph):
    """Moves each add of a gradient into a .grad (`spmd_accumulates`: the
    carried gradient or an earlier micro-batch's) up to right after its
    operands, as autograd's AccumulateGrad runs as soon as the parameter's
    gradient is ready: traced after the whole backward, the adds would hold
    every gradient's reduction until backward ends."""
    waiting = {n for n in graph.nodes if n.meta.get("spmd_accumulates")}
    if not waiting:
        return
    order, placed = [], set()

    def place(node):
        order.append(node)
        placed.add(node)
        for user in node.users:
            if user in waiting and all(i in placed for i in user.all_input_nodes):
                waiting.remove(user)
                place(user)

    for node in list(graph.nodes):
        if node not in waiting and node not in placed:
            place(node)
    for before, node in zip(order, order[1:]):
        before.append(node)


def _refuse_complex_results(raw, results):
    """Raises CaptureError for a complex tensor that a user's train_step
    returns: the step carries complex values as real pairs, and gives back
    real tensors only (complex parameters and state it updates stay their
    pairs inside)."""
    output = next(n for n in raw.graph.nodes if n.op == "output")
    for r, value in zip(results, output.args[0]):
        if r.updates is None and complex_pairs.node_is_complex(value):
            raise CaptureError(
                "train_step returns a complex tensor ('%s', %s): spmd computes on complex "
                "values as real pairs and returns real tensors only: return "
                "torch.view_as_real of it" % (r.fqn, value.meta["val"].dtype))


def _loss_check(loss):
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0 or not loss.is_floating_point():
        raise CaptureError("the loss must be a 0-dim floating-point tensor, got %s" % (
            "a %s tensor of shape %s" % (loss.dtype, tuple(loss.shape))
            if isinstance(loss, torch.Tensor) else "a " + type(loss).__name__))


class _UserStep:
    """A user's train_step(model, optimizer, *inputs) traced with PyTorch's
    gradient semantics on the parameters the traced model holds:

    - `loss.backward()` adds torch.autograd.grad of the loss (with respect to
      the trainable parameters) into each parameter's `.grad`, as autograd
      accumulates; it may run several times (gradient accumulation);
    - code between backward() and `optimizer.step()` sees and may change the
      `.grad`s (torch.nn.utils.clip_grad_norm_, scaling); step() runs the
      update on them as it finds them, once, after a backward() (the model
      keeps the parameters the step started from);
    - `optimizer.zero_grad()` and `model.zero_grad()` clear them;
      `optimizer.param_groups` holds the traced parameters.

    Each call starts from the gradients the previous call left. Without
    `carried`, each parameter starts with a zero `.grad` that stands for the
    previous call's; backward() replaces it and notes that it did. A step
    that adds into them (no zero_grad before its first backward) and leaves
    gradients behind (none after its step) carries one call's gradients
    into the next, as PyTorch does: that raises CarriesGradients (for the
    parameters the optimizer has: the gradients of the others are not
    used; a .grad zeroed in place is still set). With `carried` ({index
    into flat: the traced `grad` argument, None for a None .grad}) the
    parameters start from those, backward() adds into them, step() may be
    called by none of the optimizers (the step only accumulates), and the
    .grads the step leaves are its `grad` results.

    With mixed precision the model holds bf16 copies of the parameters,
    which have no `.grad`: reading one raises CaptureError (the fp32
    parameters are in optimizer.param_groups)."""

    def __init__(self, factory, flat, trainable, traced, mixed, update, scope,
                 holding_updates, owners, carried=None):
        self.factory, self.flat, self.trainable, self.mixed = factory, flat, trainable, mixed
        self.owners = owners  # index into flat -> the FQN of its module
        self.carried = carried
        self.scope = scope  # the tracer's (_Scope): phases follow the user's code
        self.traced = traced  # id(the model's parameter) -> its traced tensor
        self.update = update  # the optimizer step on the gradients (trace's)
        # After optimizer.step() the model holds the updated parameters, as
        # eager's in-place step leaves it: code after it (an EMA copy, a
        # metric, a constraint) reads them. Its context (holding_updates of
        # the updates) lasts until train_step returns; `held` are the
        # tensors the model then holds, by index into flat.
        self.holding_updates, self.after_step = holding_updates, contextlib.ExitStack()
        self.held = {}
        self.incoming = dict(carried) if carried is not None else \
            {i: torch.zeros_like(flat[i]) for i in trainable}
        self.added_to_incoming = set()  # indices into flat
        # For Step: whether step() ran, the FQNs whose .grad is left set, and
        # [(index into flat, the new .grad)] of the carried ones it changed.
        self.info = {}
        self.losses, self.updates = [], None
        self.steps = collections.Counter()  # step() calls, by optimizer

    def grad(self, i):
        """flat[i].grad; without `carried`, None where it is the previous
        call's (untouched)."""
        g = self.flat[i].grad
        return None if g is self.incoming[i] and self.carried is None else g

    def backward(self, loss):
        _loss_check(loss)
        self.scope.set("", "backward")
        grads = torch.autograd.grad(loss, [self.flat[i] for i in self.trainable],
                                    allow_unused=True)
        for i, g in zip(self.trainable, grads):
            if g is None:
                continue
            held = self.flat[i].grad
            if held is self.incoming[i] and held is not None:
                self.added_to_incoming.add(i)
                if self.carried is None:
                    held = None
            if held is not None:
                # AccumulateGrad's add belongs to the parameter's module
                # (its FSDP unit), not to the last module backward left.
                self.scope.set(self.owners[i], "backward")
                self.scope.accumulates = True
                g = held + g
                self.scope.accumulates = False
            self.flat[i].grad = g
        self.losses.append(loss)
        # What follows works on the gradients, as the optimizer does, until
        # the model runs again (run() sets "forward" then).
        self.scope.set("", "optimizer")

    def clear(self, tensors, set_to_none):
        for t in tensors:
            if t.grad is not None:
                t.grad = None if set_to_none else torch.zeros_like(t)

    def run(self, inputs):
        """(loss, the optimizer step's updates, what train_step returned;
        that is the loss itself when it returned the loss alone)."""
        given = self.factory.optimizer
        optimizer = given.rebuild(lambda k, part: _OptimizerCalls(self, k, part,
                                                                  given.groups_of(k))) \
            if isinstance(given, Optimizers) else _OptimizerCalls(self)
        count = len(given.parts) if isinstance(given, Optimizers) else 1
        model = self.factory.model
        tensor_backward = torch.Tensor.backward

        def backward(loss, gradient=None, retain_graph=None, create_graph=False, inputs=None):
            if gradient is not None or create_graph or inputs is not None:
                raise CaptureError("loss.backward() with gradient, create_graph or inputs "
                                   "cannot be traced: call loss.backward() on the scalar loss")
            self.backward(loss)

        for i in self.trainable:
            self.flat[i].grad = self.incoming[i]
        forward_phase = model.register_forward_pre_hook(
            lambda module, inputs: setattr(self.scope, "phase", "forward"))
        torch.Tensor.backward = backward
        model.zero_grad = lambda set_to_none=True: self.clear(
            [self.flat[i] for i in self.trainable], set_to_none)
        try:
            with warnings.catch_warnings(), _one_reduction_norms(), _branch_free_averaging(), \
                    self.after_step:
                if self.mixed:
                    warnings.filterwarnings("error", message=_NON_LEAF_GRAD)
                try:
                    out = forward(self.factory, lambda a, kw: self.factory.train_step(
                        model, optimizer, *a, **kw), self.flat, inputs)
                except UserWarning as e:
                    if not re.match(_NON_LEAF_GRAD, str(e)):
                        raise
                    raise CaptureError(
                        "train_step reads a parameter's .grad through the model, whose "
                        "parameters are the bf16 copies mixed precision computes with (they "
                        "have no .grad): use optimizer.param_groups' parameters, or "
                        "spmd.compile's clip_grad_norm=") from None
        finally:
            torch.Tensor.backward = tensor_backward
            forward_phase.remove()
            del model.zero_grad
        # A .grad cleared through the model after the step (`p.grad =
        # None` over model.parameters()) is cleared.
        for i, t in self.held.items():
            if t.grad is None:
                self.flat[i].grad = None
        if not self.losses:
            raise CaptureError("train_step never calls loss.backward()")
        # A parameter the optimizer does not have may keep adding: its
        # gradient is not used.
        kept = {id(self.traced.get(id(p), p)) for g in self.factory.optimizer.param_groups
                for p in g["params"]}
        leaves = any(self.grad(i) is not None and id(self.flat[i]) in kept
                     for i in self.trainable)
        # A step that steps no optimizer only accumulates gradients, for a
        # later call: with gradients carried from call to call.
        accumulates = not any(self.steps.values())
        reads = any(id(self.flat[i]) in kept for i in self.added_to_incoming)
        if self.carried is None and leaves and (accumulates or reads):
            raise CarriesGradients(
                "train_step %s and leaves them set for the next call" % (
                    "adds its gradients into the .grads an earlier call left" if reads else
                    "calls no optimizer.step() after its backward()"), reads)
        for k in range(count):
            calls = self.steps[k]
            if calls == 1 or accumulates and self.carried is not None:
                continue
            if self.carried is not None and calls == 0:
                raise CaptureError(
                    "train_step calls the step() of optimizer %d (%s) 0 times but another "
                    "optimizer's once: a call steps every optimizer once, or (accumulating "
                    "gradients into the next call) none" % (k, type(given.parts[k]).__name__))
            if count == 1:
                raise CaptureError("train_step calls optimizer.step() %d times: it must call "
                                   "it once, after loss.backward()" % calls)
            raise CaptureError(
                "train_step calls the step() of optimizer %d (%s) %d times: it must call "
                "each optimizer's step() once, after loss.backward()"
                % (k, type(given.parts[k]).__name__, calls))
        left = [i for i in self.trainable if self.grad(i) is not None]
        carrying = self.carried is not None
        self.info = {
            "stepped": not accumulates,
            "grads_after": frozenset(left if carrying else ()),
            "grads_dropped": frozenset(() if carrying else
                                       (i for i in left if id(self.flat[i]) in kept)),
            "grads": [(i, self.flat[i].grad) for i in (left if carrying else ())
                      if self.flat[i].grad is not self.incoming[i]]}
        for i in self.trainable:
            self.flat[i].grad = None
        if isinstance(out, torch.Tensor) and out.dim() == 0 and out.is_floating_point():
            return out, self.updates, out
        loss = sum(self.losses[1:], self.losses[0])
        return loss, self.updates, loss if out is None else out


# PyTorch's warning on reading the .grad of a tensor autograd does not fill.
_NON_LEAF_GRAD = r"The \.grad attribute of a Tensor that is not a leaf Tensor"


class Optimizers:
    """Several torch.optim optimizers that one train_step steps, each once,
    seen as one optimizer: torch.optim.Muon for the matrices and AdamW for
    the rest (Muon takes 2-D parameters only), or any other split.
    `structure` is what the user passes in place of the optimizer (a list,
    tuple or dict of optimizers; each parameter in one of them at most);
    train_step gets the same structure back while it is traced, each
    optimizer's step() updating its own parameter groups.
    `param_groups` are theirs in order, `state` finds a parameter's state
    in its optimizer's.

    Raises CaptureError for a structure with something other than an
    optimizer in it, no optimizer, or a parameter in two of them."""

    def __init__(self, structure):
        self.structure = structure
        self.parts, self.spec = torch.utils._pytree.tree_flatten(structure)
        if not self.parts:
            raise CaptureError("the optimizers (a %s) hold no optimizer"
                               % type(structure).__name__)
        for part in self.parts:
            if not isinstance(part, torch.optim.Optimizer):
                raise CaptureError("the optimizers hold a %s, which is not a torch.optim "
                                   "optimizer" % type(part).__name__)
        seen = {}
        for k, part in enumerate(self.parts):
            for p in (p for g in part.param_groups for p in g["params"]):
                if seen.setdefault(id(p), k) != k:
                    raise CaptureError(
                        "a parameter of shape %s is in optimizers %d (%s) and %d (%s): "
                        "each parameter may be updated by one optimizer" % (
                            list(p.shape), seen[id(p)], type(self.parts[seen[id(p)]]).__name__,
                            k, type(part).__name__))
        self.state = _PartStates(self.parts, seen)

    def same(self, structure):
        """Whether `structure` holds these optimizers, in this order."""
        parts, spec = torch.utils._pytree.tree_flatten(structure)
        return spec == self.spec and len(parts) == len(self.parts) and \
            all(a is b for a, b in zip(parts, self.parts))

    @property
    def param_groups(self):
        return [g for part in self.parts for g in part.param_groups]

    def owner(self, group):
        """The optimizer whose parameter group `group` is."""
        return next(part for part in self.parts
                    if any(g is group for g in part.param_groups))

    def groups_of(self, k):
        """The indices into param_groups of optimizer k's groups."""
        start = sum(len(part.param_groups) for part in self.parts[:k])
        return frozenset(range(start, start + len(self.parts[k].param_groups)))

    def rebuild(self, leaf):
        """The user's structure with leaf(k, optimizer k) for each."""
        return torch.utils._pytree.tree_unflatten(
            [leaf(k, part) for k, part in enumerate(self.parts)], self.spec)

    @property
    def _opt_called(self):
        return all(getattr(part, "_opt_called", False) for part in self.parts)

    @_opt_called.setter
    def _opt_called(self, value):
        # What torch.optim's step() notes for each one's LR schedulers.
        for part in self.parts:
            part._opt_called = value


class _PartStates:
    """Optimizers' `state`: a parameter's is its own optimizer's (that
    optimizer's defaultdict entry, which writing into creates); `owners`
    is {id(parameter): index of its optimizer}."""

    def __init__(self, parts, owners):
        self.parts, self.owners = parts, owners

    def _part(self, param):
        k = self.owners.get(id(param))
        return None if k is None else self.parts[k]

    def get(self, param, default=None):
        part = self._part(param)
        return default if part is None else part.state.get(param, default)

    def __getitem__(self, param):
        part = self._part(param)
        if part is None:
            raise KeyError("a parameter that no optimizer has")
        return part.state[param]


class _OptimizerCalls:
    """What a user's train_step gets as its optimizer while it is traced:
    the real optimizer's attributes (state, defaults, ...), its param_groups
    holding the traced parameters, step() running the traced update on
    the gradients (Optimizer.update) and zero_grad() clearing them. Of
    Optimizers, one per optimizer: `k` its index, `part` the optimizer,
    `groups` the indices of its groups among all of theirs."""

    def __init__(self, user, k=0, part=None, groups=None):
        self._user, self._k, self._groups = user, k, groups
        self._part = user.factory.optimizer if part is None else part

    @property
    def param_groups(self):
        """torch's param_groups holding the traced parameters: after step(),
        the updated ones, as the model holds them."""
        user = self._user
        held = {id(user.flat[i]): t for i, t in user.held.items()}
        return [dict(g, params=[held.get(id(user.traced.get(id(p), p)),
                                         user.traced.get(id(p), p)) for p in g["params"]])
                for g in self._part.param_groups]

    def step(self, closure=None):
        user = self._user
        if closure is not None:
            raise CaptureError("optimizer.step(closure): a closure (LBFGS-style) cannot be "
                               "traced; call loss.backward() and optimizer.step() instead")
        if not user.losses:
            raise CaptureError("train_step calls optimizer.step() before loss.backward()")
        user.steps[self._k] += 1
        if user.steps[self._k] == 1:
            # What the code did to the .grads of the parameters the model
            # holds updated (an earlier optimizer's zero_grad) carries over
            # to the tensors it holds next.
            for i, t in user.held.items():
                user.flat[i].grad = t.grad
            # Parameters first, then state, as update() gives them; the
            # model holds every optimizer's updates so far.
            updates = user.update([user.grad(i) for i in user.trainable], self._groups)
            params = set(user.trainable)
            user.updates = sorted((user.updates or []) + updates,
                                  key=lambda u: u[0] not in params)
            holding, user.held = user.holding_updates(user.updates)
            user.after_step.enter_context(holding)
        # The update tagged each parameter's ops with its module; what
        # follows belongs to the step.
        user.scope.set("", "optimizer")

    def zero_grad(self, set_to_none=True):
        self._user.clear([p for g in self.param_groups for p in g["params"]], set_to_none)

    def __getattr__(self, name):
        return getattr(self._part, name)


# Where PyTorch, the standard library and spmd's packages (spmd_capture and
# spmd, side by side) live: a user's line is outside them.
_LIBRARY_DIRS = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.__file__) + os.sep,
                 os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)


def _user_line(frames):
    """Where a value was read, for _data_dependent: (" at FILE:LINE: CODE"
    of the innermost of `frames` (a StackSummary, outermost first) outside
    PyTorch, the standard library and spmd: the user's line, a model's
    `.item()` or GradScaler's step; why GradScaler reads one)."""
    where = next((" at %s:%d: %s" % (f.filename, f.lineno, (f.line or "").strip())
                  for f in reversed(frames)
                  if not f.filename.startswith(_LIBRARY_DIRS + ("<",))), "")
    scaler = any(f.filename.endswith(os.path.join("amp", "grad_scaler.py")) for f in frames)
    return where, ("; torch.amp.GradScaler skips a step whose gradients are not finite, and "
                   "bf16 (param_dtype=torch.bfloat16) needs no loss scaling" if scaler else "")


def _data_dependent(fqn, phase, site=("", "")):
    return CaptureError(
        "data-dependent control flow in %s (%s)%s: a tensor's value is read as a Python "
        "number or bool (aten::_local_scalar_dense), which a static graph cannot capture%s"
        % (describe(fqn), phase, site[0], site[1]))


_FACTORIES = (aten.full.default, aten.zeros.default, aten.new_zeros.default,
              aten.zeros_like.default, aten.full_like.default)


def _drop_whole_slices(graph):
    """Removes slices that cover their whole tensor, and scatters of nothing:
    `aten.slice.Tensor` whose result has its operand's shape is the operand;
    `aten.slice_scatter` whose `src` has the result's shape writes every
    element, so it is `src`, and one whose `src` is empty is `self`.
    `torch.tensor_split` at a dim's end (a recurrent scan's split of its
    input into the part it scans and an empty rest) makes both in the
    backward: the full gradient written into zeros, zeros written into by
    nothing. Kept, the zeros meet a Partial gradient there, which the
    sharding search then pays to reduce early."""
    def tensor(node):
        val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
        return val if isinstance(val, torch.Tensor) else None

    def same(a, b):
        a, b = tensor(a), tensor(b)
        return a is not None and b is not None and a.shape == b.shape and a.dtype == b.dtype

    for node in list(graph.nodes):
        if node.target is aten.slice.Tensor and same(node, node.args[0]):
            kept = node.args[0]
        elif node.target is aten.slice_scatter.default and same(node, node.args[1]):
            kept = node.args[1]
        elif node.target is aten.slice_scatter.default and \
                getattr(tensor(node.args[1]), "numel", lambda: 1)() == 0:
            kept = node.args[0]
        else:
            continue
        dropped = [a for a in node.args[:2] if isinstance(a, torch.fx.Node) and a is not kept]
        node.replace_all_uses_with(kept)
        graph.erase_node(node)
        # The zeros a scatter wrote into, the empty piece written.
        for a in dropped:
            if not a.users and a.target in _FACTORIES:
                graph.erase_node(a)


def _updates_to_results(gm, args, results, frozen=()):
    """Functionalization writes in-place updates of arguments back with
    `copy_(placeholder, value)`; make updated buffers and parameters that
    take no gradient (`frozen`, argument indices: an EMA copy of the model
    updated under no_grad) results instead."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    output = next(n for n in graph.nodes if n.op == "output")
    extra = []
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is aten.copy_.default and \
                node.args[0] in placeholders:
            i = placeholders.index(node.args[0])
            if args[i].role not in ("buffer", "grad") and i not in frozen:
                raise CaptureError("the step updates %s '%s' in place (aten::copy_ into an "
                                   "argument); only buffers and parameters that take no "
                                   "gradient may be updated" % (args[i].role, args[i].fqn))
            # A carried gradient changed in place and then added to is the
            # step's own result already.
            if not any(r.updates == i for r in results):
                extra.append(node.args[1])
                results.append(Result(args[i].fqn, i))
            node.replace_all_uses_with(node.args[1])
            graph.erase_node(node)
    if extra:
        output.args = (tuple(output.args[0]) + tuple(extra),)
    # Unused uninitialized tensors (ATen's batch_norm returns an empty
    # reserve buffer) mean nothing in value semantics.
    for node in reversed(list(graph.nodes)):
        if node.target is aten.empty.memory_format and not node.users:
            graph.erase_node(node)
    gm.recompile()
