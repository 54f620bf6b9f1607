"""Models with planted wrong backwards, and their healthy twins, on torch and on minigrad.

Each planted layer is an ordinary layer whose forward calls a custom autograd Function
(``torch.autograd.Function`` or ``minigrad.Function``) taking a ``bug`` name; its backward
computes the right gradients and then spoils one of them as the bug says (``None``: healthy).
``build(framework, kind, bug=..., seed=...)`` returns ``(model, loss_fn, inputs, targets)``
with NumPy inputs and targets, as a user might pass them.
"""

import numpy as np
import torch

import minigrad
from diagnostics.backends import torch_threads
from minigrad.ops.conv import Conv2d as MinigradConvOp
from minigrad.ops.normalization import LayerNorm as MinigradLayerNormOp
from minigrad.ops.pooling import MaxPool2d as MinigradMaxPoolOp

FRAMEWORKS = ("torch", "minigrad")


def one_torch_thread():
    """torch on one thread for the block: these models are tiny."""
    return torch_threads(1)


# ---------------------------------------------------------------- spoiling
def spoil_linear(bug, grad, x, weight, grads):
    """The linear layer's gradients ``(input, weight, bias)`` with ``bug`` planted."""
    gx, gw, gb = grads
    if bug == "input_transpose":
        gx = grad @ weight.T           # W.T where W belongs
    elif bug == "weight_transpose":
        gw = gw.T
    elif bug == "bias_mean":
        gb = grad.mean(0)              # mean where the forward sums over the batch
    elif bug == "weight_last_row":
        gw = gw.copy() if isinstance(gw, np.ndarray) else gw.clone()
        gw[-1] = 0
    return gx, gw, gb


def spoil_tanh(bug, grad, y):
    if bug == "sign":
        return -grad * (1 - y * y)
    if bug == "plus":
        return grad * (1 + y * y)      # 1 + y^2 where 1 - y^2 belongs
    return grad * (1 - y * y)


# --------------------------------------------------------------- torch ops
class TorchLinearFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, bug):
        ctx.save_for_backward(x, weight)
        ctx.bug = bug
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grads = (grad @ weight, grad.T @ x, grad.sum(0))
        return spoil_linear(ctx.bug, grad, x, weight, grads) + (None,)


class TorchTanhFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bug):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        ctx.bug = bug
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return spoil_tanh(ctx.bug, grad, y), None


class TorchConvFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, bug):
        ctx.save_for_backward(x, weight)
        ctx.bug = bug
        return torch.nn.functional.conv2d(x, weight, bias, padding=1)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        gx = torch.nn.grad.conv2d_input(x.shape, weight, grad, padding=1)
        gw = torch.nn.grad.conv2d_weight(x, weight.shape, grad, padding=1)
        gb = grad.sum((0, 2, 3))
        if ctx.bug == "weight_double":
            gw = 2 * gw
        if ctx.bug == "input_sign":
            gx = -gx
        return gx, gw, gb, None


class TorchLayerNormFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, bug):
        mean = x.mean(-1, keepdim=True)
        invstd = 1 / torch.sqrt(((x - mean) ** 2).mean(-1, keepdim=True) + 1e-5)
        x_hat = (x - mean) * invstd
        ctx.save_for_backward(x_hat, invstd, weight)
        ctx.bug = bug
        return x_hat * weight + bias

    @staticmethod
    def backward(ctx, grad):
        x_hat, invstd, weight = ctx.saved_tensors
        g = grad * weight
        gx = invstd * (g - g.mean(-1, keepdim=True) - x_hat * (g * x_hat).mean(-1, keepdim=True))
        if ctx.bug == "input_terms":
            gx = invstd * g            # the mean and variance terms forgotten
        return gx, (grad * x_hat).sum(0), grad.sum(0), None


class TorchMSEFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, output, target, bug):
        ctx.save_for_backward(output - target)
        ctx.bug = bug
        return ((output - target) ** 2).mean()

    @staticmethod
    def backward(ctx, grad):
        (diff,) = ctx.saved_tensors
        factor = 1.0 if ctx.bug == "half" else 2.0   # the 2 of x**2 forgotten
        return grad * factor * diff / diff.numel(), None, None


class TorchMaxPoolFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, bug):
        ctx.save_for_backward(x)
        ctx.bug = bug
        return torch.nn.functional.max_pool2d(x, 2)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            leaf = x.detach().requires_grad_()
            (gx,) = torch.autograd.grad(torch.nn.functional.max_pool2d(leaf, 2), leaf, grad)
        return (3 * gx if ctx.bug == "triple" else gx), None


class TorchAddFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, skip, branch, bug):
        ctx.bug = bug
        return skip + branch

    @staticmethod
    def backward(ctx, grad):
        return (-grad if ctx.bug == "skip_sign" else grad), grad, None


