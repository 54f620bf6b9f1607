"""``Tensor``: an ndarray with a gradient and the graph node that made it."""
import itertools
from collections import namedtuple

import numpy as np

from . import autograd, function
from .ops import activation, arithmetic, linalg, reduction, shape

float32, float64, int64 = np.float32, np.float64, np.int64

MaxResult = namedtuple("MaxResult", ["values", "indices"])
_hook_ids = itertools.count()


class RemovableHandle:
    """Returned by every ``register_*hook``; ``remove()`` is idempotent."""

    def __init__(self, hooks, key, *extra):
        self._dicts, self._key = (hooks,) + extra, key   # extra: side dicts under the same key

    @property
    def key(self):
        return self._key

    def remove(self):
        for hooks in self._dicts:
            hooks.pop(self._key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False


class Tensor:
    """An n-dimensional array that records the ops applied to it, like ``torch.Tensor``.

    ``data`` is the ndarray, ``grad`` an ndarray (or None) filled by ``backward()``,
    ``grad_fn`` the node of the op that produced it (None for leaves).
    """

    __array_priority__ = 1000  # make ndarray <op> Tensor defer to Tensor's reflected ops

    def __init__(self, data, requires_grad=False, dtype=None):
        if isinstance(data, Tensor):
            data = data.data
        self.data = _as_array(data, dtype)
        if requires_grad and self.data.dtype.kind != "f":
            raise RuntimeError(
                f"only floating-point tensors can require gradients, got dtype {self.data.dtype}")
        self.requires_grad = bool(requires_grad)
        self.grad = None
        self.grad_fn = None
        self._retains_grad = False
        self._hooks = {}

    # ----------------------------------------------------------------- properties
    @property
    def shape(self):
        return self.data.shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def ndim(self):
        return self.data.ndim

    @property
    def is_leaf(self):
        return self.grad_fn is None

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def size(self, dim=None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self):
        return self.ndim

    def numel(self):
        return int(self.data.size)

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        extra = f", grad_fn={self.grad_fn!r}" if self.grad_fn is not None else (
            ", requires_grad=True" if self.requires_grad else "")
        body = np.array2string(self.data, prefix="tensor(")
        return f"tensor({body}, dtype={self.dtype}{extra})"

    # ------------------------------------------------------------------ autograd
    def backward(self, gradient=None, retain_graph=False):
        autograd.backward(self, gradient, retain_graph=retain_graph)

    def detach(self):
        """A tensor sharing this data, cut from the graph."""
        return Tensor(self.data)

    def requires_grad_(self, requires_grad=True):
        if not self.is_leaf:
            raise RuntimeError("requires_grad_() can only change leaf tensors")
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self):
        """Keep ``.grad`` on this non-leaf tensor after backward."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on a tensor that has requires_grad=False")
        self._retains_grad = True

    def register_hook(self, hook):
        """Call ``hook(grad)`` once this gradient is known; a returned array replaces it."""
        if not self.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        key = next(_hook_ids)
        self._hooks[key] = hook
        return RemovableHandle(self._hooks, key)

    def zero_(self):
        self.data[...] = 0
        return self

    # -------------------------------------------------------------- conversions
    def numpy(self):
        return self.data

    def item(self):
        return self.data.item()

    def tolist(self):
        return self.data.tolist()

    def to(self, dtype):
        return self if self.dtype == dtype else shape.Cast.apply(self, np.dtype(dtype))

    def float(self):
        return self.to(np.float32)

    def double(self):
        return self.to(np.float64)

    def long(self):
        return Tensor(self.data.astype(np.int64))

    def clone(self):
        return shape.Clone.apply(self)

    # -------------------------------------------------------------- arithmetic
    def __add__(self, other):
        return arithmetic.Add.apply(self, _operand(other, self))

    def __radd__(self, other):
        return arithmetic.Add.apply(_operand(other, self), self)

    def __sub__(self, other):
        return arithmetic.Sub.apply(self, _operand(other, self))

    def __rsub__(self, other):
        return arithmetic.Sub.apply(_operand(other, self), self)

    def __mul__(self, other):
        return arithmetic.Mul.apply(self, _operand(other, self))

    def __rmul__(self, other):
        return arithmetic.Mul.apply(_operand(other, self), self)

    def __truediv__(self, other):
        return arithmetic.Div.apply(self, _operand(other, self))

    def __rtruediv__(self, other):
        return arithmetic.Div.apply(_operand(other, self), self)

    def __pow__(self, other):
        return arithmetic.Pow.apply(self, _operand(other, self))

    def __rpow__(self, other):
        return arithmetic.Pow.apply(_operand(other, self), self)

    def __neg__(self):
        return arithmetic.Neg.apply(self)

    def __matmul__(self, other):
        return linalg.MatMul.apply(self, _operand(other, self))

    def __rmatmul__(self, other):
        return linalg.MatMul.apply(_operand(other, self), self)

    def __getitem__(self, index):
        return shape.GetItem.apply(self, _index(index))

    # comparisons give plain boolean tensors, outside the graph
    def __eq__(self, other):
        return Tensor(self.data == _raw(other))

    def __ne__(self, other):
        return Tensor(self.data != _raw(other))

    def __lt__(self, other):
        return Tensor(self.data < _raw(other))

    def __le__(self, other):
        return Tensor(self.data <= _raw(other))

    def __gt__(self, other):
        return Tensor(self.data > _raw(other))

    def __ge__(self, other):
        return Tensor(self.data >= _raw(other))

    __hash__ = object.__hash__

    # ---------------------------------------------------------- torch-style methods
    def add(self, other):
        return self + other

    def sub(self, other):
        return self - other

    def mul(self, other):
        return self * other

    def div(self, other):
        return self / other

    def pow(self, exponent):
        return self**exponent

    def matmul(self, other):
        return self @ other

    def exp(self):
        return arithmetic.Exp.apply(self)

    def log(self):
        return arithmetic.Log.apply(self)

    def sqrt(self):
        return arithmetic.Sqrt.apply(self)

    def abs(self):
        return arithmetic.Abs.apply(self)

    def clamp(self, min=None, max=None):
        return arithmetic.Clip.apply(self, min, max)

    clip = clamp

    def relu(self):
        return activation.ReLU.apply(self)

    def sigmoid(self):
        return activation.Sigmoid.apply(self)

    def tanh(self):
        return activation.Tanh.apply(self)

    def sum(self, dim=None, keepdim=False):
        return reduction.Sum.apply(self, _axes(dim), keepdim)

    def mean(self, dim=None, keepdim=False):
        return reduction.Mean.apply(self, _axes(dim), keepdim)

    def amax(self, dim=None, keepdim=False):
        return reduction.Max.apply(self, _axes(dim), keepdim)

    def amin(self, dim=None, keepdim=False):
        return reduction.Min.apply(self, _axes(dim), keepdim)

    def max(self, dim=None, keepdim=False):
        """The maximum; with ``dim``, ``(values, indices)`` as in torch (the gradient goes to
        the index, not shared among ties)."""
        if dim is None:
            return self.amax()
        return self._select_along(np.argmax(self.data, axis=dim, keepdims=True), dim, keepdim)

    def min(self, dim=None, keepdim=False):
        if dim is None:
            return self.amin()
        return self._select_along(np.argmin(self.data, axis=dim, keepdims=True), dim, keepdim)

    def _select_along(self, indices, dim, keepdim):
        values = self.gather(dim, indices)
        if not keepdim:
            values, indices = values.squeeze(dim), np.squeeze(indices, axis=dim)
        return MaxResult(values, Tensor(indices.astype(np.int64)))

    def gather(self, dim, index):
        return shape.Gather.apply(self, dim, _raw(index))

    def argmax(self, dim=None, keepdim=False):
        out = np.argmax(self.data, axis=dim, keepdims=keepdim)
        return Tensor(out)

    def argmin(self, dim=None, keepdim=False):
        return Tensor(np.argmin(self.data, axis=dim, keepdims=keepdim))

    def var(self, dim=None, unbiased=True, keepdim=False):
        centered = self - self.mean(dim, keepdim=True)
        count = self.numel() if dim is None else int(np.prod(
            [self.shape[d] for d in np.atleast_1d(dim)]))
        return (centered * centered).sum(dim, keepdim) / (count - 1 if unbiased else count)

    def std(self, dim=None, unbiased=True, keepdim=False):
        return self.var(dim, unbiased, keepdim).sqrt()

    def reshape(self, *shape_):
        return shape.Reshape.apply(self, _shape_arg(shape_))

    view = reshape

    def flatten(self, start_dim=0, end_dim=-1):
        end = end_dim % self.ndim if self.ndim else 0
        new = self.shape[:start_dim] + (-1,) + self.shape[end + 1:]
        return self.reshape(new)

    def permute(self, *dims):
        return shape.Permute.apply(self, tuple(_shape_arg(dims)))

    def transpose(self, dim0, dim1):
        axes = list(range(self.ndim))
        axes[dim0], axes[dim1] = axes[dim1], axes[dim0]
        return self.permute(*axes)

    def t(self):
        return self.transpose(0, 1) if self.ndim == 2 else self

    def unsqueeze(self, dim):
        dim = dim if dim >= 0 else dim + self.ndim + 1
        return self.reshape(self.shape[:dim] + (1,) + self.shape[dim:])

    def squeeze(self, dim=None):
        if dim is None:
            return self.reshape(tuple(n for n in self.shape if n != 1))
        if self.shape[dim] != 1:
            return self
        dim = dim % self.ndim
        return self.reshape(self.shape[:dim] + self.shape[dim + 1:])

    def expand(self, *sizes):
        sizes = _shape_arg(sizes)
        target = tuple(old if new == -1 else new for old, new in
                       zip((1,) * (len(sizes) - self.ndim) + self.shape, sizes))
        return shape.Expand.apply(self, target)

    def softmax(self, dim):
        from . import functional

        return functional.softmax(self, dim)

    def log_softmax(self, dim):
        from . import functional

        return functional.log_softmax(self, dim)


function.use_tensor_class(Tensor)


# ---------------------------------------------------------------------- factories
def tensor(data, requires_grad=False, dtype=None):
    """A new leaf tensor holding a copy of ``data`` (Python floats become float32, as in torch)."""
    if isinstance(data, Tensor):
        data = data.data
    return Tensor(np.array(_as_array(data, dtype), copy=True), requires_grad=requires_grad)


def zeros(*shape_, dtype=np.float32, requires_grad=False):
    return Tensor(np.zeros(_shape_arg(shape_), dtype=dtype), requires_grad=requires_grad)


def ones(*shape_, dtype=np.float32, requires_grad=False):
    return Tensor(np.ones(_shape_arg(shape_), dtype=dtype), requires_grad=requires_grad)


def zeros_like(t, requires_grad=False):
    return Tensor(np.zeros_like(t.data), requires_grad=requires_grad)


def ones_like(t, requires_grad=False):
    return Tensor(np.ones_like(t.data), requires_grad=requires_grad)


def arange(*args, dtype=None):
    return Tensor(np.arange(*args, dtype=dtype))


# ----------------------------------------------------------------------- helpers
def _as_array(data, dtype):
    if dtype is not None:
        return np.asarray(data, dtype=dtype)
    if isinstance(data, np.ndarray):
        return data
    array = np.asarray(data)
    if array.dtype == np.float64 and not isinstance(data, np.generic):
        return array.astype(np.float32)  # Python floats default to float32, as in torch
    if array.dtype.kind in "iu" and not isinstance(data, np.generic):
        return array.astype(np.int64)
    return array


def _operand(value, like):
    """The other operand of a binary op: a Tensor, or a constant of ``like``'s float dtype.

    As in torch, a Python number takes the tensor's float dtype, and a Python float next to an
    integer tensor is float32.
    """
    if isinstance(value, Tensor):
        return value
    if isinstance(value, (int, float)):
        if like.data.dtype.kind == "f":
            return Tensor(np.asarray(value, dtype=like.data.dtype))
        if isinstance(value, float):
            return Tensor(np.asarray(value, dtype=np.float32))
    return Tensor(np.asarray(value))


def _raw(value):
    return value.data if isinstance(value, Tensor) else value


def _index(index):
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    if isinstance(index, list):
        return np.asarray(index)
    return index


def _axes(dim):
    return tuple(dim) if isinstance(dim, list) else dim


def _shape_arg(args):
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        return tuple(args[0])
    return tuple(args)

