"""Buggy ``torch.autograd.Function``s: torch's forward, a hand-written backward with one mistake.

A gradient bug is planted in a torch model by swapping the target module's forward for one of
these (see ``gradient.py``). Each class is one bug: the forward is torch's, and the backward is
the right formula except for the line marked ``# bug``. Imported only when a torch bench is used.
"""
import torch
import torch.nn.functional as F
from torch.autograd import Function


# ------------------------------------------------------------------------ Linear
class _LinearFunction(Function):
    """torch's linear forward, saving what the buggy Linear backwards below read."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return F.linear(x, weight, bias)


class LinearInputTransposed(_LinearFunction):
    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad @ weight.T            # bug: grad @ weight
        return grad_x, grad.T @ x, grad.sum(0)


class LinearWeightTransposed(_LinearFunction):
    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_weight = x.T @ grad            # bug: grad.T @ x
        return grad @ weight, grad_weight, grad.sum(0)


class LinearInputSignFlipped(_LinearFunction):
    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = -(grad @ weight)           # bug: grad @ weight
        return grad_x, grad.T @ x, grad.sum(0)


class LinearWeightScaled(_LinearFunction):
    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_weight = 2 * (grad.T @ x)      # bug: grad.T @ x
        return grad @ weight, grad_weight, grad.sum(0)


class LinearBiasMean(_LinearFunction):
    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_bias = grad.mean(0)            # bug: grad.sum(0)
        return grad @ weight, grad.T @ x, grad_bias


# ------------------------------------------------------------------ activations
class ReLUMaskDropped(Function):
    @staticmethod
    def forward(ctx, x):
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad):
        return grad                         # bug: grad * (out > 0)


class SigmoidDerivativeWrong(Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.sigmoid(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out                   # bug: grad * out * (1 - out)


class TanhDerivativeWrong(Function):
    @staticmethod
    def forward(ctx, x):
        out = torch.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1 - out)             # bug: grad * (1 - out * out)


# ------------------------------------------------------------------------- conv
class Conv2dKernelNotFlipped(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, stride, padding):
        ctx.save_for_backward(x, weight)
        ctx.geometry = (stride, padding)
        return F.conv2d(x, weight, bias, stride, padding)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        stride, padding = ctx.geometry
        unflipped = weight.flip(-2, -1)     # bug: the input gradient needs `weight` as is here
        grad_x = torch.nn.grad.conv2d_input(x.shape, unflipped, grad, stride, padding)
        grad_weight = torch.nn.grad.conv2d_weight(x, weight.shape, grad, stride, padding)
        return grad_x, grad_weight, grad.sum((0, 2, 3)), None, None


# ------------------------------------------------------------------------- loss
class CrossEntropyNotDivided(Function):
    @staticmethod
    def forward(ctx, logits, target):
        ctx.save_for_backward(logits, target)
        return F.cross_entropy(logits, target)

    @staticmethod
    def backward(ctx, grad):
        logits, target = ctx.saved_tensors
        onehot = F.one_hot(target, logits.shape[1]).to(logits.dtype)
        grad_logits = (logits.softmax(1) - onehot) * grad   # bug: ... * grad / batch size
        return grad_logits, None


# -------------------------------------------------------------------------- add
class AddBroadcastNotReduced(Function):
    @staticmethod
    def forward(ctx, x, offset):
        return x + offset

    @staticmethod
    def backward(ctx, grad):
        grad_offset = grad[0]               # bug: grad.sum(0), the sum over the batch
        return grad, grad_offset


# ---------------------------------------------------------------- normalization
class LayerNormNoMeanTerm(Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        mean = x.mean(-1, keepdim=True)
        invstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + eps)
        x_hat = (x - mean) * invstd
        ctx.save_for_backward(x_hat, invstd, weight)
        return x_hat * weight + bias

    @staticmethod
    def backward(ctx, grad):
        x_hat, invstd, weight = ctx.saved_tensors
        grad_x_hat = grad * weight
        var_term = x_hat * (grad_x_hat * x_hat).mean(-1, keepdim=True)
        grad_x = invstd * (grad_x_hat - var_term)   # bug: - grad_x_hat.mean(-1) missing
        return grad_x, (grad * x_hat).sum(0), grad.sum(0), None


class BatchNormNoMeanTerm(Function):
    """Training-mode batch norm over (N, C); the running statistics are updated by torch."""

    @staticmethod
    def forward(ctx, x, weight, bias, running_mean, running_var, momentum, eps):
        out = F.batch_norm(x, running_mean, running_var, weight, bias, True, momentum, eps)
        invstd = torch.rsqrt(x.var(0, unbiased=False) + eps)
        x_hat = (x - x.mean(0)) * invstd
        ctx.save_for_backward(x_hat, invstd, weight)
        return out

    @staticmethod
    def backward(ctx, grad):
        x_hat, invstd, weight = ctx.saved_tensors
        var_term = x_hat * (grad * x_hat).mean(0)
        grad_x = invstd * weight * (grad - var_term)   # bug: - grad.mean(0) missing
        return grad_x, (grad * x_hat).sum(0), grad.sum(0), None, None, None, None