# ------------------------------------------------------------ minigrad ops
class MinigradLinearFn(minigrad.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, bug):
        ctx.save_for_backward(x, weight)
        ctx.bug = bug
        return x @ weight.T + bias

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grads = (grad @ weight, grad.T @ x, grad.sum(0))
        return spoil_linear(ctx.bug, grad, x, weight, grads) + (None,)


class MinigradTanhFn(minigrad.Function):
    @staticmethod
    def forward(ctx, x, bug):
        y = np.tanh(x)
        ctx.save_for_backward(y)
        ctx.bug = bug
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return spoil_tanh(ctx.bug, grad, y), None


class MinigradConvFn(MinigradConvOp):
    """minigrad's conv2d op with a ``bug`` argument after ``padding``."""

    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding, bug):
        ctx.bug = bug
        return MinigradConvOp.forward(ctx, x, weight, bias, stride, padding)

    @staticmethod
    def backward(ctx, grad):
        gx, gw, gb, _, _ = MinigradConvOp.backward(ctx, grad)
        if ctx.bug == "weight_double":
            gw = 2 * gw
        if ctx.bug == "input_sign":
            gx = -gx
        return gx, gw, gb, None, None, None


class MinigradLayerNormFn(MinigradLayerNormOp):
    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps, bug):
        ctx.bug = bug
        return MinigradLayerNormOp.forward(ctx, x, normalized_shape, weight, bias, eps)

    @staticmethod
    def backward(ctx, grad):
        gx, _, gw, gb, _ = MinigradLayerNormOp.backward(ctx, grad)
        if ctx.bug == "input_terms":
            x_hat, invstd, weight = ctx.saved_tensors
            gx = invstd * grad * weight
        return gx, None, gw, gb, None, None


class MinigradMSEFn(minigrad.Function):
    @staticmethod
    def forward(ctx, output, target, bug):
        ctx.save_for_backward(output - target)
        ctx.bug = bug
        return np.mean((output - target) ** 2)

    @staticmethod
    def backward(ctx, grad):
        (diff,) = ctx.saved_tensors
        factor = 1.0 if ctx.bug == "half" else 2.0
        return grad * factor * diff / diff.size, None, None


class MinigradMaxPoolFn(MinigradMaxPoolOp):
    @staticmethod
    def forward(ctx, x, bug):
        ctx.bug = bug
        return MinigradMaxPoolOp.forward(ctx, x, 2, None, 0)

    @staticmethod
    def backward(ctx, grad):
        gx = MinigradMaxPoolOp.backward(ctx, grad)[0]
        return (3 * gx if ctx.bug == "triple" else gx), None


class MinigradAddFn(minigrad.Function):
    @staticmethod
    def forward(ctx, skip, branch, bug):
        ctx.bug = bug
        return skip + branch

    @staticmethod
    def backward(ctx, grad):
        return (-grad if ctx.bug == "skip_sign" else grad), grad, None


