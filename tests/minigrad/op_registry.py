"""The one registry of ops that drives the op tests: forward, gradients, finite differences, dtypes.

Each ``OpSpec`` names an op, calls it in minigrad and in torch, and draws input cases. A case
holds the differentiable inputs (float64 arrays, one Tensor each) and the other arguments
(dims, targets, options) passed as keywords to both callables. Adding an op is one entry in
``OPS``; draw its inputs with ``spaced_arrays`` when the op has kinks (relu, abs, max, pooling)
so that finite differences stay away from them.
"""
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as TF
from hypothesis import strategies as st

import minigrad as mg
import minigrad.functional as F
from tests.strategies import (arrays, broadcastable_shapes, class_indices, dims, positive_arrays,
                              probabilities, shapes, spaced_arrays)


@dataclass(frozen=True)
class Case:
    arrays: tuple
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class OpSpec:
    """``minigrad(*tensors, **params)`` and ``torch(*tensors, **params)`` compute the same op."""

    name: str
    minigrad: Callable
    torch: Callable
    cases: st.SearchStrategy


# --------------------------------------------------------------------------- cases
@st.composite
def unary(draw, values=arrays, shape=shapes(), **params):
    """One input of a drawn shape; ``params`` values may be strategies, drawn too."""
    drawn = {key: draw(value) if isinstance(value, st.SearchStrategy) else value
             for key, value in params.items()}
    return Case((draw(values(draw(shape))),), drawn)


@st.composite
def binary(draw, left=arrays, right=arrays):
    """Two inputs of mutually broadcastable shapes."""
    shape_a, shape_b = draw(broadcastable_shapes())
    return Case((draw(left(shape_a)), draw(right(shape_b))))


@st.composite
def signed_away_from_zero(draw, shape):
    magnitudes = draw(positive_arrays(shape))
    signs = draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=magnitudes.size,
                          max_size=magnitudes.size))
    return np.asarray(magnitudes * np.reshape(signs, magnitudes.shape))


@st.composite
def reductions(draw, values=arrays):
    """An input, a dim (None, one, or a tuple) and keepdim."""
    x = draw(values(draw(shapes())))
    dim = draw(st.one_of(st.none(), dims(x.ndim), _dim_tuples(x.ndim)))
    keepdim = draw(st.booleans())
    return Case((x,), {"dim": dim, "keepdim": keepdim})


def _dim_tuples(ndim):
    if ndim == 0:
        return st.none()
    return st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True).map(tuple)


@st.composite
def with_dim(draw, values=arrays, min_dims=1):
    x = draw(values(draw(shapes(min_dims=min_dims))))
    return Case((x,), {"dim": draw(dims(x.ndim))})


@st.composite
def reshapes(draw):
    x = draw(arrays(draw(shapes())))
    options = [(-1,), tuple(reversed(x.shape)), x.shape + (1,), (1,) + x.shape]
    if x.ndim >= 2:
        options.append((x.shape[0], -1))
    return Case((x,), {"shape": draw(st.sampled_from(options))})


@st.composite
def transposes(draw):
    x = draw(arrays(draw(shapes(min_dims=2))))
    return Case((x,), {"dim0": draw(dims(x.ndim)), "dim1": draw(dims(x.ndim))})


@st.composite
def permutes(draw):
    x = draw(arrays(draw(shapes(min_dims=1))))
    order = draw(st.permutations(range(x.ndim)))
    spelled = [dim - x.ndim if draw(st.booleans()) else dim for dim in order]
    return Case((x,), {"dims": tuple(spelled)})


@st.composite
def slicings(draw):
    """Basic indexing: an int or a slice (positive step, as torch requires) per leading dim."""
    x = draw(arrays(draw(shapes(min_dims=1))))
    index = []
    for size in x.shape[:draw(st.integers(1, x.ndim))]:
        if draw(st.booleans()):
            index.append(draw(st.integers(-size, size - 1)))
        else:
            start = draw(st.integers(0, size - 1))
            index.append(slice(start, draw(st.integers(start + 1, size)), draw(st.integers(1, 2))))
    return Case((x,), {"index": tuple(index)})


