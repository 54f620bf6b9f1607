"""Full backward hooks on modules.

Identity ops on a call's inputs and outputs catch their gradients.
"""
import numpy as np

from ..function import Function


class BackwardHookCall:
    """The gradients of one module call, collected until the hooks can run with all of them.

    Mirrors ``torch.utils.hooks.BackwardHook``: ``hook(module, grad_input, grad_output)`` runs
    once the gradients for every input that requires grad have arrived (or, when no input
    requires grad, as soon as the output gradients are known), and may return replacement
    input gradients.
    """

    def __init__(self, module, hooks):
        self.module, self.hooks = module, hooks
        self.grad_input, self.grad_output = [], []
        self.waiting_inputs = 0

    def wrap_inputs(self, args):
        from ..tensor import Tensor

        wrapped = []
        self.grad_input = [None] * len(args)
        for index, arg in enumerate(args):
            if isinstance(arg, Tensor) and arg.requires_grad:
                self.waiting_inputs += 1
                arg = _InputGradient.apply(arg, self, index)
            wrapped.append(arg)
        return tuple(wrapped)

    def wrap_outputs(self, output):
        from ..tensor import Tensor

        outputs = output if isinstance(output, tuple) else (output,)
        self.grad_output = [None] * len(outputs)
        wrapped = tuple(
            _OutputGradient.apply(out, self, index)
            if isinstance(out, Tensor) and out.requires_grad else out
            for index, out in enumerate(outputs))
        return wrapped if isinstance(output, tuple) else wrapped[0]

    def output_arrived(self, index, grad):
        self.grad_output[index] = grad
        if self.waiting_inputs == 0:
            self._run_hooks()

    def input_arrived(self, index, grad):
        self.grad_input[index] = grad
        self.waiting_inputs -= 1
        if self.waiting_inputs == 0:
            self._run_hooks()
        return self.grad_input[index]

    def _run_hooks(self):
        for hook in list(self.hooks.values()):
            result = hook(self.module, tuple(self.grad_input), tuple(self.grad_output))
            if result is not None:
                self.grad_input = [None if g is None else np.asarray(getattr(g, "data", g))
                                   for g in result]


class _InputGradient(Function):
    @staticmethod
    def forward(ctx, a, call, index):
        ctx.call, ctx.index = call, index
        return a

    @staticmethod
    def backward(ctx, grad):
        return ctx.call.input_arrived(ctx.index, grad), None, None


class _OutputGradient(Function):
    @staticmethod
    def forward(ctx, a, call, index):
        ctx.call, ctx.index = call, index
        return a

    @staticmethod
    def backward(ctx, grad):
        ctx.call.output_arrived(ctx.index, grad)
        return grad, None, None
