"""``Function``: the one way to define a differentiable op, mirroring ``torch.autograd.Function``.

A subclass writes two static methods side by side::

    class Mul(Function):
        @staticmethod
        def forward(ctx, a, b):            # ndarrays in, ndarray out
            ctx.save_for_backward(a, b)
            return a * b

        @staticmethod
        def backward(ctx, grad):           # ndarray in, one ndarray (or None) per input out
            a, b = ctx.saved_tensors
            return grad * b, grad * a

and is called with ``Mul.apply(x, w)``: Tensors in, Tensor out. Arguments that are not Tensors
(an axis, a stride, a Python number) reach ``forward`` unchanged and get ``None`` back.
"""
import numpy as np

from .grad_mode import is_grad_enabled

# The class ``apply`` wraps results in. tensor.py names it once, right after defining Tensor
# (``use_tensor_class``): Tensor's methods call the ops, the ops subclass Function, so Function
# must not import Tensor, or the three modules would import each other in a circle.
Tensor = None


def use_tensor_class(cls):
    """Make ``cls`` the tensor type that ``Function.apply`` reads inputs from and returns."""
    global Tensor
    Tensor = cls


class ShapeError(ValueError):
    """An op got inputs whose shapes don't fit; the message names the op and the shapes."""


class Context:
    """The graph node of one op call: what ``backward`` needs, and the inputs to send gradients to.

    It plays the role of torch's ``grad_fn``: ``tensor.grad_fn.name`` is the op's name and
    ``tensor.grad_fn.next_functions`` the nodes of its inputs.
    """

    def __init__(self, function, inputs):
        self.function = function
        self.inputs = inputs
        self.needs_input_grad = tuple([isinstance(x, Tensor) and x.requires_grad for x in inputs])
        self.saved_tensors = ()
        self.released = False

    @property
    def name(self):
        return self.function.__name__

    @property
    def next_functions(self):
        return tuple(x.grad_fn if isinstance(x, Tensor) else None for x in self.inputs)

    def save_for_backward(self, *arrays):
        self.saved_tensors = arrays

    def release(self):
        """Free what forward saved, as torch does after a backward without ``retain_graph``."""
        self.saved_tensors = ()
        self.released = True

    def __repr__(self):
        return f"<{self.name}Backward>"


class Function:
    """Base class of every op. Subclasses define static ``forward`` and ``backward``."""

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a Function subclass must define forward(ctx, *arrays)")

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("a Function subclass must define backward(ctx, grad)")

    @classmethod
    def apply(cls, *args):
        """Run ``forward`` on the inputs' arrays; record the call when an input requires grad.

        An output that is not floating point (an index, a mask) is never recorded, as in torch.
        """
        arrays = [x.data if isinstance(x, Tensor) else x for x in args]
        ctx = Context(cls, args)
        try:
            out = cls.forward(ctx, *arrays)
        except ValueError as exc:
            if type(exc) is not ValueError:
                raise
            raise ShapeError(f"{cls.__name__}: {exc} (input shapes: {_shapes(arrays)})") from exc
        if not isinstance(out, np.ndarray):
            out = np.asarray(out)
        record = out.dtype.kind == "f" and is_grad_enabled() and any(ctx.needs_input_grad)
        result = Tensor(out, requires_grad=record)
        if record:
            result.grad_fn = ctx
        return result


def _shapes(arrays):
    return ", ".join(str(x.shape) for x in arrays if isinstance(x, np.ndarray))