@st.composite
def integer_indexings(draw):
    """Integer-array indexing of dim 0 with repeats, optionally followed by a slice."""
    x = draw(arrays(draw(shapes(min_dims=1))))
    rows = np.array(draw(st.lists(st.integers(0, x.shape[0] - 1), min_size=1, max_size=6)))
    tail = (slice(1, None),) if x.ndim >= 2 and x.shape[1] > 1 and draw(st.booleans()) else ()
    return Case((x,), {"index": (rows, *tail)})


@st.composite
def gathers(draw):
    """An index no larger than the input in any dim, with values (repeats allowed) along ``dim``."""
    x = draw(arrays(draw(shapes(min_dims=1))))
    dim = draw(dims(x.ndim))
    index_shape = tuple(draw(st.integers(1, size)) for size in x.shape)
    return Case((x,), {"dim": dim, "index": draw(class_indices(index_shape, x.shape[dim]))})


@st.composite
def joinables(draw, *, same_shape):
    """2 or 3 arrays for cat (sizes along ``dim`` may differ) or stack (same shape)."""
    base = draw(shapes(min_dims=1))
    dim = draw(dims(len(base)))
    count = draw(st.integers(2, 3))
    parts = []
    for _ in range(count):
        shape = list(base)
        if not same_shape:
            shape[dim] = draw(st.integers(1, 3))
        parts.append(draw(arrays(tuple(shape))))
    if same_shape:
        dim = draw(st.integers(-len(base) - 1, len(base)))
    return Case(tuple(parts), {"dim": dim})


@st.composite
def clamps(draw):
    """Bounds halfway between neighbouring values, so no input sits on a kink."""
    x = draw(spaced_arrays(draw(shapes())))
    ordered = np.concatenate([[-3.0], np.sort(x.ravel()), [3.0]])
    middles = (ordered[1:] + ordered[:-1]) / 2
    low, high = sorted(draw(st.lists(st.sampled_from(list(middles)), min_size=2, max_size=2)))
    which = draw(st.sampled_from(["min", "max", "both"]))
    return Case((x,), {"min": None if which == "max" else low,
                       "max": None if which == "min" else high})


@st.composite
def matmuls(draw):
    """2-d, batched (broadcast batch dims) and 1-d operands."""
    n, k, m = (draw(st.integers(1, 4)) for _ in range(3))
    kind = draw(st.sampled_from(["2d", "batched", "vec@mat", "mat@vec", "vec@vec", "vec@batch"]))
    if kind == "batched":
        batch_a, batch_b = draw(broadcastable_shapes(min_dims=1, max_dims=2))
        shape_a, shape_b = batch_a + (n, k), batch_b + (k, m)
    else:
        shape_a = {"2d": (n, k), "vec@mat": (k,), "mat@vec": (n, k), "vec@vec": (k,),
                   "vec@batch": (k,)}[kind]
        shape_b = {"2d": (k, m), "vec@mat": (k, m), "mat@vec": (k,), "vec@vec": (k,),
                   "vec@batch": (2, k, m)}[kind]
    return Case((draw(arrays(shape_a)), draw(arrays(shape_b))))


@st.composite
def linears(draw):
    batch = draw(shapes(min_dims=0, max_dims=2))
    fan_in, fan_out = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    parts = [draw(arrays(batch + (fan_in,))), draw(arrays((fan_out, fan_in)))]
    if draw(st.booleans()):
        parts.append(draw(arrays((fan_out,))))
    return Case(tuple(parts))


_REDUCTION = st.sampled_from(["mean", "sum", "none"])


@st.composite
def class_index_losses(draw):
    """Logits (C,), (N, C) or (N, C, d) with int64 class-index targets."""
    classes = draw(st.integers(1, 4))
    shape = draw(st.sampled_from([(classes,), (draw(st.integers(1, 4)), classes),
                                  (draw(st.integers(1, 3)), classes, draw(st.integers(1, 3)))]))
    index_shape = shape[:1] + shape[2:] if len(shape) >= 2 else ()
    return Case((draw(arrays(shape, low=-4, high=4)),),
                {"target": draw(class_indices(index_shape, classes)),
                 "reduction": draw(_REDUCTION)})