# ------------------------------------------------------------------ layers
def _layers(framework):
    """The planted layer classes of one framework, as a dict."""
    nn = torch.nn if framework == "torch" else minigrad.nn
    t = framework == "torch"
    linear_fn, tanh_fn = (TorchLinearFn, TorchTanhFn) if t else (MinigradLinearFn, MinigradTanhFn)

    class PlantedLinear(nn.Linear):
        def __init__(self, n_in, n_out, bug=None):
            super().__init__(n_in, n_out)
            self.bug = bug

        def forward(self, x):
            return linear_fn.apply(x, self.weight, self.bias, self.bug)

    class PlantedTanh(nn.Module):
        def __init__(self, bug=None):
            super().__init__()
            self.bug = bug

        def forward(self, x):
            return tanh_fn.apply(x, self.bug)

    class PlantedConv2d(nn.Module):
        def __init__(self, n_in, n_out, bug=None):
            super().__init__()
            rng = np.random.default_rng(7)
            weight = rng.standard_normal((n_out, n_in, 3, 3)) / np.sqrt(9 * n_in)
            self.weight = _parameter(framework, weight)
            self.bias = _parameter(framework, 0.1 * rng.standard_normal(n_out))
            self.bug = bug

        def forward(self, x):
            if t:
                return TorchConvFn.apply(x, self.weight, self.bias, self.bug)
            return MinigradConvFn.apply(x, self.weight, self.bias, 1, 1, self.bug)

    class PlantedLayerNorm(nn.Module):
        def __init__(self, size, bug=None):
            super().__init__()
            rng = np.random.default_rng(8)
            self.weight = _parameter(framework, 1 + 0.1 * rng.standard_normal(size))
            self.bias = _parameter(framework, 0.1 * rng.standard_normal(size))
            self.bug = bug

        def forward(self, x):
            if t:
                return TorchLayerNormFn.apply(x, self.weight, self.bias, self.bug)
            return MinigradLayerNormFn.apply(x, self.weight.shape, self.weight, self.bias,
                                             1e-5, self.bug)

    class MaxPool(nn.Module):
        def __init__(self, bug=None):
            super().__init__()
            self.bug = bug

        def forward(self, x):
            return (TorchMaxPoolFn if t else MinigradMaxPoolFn).apply(x, self.bug)

    class Flatten(nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1)

    class Residual(nn.Module):
        """``x + fc2(act(fc1(x)))``: ``fc1`` may carry a bug, or the block's own addition
        (``skip_sign``: the gradient of the skip path has the wrong sign)."""

        def __init__(self, size, bug=None):
            super().__init__()
            self.fc1 = PlantedLinear(size, size, None if bug == "skip_sign" else bug)
            self.act = nn.Tanh()
            self.fc2 = nn.Linear(size, size)
            self.add_bug = bug if bug == "skip_sign" else None

        def forward(self, x):
            add = TorchAddFn if t else MinigradAddFn
            return add.apply(x, self.fc2(self.act(self.fc1(x))), self.add_bug)

    class TwiceTanh(nn.Module):
        """One activation module called twice, and a module returning a tuple."""

        def __init__(self, bug=None):
            super().__init__()
            self.fc1 = nn.Linear(6, 8)
            self.act = PlantedTanh(bug)
            self.pair = Pair()
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x):
            hidden, _ = self.pair(self.act(self.fc1(x)))
            return self.fc2(self.act(hidden))

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            y = self.fc(x)
            return y, y * 2

    return dict(PlantedLinear=PlantedLinear, PlantedTanh=PlantedTanh,
                PlantedConv2d=PlantedConv2d, PlantedLayerNorm=PlantedLayerNorm,
                MaxPool=MaxPool, Flatten=Flatten, Residual=Residual, TwiceTanh=TwiceTanh)


def _parameter(framework, values):
    if framework == "torch":
        return torch.nn.Parameter(torch.tensor(values, dtype=torch.float32))
    return minigrad.nn.Parameter(np.asarray(values, dtype=np.float32))


def _seed(framework, seed):
    torch.manual_seed(seed) if framework == "torch" else minigrad.manual_seed(seed)


def cross_entropy(framework):
    return torch.nn.CrossEntropyLoss() if framework == "torch" else minigrad.nn.CrossEntropyLoss()


def planted_mse(framework, bug=None):
    fn = TorchMSEFn if framework == "torch" else MinigradMSEFn
    return lambda output, target: fn.apply(output, target, bug)


# ------------------------------------------------------------------ models
def build(framework, kind, *, bug=None, seed=0, batch=5):
    """``(model, loss_fn, inputs, targets)`` for one of the model kinds below."""
    _seed(framework, seed)
    layers = _layers(framework)
    nn = torch.nn if framework == "torch" else minigrad.nn
    rng = np.random.default_rng(seed + 100)
    labels = rng.integers(0, 3, batch)
    if kind == "mlp":                       # Linear-act-PlantedLinear(square)-act-Linear
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), layers["PlantedLinear"](8, 8, bug),
                              nn.ReLU(), nn.Linear(8, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    if kind == "tanh":                      # the activation carries the bug
        model = nn.Sequential(nn.Linear(6, 8), layers["PlantedTanh"](bug), nn.Linear(8, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    if kind == "residual":                  # the bug sits in "1.fc1"
        model = nn.Sequential(nn.Linear(6, 8), layers["Residual"](8, bug), nn.Linear(8, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    if kind == "cnn":                       # conv-ReLU-maxpool-conv-flatten-linear
        pool_bug = bug if bug == "triple" else None
        model = nn.Sequential(layers["PlantedConv2d"](1, 3), nn.ReLU(), layers["MaxPool"](pool_bug),
                              layers["PlantedConv2d"](3, 2, None if pool_bug else bug),
                              layers["Flatten"](), nn.Linear(2 * 3 * 3, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 1, 6, 6)), labels
    if kind == "layernorm":
        model = nn.Sequential(nn.Linear(6, 8), layers["PlantedLayerNorm"](8, bug), nn.Tanh(),
                              nn.Linear(8, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    if kind == "loss":                      # a regression net whose loss carries the bug
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
        targets = _inputs(rng, (batch, 2))
        return model, planted_mse(framework, bug), _inputs(rng, (batch, 6)), targets
    if kind == "twice":                     # a module called twice, one returning a tuple
        model = layers["TwiceTanh"](bug)
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    raise ValueError(f"unknown model kind {kind!r}")


def _inputs(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)
