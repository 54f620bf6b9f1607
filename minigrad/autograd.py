"""Reverse-mode differentiation over the graph of ``Context`` nodes, without recursion."""
import numpy as np


class GradientShapeError(RuntimeError):
    """A backward returned a gradient whose shape differs from its input's."""


def backward(root, grad=None, *, retain_graph=False):
    """Send ``grad`` (d output / d root) back through the graph that produced ``root``.

    Leaf tensors that require grad get the result added to ``.grad``; tensors with
    ``retain_grad()`` keep theirs too. Hooks registered with ``register_hook`` run on a
    tensor's gradient once all of it has arrived, and may replace it.
    """
    if not root.requires_grad:
        raise RuntimeError(
            "element 0 of tensors does not require grad and does not have a grad_fn")
    if grad is None:
        if root.data.size != 1:
            raise RuntimeError(
                f"grad can be implicitly created only for scalar outputs; "
                f"backward() was called on a tensor of shape {root.shape}: pass a gradient "
                f"of that shape")
        grad = np.ones_like(root.data)
    else:
        grad = np.asarray(getattr(grad, "data", grad), dtype=root.dtype)
        if grad.shape != root.shape:
            raise GradientShapeError(
                f"backward() got a gradient of shape {grad.shape} for a tensor of shape "
                f"{root.shape}")

    pending = {id(root): grad}
    for tensor in _topological_order(root):
        grad = pending.pop(id(tensor), None)
        if grad is None:
            continue
        if tensor._hooks:
            grad = _run_hooks(tensor, grad)
        ctx = tensor.grad_fn
        if ctx is None or tensor._retains_grad:
            _accumulate_into_tensor(tensor, grad)
        if ctx is None:
            continue
        if ctx.released:
            raise RuntimeError(
                f"Trying to backward through the graph a second time (through {ctx.name}): "
                f"its saved arrays were freed. Pass retain_graph=True to the first backward()")
        for inp, inp_grad in zip(ctx.inputs, _call_backward(ctx, grad)):
            if inp_grad is not None:
                _send(pending, inp, inp_grad)
        if not retain_graph:
            ctx.release()


def _send(pending, tensor, grad):
    """Add ``grad`` to what ``tensor`` has received so far in this pass: a tensor used twice
    (a residual, a tied weight) gets the sum of both uses."""
    key = id(tensor)
    earlier = pending.get(key)
    pending[key] = grad if earlier is None else earlier + grad


def _run_hooks(tensor, grad):
    for hook in tuple(tensor._hooks.values()):
        replaced = hook(grad)
        if replaced is not None:
            grad = np.asarray(getattr(replaced, "data", replaced))
    return grad


def _call_backward(ctx, grad):
    """Run one node's backward and check what it returns: one gradient per input, right shapes.

    Gives one array per input that needs a gradient, None for the others.
    """
    grads = ctx.function.backward(ctx, grad)
    if not isinstance(grads, tuple):
        grads = (grads,)
    if len(grads) != len(ctx.inputs):
        raise RuntimeError(
            f"{ctx.name}.backward returned {len(grads)} gradients, expected {len(ctx.inputs)} "
            f"(one per input of forward, None for inputs without a gradient)")
    checked = []
    for index, (inp, needed, inp_grad) in enumerate(zip(ctx.inputs, ctx.needs_input_grad, grads)):
        if inp_grad is None or not needed:
            checked.append(None)
            continue
        if not isinstance(inp_grad, np.ndarray):
            inp_grad = np.asarray(inp_grad)
        data = inp.data
        if inp_grad.shape != data.shape:
            raise GradientShapeError(
                f"{ctx.name}.backward returned a gradient of shape {inp_grad.shape} for "
                f"input {index}, which has shape {data.shape}")
        if inp_grad.dtype != data.dtype:
            inp_grad = inp_grad.astype(data.dtype)
        checked.append(inp_grad)
    return checked


def _accumulate_into_tensor(tensor, grad):
    if tensor.grad is None:
        tensor.grad = np.array(grad, dtype=tensor.dtype, copy=True)
    else:
        tensor.grad += grad


def _topological_order(root):
    """Tensors of the graph below ``root``, each before every tensor it was computed from."""
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        tensor, finished = stack.pop()
        if finished:
            order.append(tensor)
            continue
        if id(tensor) in visited:
            continue
        visited.add(id(tensor))
        stack.append((tensor, True))
        if tensor.grad_fn is None:
            continue
        for inp, needed in zip(tensor.grad_fn.inputs, tensor.grad_fn.needs_input_grad):
            if needed and id(inp) not in visited:
                stack.append((inp, False))
    order.reverse()
    return order