@st.composite
def soft_target_losses(draw):
    shape = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    return Case((draw(arrays(shape, low=-4, high=4)), draw(probabilities(shape, axis=1))),
                {"reduction": draw(_REDUCTION)})


@st.composite
def same_shape_losses(draw, target=arrays):
    shape = draw(shapes())
    return Case((draw(arrays(shape, low=-3, high=3)), draw(target(shape))),
                {"reduction": draw(_REDUCTION)})


def _unit_interval(shape):
    return arrays(shape, low=0.0, high=1.0)


# ------------------------------------------------------------------ nn ops (conv, pool, norms)
@st.composite
def convolutions(draw):
    """conv2d input, weight and maybe bias, with drawn stride and zero padding."""
    n, channels, out_channels = (draw(st.integers(1, 2)) for _ in range(3))
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = draw(st.sampled_from([1, 2, (1, 2), (2, 1)]))
    padding = draw(st.sampled_from([0, 1, (0, 1), (1, 0)]))
    pads = (padding, padding) if isinstance(padding, int) else padding
    side = tuple(draw(st.integers(max(1, k - 2 * p), 5)) for k, p in zip(kernel, pads))
    parts = [draw(arrays((n, channels) + side)), draw(arrays((out_channels, channels) + kernel))]
    if draw(st.booleans()):
        parts.append(draw(arrays((out_channels,))))
    return Case(tuple(parts), {"stride": stride, "padding": padding})


@st.composite
def max_pools(draw):
    """max_pool2d on tie-free inputs; padding at most half the kernel, stride None or drawn."""
    kernel = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = tuple(draw(st.integers(0, k // 2)) for k in kernel)
    stride = draw(st.sampled_from([None, 1, 2, (1, 2)]))
    side = tuple(draw(st.integers(max(1, k - 2 * p), 5)) for k, p in zip(kernel, padding))
    shape = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) + side
    return Case((draw(spaced_arrays(shape)),),
                {"kernel_size": kernel, "stride": stride, "padding": padding})


@st.composite
def identity_dropouts(draw):
    """The deterministic cases of dropout: p = 0 in training, any p outside training."""
    p, training = draw(st.sampled_from([(0.0, True), (0.3, False), (1.0, False)]))
    return Case((draw(arrays(draw(shapes()))),), {"p": p, "training": training})


@st.composite
def batch_norms(draw):
    """(N, C) or (N, C, H, W) inputs, training or eval, with or without affine parameters."""
    channels = draw(st.integers(1, 3))
    if draw(st.booleans()):
        shape = (draw(st.integers(3, 5)), channels)
    else:
        spatial = (draw(st.integers(2, 3)), draw(st.integers(1, 3)))
        shape = (draw(st.integers(1, 2)), channels) + spatial
    parts = [draw(spaced_arrays(shape))]
    if draw(st.booleans()):
        parts += [draw(arrays((channels,))), draw(arrays((channels,)))]
    return Case(tuple(parts), {"running_mean": draw(arrays((channels,))),
                               "running_var": draw(positive_arrays((channels,))),
                               "training": draw(st.booleans()),
                               "momentum": draw(st.sampled_from([0.1, 0.5]))})


@st.composite
def layer_norms(draw):
    """Normalization over 1 to ndim trailing dims, with or without affine parameters."""
    shape = draw(shapes(min_dims=1, max_dims=3))
    normalized = shape[len(shape) - draw(st.integers(1, len(shape))):]
    parts = [draw(spaced_arrays(shape))]
    if draw(st.booleans()):
        parts += [draw(arrays(normalized)), draw(arrays(normalized))]
    return Case(tuple(parts), {"normalized_shape": normalized})


# ------------------------------------------------------- transformer ops (attention, tokens)
@st.composite
def attentions(draw):
    """q, k, v with (broadcast) batch dims, and one of: no mask, causal, a boolean mask (every
    query sees at least one key), an additive float mask (a differentiable input); maybe a
    scale."""
    batch = draw(st.sampled_from([(), (2,), (2, 1), (1, 3)]))
    length, source, width, value_width = (draw(st.integers(1, 4)) for _ in range(4))
    kind = draw(st.sampled_from(["none", "causal", "bool", "float"]))
    if kind == "causal":
        source = max(source, length)
    parts = [draw(arrays(batch + (length, width))), draw(arrays(batch[-1:] + (source, width))),
             draw(arrays(batch[-1:] + (source, value_width)))]
    params = {"scale": draw(st.sampled_from([None, 0.5])), "is_causal": kind == "causal"}
    if kind == "float":
        parts.append(draw(arrays((length, source))))
    if kind == "bool":
        sees = draw(class_indices((length, source), 2)).astype(bool)
        sees[np.arange(length), draw(class_indices((length,), source))] = True
        params["mask"] = sees
    return Case(tuple(parts), params)


def _attention(functional, to_tensor):
    def call(q, k, v, float_mask=None, *, scale, is_causal, mask=None):
        attn_mask = float_mask if mask is None else to_tensor(mask)
        return functional.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask,
                                                       is_causal=is_causal, scale=scale)

    return call


@st.composite
def embeddings(draw):
    """A table and indices of any shape, with repeats (a repeated token sums its gradients)."""
    rows, width = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    index_shape = draw(shapes(min_dims=0, max_dims=2))
    return Case((draw(arrays((rows, width))),),
                {"indices": draw(class_indices(index_shape, rows))})


@st.composite
def language_model_losses(draw):
    """Index targets, some equal to ``ignore_index`` (-100, or the valid class 1), never all
    of them (so the mean is defined), with label smoothing."""
    case = draw(class_index_losses())
    target = case.params["target"]
    ignore_index = draw(st.sampled_from([-100, 1]))
    dropped = draw(class_indices(target.shape, 3)) == 0
    target = np.where(dropped, ignore_index, target)
    kept = np.unravel_index(draw(st.integers(0, max(target.size - 1, 0))), target.shape)
    if target[kept] == ignore_index:
        target[kept] = 0
    return Case(case.arrays, dict(case.params, target=target, ignore_index=ignore_index,
                                  label_smoothing=draw(st.sampled_from([0.0, 0.1, 0.5]))))


@st.composite
def smoothed_soft_target_losses(draw):
    case = draw(soft_target_losses())
    return Case(case.arrays, dict(case.params, label_smoothing=draw(st.sampled_from([0.1, 0.3]))))


def _batch_norm(functional, to_tensor):
    """A batch_norm call for the registry; each call gets fresh copies of the running buffers."""
    def call(x, weight=None, bias=None, *, running_mean, running_var, training, momentum):
        return functional.batch_norm(x, to_tensor(running_mean.copy()),
                                     to_tensor(running_var.copy()), weight, bias,
                                     training=training, momentum=momentum)

    return call


def _layer_norm(functional):
    def call(x, weight=None, bias=None, *, normalized_shape):
        return functional.layer_norm(x, normalized_shape, weight, bias)

    return call


# ------------------------------------------------------------------- framework glue
def _torch_index(index):
    return tuple(torch.from_numpy(i) if isinstance(i, np.ndarray) else i for i in index)


def _mg_target(target):
    return mg.tensor(target)


def _torch_target(target):
    return torch.from_numpy(target)


# ----------------------------------------------------------------------------- ops
OPS = [
    OpSpec("add", lambda a, b: a + b, lambda a, b: a + b, binary()),
    OpSpec("sub", lambda a, b: a - b, lambda a, b: a - b, binary()),
    OpSpec("mul", lambda a, b: a * b, lambda a, b: a * b, binary()),
    OpSpec("div", lambda a, b: a / b, lambda a, b: a / b,
           binary(right=signed_away_from_zero)),
    OpSpec("scalar_arithmetic", lambda a: (3.0 - a) * 2 + a / 4 - 1 + 0.5 * a,
           lambda a: (3.0 - a) * 2 + a / 4 - 1 + 0.5 * a, unary()),
    OpSpec("neg", lambda a: -a, lambda a: -a, unary()),
    OpSpec("pow_tensor", lambda a, b: a ** b, lambda a, b: a ** b,
           binary(left=positive_arrays)),
    OpSpec("pow_int", lambda a: a ** 3, lambda a: a ** 3, unary()),
    OpSpec("pow_float", lambda a, *, exponent: a ** exponent,
           lambda a, *, exponent: a ** exponent,
           unary(positive_arrays, exponent=st.sampled_from([0.5, -1.5, 2.5]))),
    OpSpec("rdiv_scalar", lambda a: 10.0 / a, lambda a: 10.0 / a,
           unary(signed_away_from_zero)),
    OpSpec("rpow_scalar", lambda a: 2.0 ** a, lambda a: 2.0 ** a, unary()),
    OpSpec("matmul", lambda a, b: a @ b, lambda a, b: a @ b, matmuls()),
    OpSpec("sum", lambda x, *, dim, keepdim: x.sum(dim=dim, keepdim=keepdim),
           lambda x, *, dim, keepdim: torch.sum(x, dim=dim, keepdim=keepdim), reductions()),
    OpSpec("mean", lambda x, *, dim, keepdim: x.mean(dim=dim, keepdim=keepdim),
           lambda x, *, dim, keepdim: torch.mean(x, dim=dim, keepdim=keepdim), reductions()),
    OpSpec("amax", lambda x, *, dim, keepdim: x.amax(dim=dim, keepdim=keepdim),
           lambda x, *, dim, keepdim: torch.amax(x, dim=dim, keepdim=keepdim),
           reductions(spaced_arrays)),
    OpSpec("amin", lambda x, *, dim, keepdim: x.amin(dim=dim, keepdim=keepdim),
           lambda x, *, dim, keepdim: torch.amin(x, dim=dim, keepdim=keepdim),
           reductions(spaced_arrays)),
    OpSpec("max_all", lambda x: x.max(), lambda x: x.max(), unary(spaced_arrays)),
    OpSpec("min_all", lambda x: x.min(), lambda x: x.min(), unary(spaced_arrays)),
    OpSpec("max_dim", lambda x, *, dim, keepdim: x.max(dim, keepdim=keepdim).values,
           lambda x, *, dim, keepdim: x.max(dim, keepdim=keepdim).values,
           unary(spaced_arrays, shapes(min_dims=1), dim=st.integers(-1, 0),
                 keepdim=st.booleans())),
    OpSpec("min_dim", lambda x, *, dim, keepdim: x.min(dim, keepdim=keepdim).values,
           lambda x, *, dim, keepdim: x.min(dim, keepdim=keepdim).values,
           unary(spaced_arrays, shapes(min_dims=1), dim=st.integers(-1, 0),
                 keepdim=st.booleans())),
    OpSpec("reshape", lambda x, *, shape: x.reshape(shape), lambda x, *, shape: x.reshape(shape),
           reshapes()),
    OpSpec("transpose", lambda x, *, dim0, dim1: x.transpose(dim0, dim1),
           lambda x, *, dim0, dim1: x.transpose(dim0, dim1), transposes()),
    OpSpec("permute", lambda x, *, dims: x.permute(*dims), lambda x, *, dims: x.permute(*dims),
           permutes()),
    OpSpec("getitem_slices", lambda x, *, index: x[index], lambda x, *, index: x[index],
           slicings()),
    OpSpec("getitem_integer_arrays", lambda x, *, index: x[index],
           lambda x, *, index: x[_torch_index(index)], integer_indexings()),
    OpSpec("gather", lambda x, *, dim, index: x.gather(dim, mg.tensor(index)),
           lambda x, *, dim, index: x.gather(dim, torch.from_numpy(index)), gathers()),
    OpSpec("cat", lambda *xs, dim: mg.cat(list(xs), dim=dim),
           lambda *xs, dim: torch.cat(xs, dim=dim), joinables(same_shape=False)),
    OpSpec("stack", lambda *xs, dim: mg.stack(list(xs), dim=dim),
           lambda *xs, dim: torch.stack(xs, dim=dim), joinables(same_shape=True)),
    OpSpec("exp", lambda x: x.exp(), torch.exp, unary()),
    OpSpec("log", lambda x: x.log(), torch.log, unary(positive_arrays)),
    OpSpec("sqrt", lambda x: x.sqrt(), torch.sqrt, unary(positive_arrays)),
    OpSpec("abs", lambda x: x.abs(), torch.abs, unary(spaced_arrays)),
    OpSpec("clamp", lambda x, *, min, max: x.clamp(min=min, max=max),
           lambda x, *, min, max: x.clamp(min=min, max=max), clamps()),
    OpSpec("relu", F.relu, TF.relu, unary(spaced_arrays)),
    OpSpec("leaky_relu", lambda x, *, slope: F.leaky_relu(x, slope),
           lambda x, *, slope: TF.leaky_relu(x, slope),
           unary(spaced_arrays, slope=st.sampled_from([0.01, 0.2]))),
    OpSpec("sigmoid", F.sigmoid, torch.sigmoid, unary(arrays)),
    OpSpec("tanh", F.tanh, torch.tanh, unary(arrays)),
    OpSpec("gelu", lambda x, *, approximate: F.gelu(x, approximate),
           lambda x, *, approximate: TF.gelu(x, approximate=approximate),
           unary(approximate=st.sampled_from(["none", "tanh"]))),
    OpSpec("softmax", lambda x, *, dim: F.softmax(x, dim), lambda x, *, dim: TF.softmax(x, dim),
           with_dim()),
    OpSpec("log_softmax", lambda x, *, dim: x.log_softmax(dim),
           lambda x, *, dim: x.log_softmax(dim), with_dim()),
    OpSpec("cross_entropy_indices",
           lambda x, *, target, reduction: F.cross_entropy(x, _mg_target(target),
                                                           reduction=reduction),
           lambda x, *, target, reduction: TF.cross_entropy(x, _torch_target(target),
                                                            reduction=reduction),
           class_index_losses()),
    OpSpec("cross_entropy_probabilities",
           lambda x, t, *, reduction: F.cross_entropy(x, t, reduction=reduction),
           lambda x, t, *, reduction: TF.cross_entropy(x, t, reduction=reduction),
           soft_target_losses()),
    OpSpec("mse_loss", lambda x, t, *, reduction: F.mse_loss(x, t, reduction=reduction),
           lambda x, t, *, reduction: TF.mse_loss(x, t, reduction=reduction),
           same_shape_losses()),
    OpSpec("bce_with_logits",
           lambda x, t, *, reduction: F.binary_cross_entropy_with_logits(x, t,
                                                                          reduction=reduction),
           lambda x, t, *, reduction: TF.binary_cross_entropy_with_logits(x, t,
                                                                           reduction=reduction),
           same_shape_losses(target=_unit_interval)),
    OpSpec("linear", F.linear, TF.linear, linears()),
    OpSpec("conv2d", F.conv2d, TF.conv2d, convolutions()),
    OpSpec("max_pool2d", F.max_pool2d, TF.max_pool2d, max_pools()),
    OpSpec("dropout", F.dropout, TF.dropout, identity_dropouts()),
    OpSpec("batch_norm", _batch_norm(F, mg.tensor), _batch_norm(TF, torch.from_numpy),
           batch_norms()),
    OpSpec("layer_norm", _layer_norm(F), _layer_norm(TF), layer_norms()),
    OpSpec("scaled_dot_product_attention", _attention(F, mg.tensor),
           _attention(TF, torch.from_numpy), attentions()),
    OpSpec("embedding", lambda w, *, indices: F.embedding(mg.tensor(indices), w),
           lambda w, *, indices: TF.embedding(torch.from_numpy(indices), w), embeddings()),
    OpSpec("cross_entropy_ignore_index_label_smoothing",
           lambda x, *, target, reduction, ignore_index, label_smoothing: F.cross_entropy(
               x, _mg_target(target), reduction=reduction, ignore_index=ignore_index,
               label_smoothing=label_smoothing),
           lambda x, *, target, reduction, ignore_index, label_smoothing: TF.cross_entropy(
               x, _torch_target(target), reduction=reduction, ignore_index=ignore_index,
               label_smoothing=label_smoothing),
           language_model_losses()),
    OpSpec("cross_entropy_probabilities_label_smoothing",
           lambda x, t, *, reduction, label_smoothing: F.cross_entropy(
               x, t, reduction=reduction, label_smoothing=label_smoothing),
           lambda x, t, *, reduction, label_smoothing: TF.cross_entropy(
               x, t, reduction=reduction, label_smoothing=label_smoothing),
           smoothed_soft_target_losses()),
]
