"""The objective on rows of the batch, on the copy: ``loss_fn(model(inputs[rows]),
targets[rows])`` and its gradient, and which rows of the batch a tensor the step fed holds.

Rows are told by memory first (``torch.split``, ``chunk`` and slicing give views of the batch:
their offset and stride in the batch's storage say which rows), then by content (an indexed
copy, ``batch[perm]``), byte for byte.
"""
import numpy as np

from ... import outputs
from .capture import flat, modes, trainable
from .judge import CallGradients


class Objective:
    """The batch on ``model``, ``size`` rows: ``inputs`` a tensor, a tuple of positional
    tensors or a dict of keyword ones, whose rows are read from entry ``key`` (None: the tensor
    itself); ``targets`` a tensor, or a tuple/dict of them."""

    def __init__(self, torch, model, loss_fn, inputs, targets, *, key, seed):
        self.torch, self.model, self.loss_fn = torch, model, loss_fn
        self.inputs, self.targets, self.key, self.seed = inputs, targets, key, seed
        self.rows_of = inputs[key] if key is not None else inputs
        self.size = self.rows_of.shape[0]
        self.params = trainable(model)
        self._by_content = None

    def gradient(self, rows, flags):
        """The flat gradient of the loss on ``rows`` (a tuple of indices; None: all) with the
        modules in train/eval ``flags``."""
        torch = self.torch
        for param in self.params:
            param.grad = None
        index = None if rows is None else torch.as_tensor(rows, dtype=torch.long)
        torch.manual_seed(self.seed)
        with modes(self.model, flags), torch.enable_grad():
            output = self._forward(_take(torch, self.inputs, index, self.size))
            loss = self.loss_fn(output, _take(torch, self.targets, index, self.size))
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                raise ValueError(f"loss_fn returned {type(loss).__name__} of shape "
                                 f"{tuple(getattr(loss, 'shape', ()))}, not a scalar")
            loss.reshape(()).backward()
        gradient = flat(torch, self.params, {id(p): p.grad for p in self.params})
        for param in self.params:
            param.grad = None
        return gradient

    def at_outputs(self, calls, flags):
        """``(CallGradients per call, {missing row: objective's gradient there})`` for calls
        whose rows are known, or None when their outputs cannot be put together into the whole
        batch's (an entry not laid out by rows, a loss that fails on them)."""
        torch, size = self.torch, self.size
        keys = _batch_keys(torch, calls[0].output, len(calls[0].rows))
        if not keys or any(_batch_keys(torch, c.output, len(c.rows)) != keys for c in calls):
            return None
        upstream = frozenset().union(*(c.upstream for c in calls))
        judged = tuple(key for key in keys if key not in upstream)
        if not judged:
            return None
        supplied = {}
        for number, call in enumerate(calls):
            for place, row in enumerate(call.rows):
                supplied.setdefault(row, (number, place))
        missing = [row for row in range(size) if row not in supplied]
        extra = None
        if missing:
            with torch.no_grad(), modes(self.model, flags):
                extra = self._forward(_take(torch, self.inputs, torch.as_tensor(missing), size))
            if _batch_keys(torch, extra, len(missing)) != keys:
                return None
        offsets = np.cumsum([0] + [len(c.rows) for c in calls])
        after = {row: int(offsets[-1]) + place for place, row in enumerate(missing)}
        index = [int(offsets[supplied[row][0]]) + supplied[row][1] if row in supplied
                 else after[row] for row in range(size)]
        whole = {}
        for key in keys:
            pieces = [outputs.pick(c.output, key).detach() for c in calls]
            if extra is not None:
                pieces.append(outputs.pick(extra, key).detach())
            whole[key] = torch.cat(pieces)[torch.as_tensor(index)]
        gradient = self._output_gradient(calls[0].output, whole, self.targets, judged)
        if gradient is None:
            return None
        found, own = [], {}
        for call in calls:
            if call.rows not in own:
                rows = torch.as_tensor(call.rows)
                part = {key: outputs.pick(call.output, key).detach() for key in keys}
                own[call.rows] = self._output_gradient(
                    call.output, part, _take(torch, self.targets, rows, size), judged)
            step = np.concatenate([_rows(call.output_grads.get(key), outputs.pick(
                call.output, key)) for key in judged], axis=1)
            found.append(CallGradients(tuple(call.rows), step, gradient[list(call.rows)],
                                       own[call.rows]))
        return found, {row: gradient[row] for row in missing}

    def _forward(self, inputs):
        if isinstance(inputs, dict):
            return self.model(**inputs)
        return self.model(*inputs) if isinstance(inputs, tuple) else self.model(inputs)

    def _output_gradient(self, structure, values, targets, judged):
        """loss_fn's gradient at ``values`` (by entry key, put into ``structure``) on the
        ``judged`` entries, one row per batch row; None when the loss fails there or is not a
        scalar."""
        torch = self.torch
        leaves = {key: value.clone().requires_grad_(True) for key, value in values.items()}
        output = structure
        for key, value in outputs.entries(structure):
            output = outputs.replace(output, key, leaves[key] if key in leaves else (
                value.detach() if isinstance(value, torch.Tensor) else value))
        try:
            with torch.enable_grad():
                loss = self.loss_fn(output, targets)
                if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                    return None
                grads = torch.autograd.grad(loss.reshape(()), list(leaves.values()),
                                            allow_unused=True)
        except Exception:   # the user's loss on a structure it was not written for
            return None
        grads = dict(zip(leaves, grads))
        return np.concatenate([_rows(grads[k], leaves[k]) for k in judged], axis=1)

    def rows(self, fed):
        """The batch rows ``fed`` holds, as a tuple of indices, or None."""
        whole = self.rows_of
        if not hasattr(fed, "shape") or fed.dim() != whole.dim() or fed.dtype != whole.dtype:
            return None
        if tuple(fed.shape[1:]) != tuple(whole.shape[1:]) or fed.shape[0] == 0:
            return None
        return _view_rows(fed, whole) or self._content_rows(fed)

    def _content_rows(self, fed):
        if self._by_content is None:
            self._by_content = {}
            for index, row in enumerate(_row_bytes(self.rows_of)):
                self._by_content.setdefault(row, []).append(index)
        used, rows = {}, []
        for row in _row_bytes(fed):
            indices = self._by_content.get(row)
            if not indices:
                return None
            taken = used.get(row, 0)
            rows.append(indices[min(taken, len(indices) - 1)])
            used[row] = taken + 1
        return tuple(rows)


def _batch_keys(torch, output, count):
    """The floating tensor entries of ``output`` laid out by the rows fed (first axis)."""
    return tuple(key for key, value in outputs.entries(output)
                 if isinstance(value, torch.Tensor) and value.is_floating_point()
                 and value.dim() >= 1 and value.shape[0] == count)


def _rows(gradient, like):
    """``gradient`` (None: zeros like ``like``) as a float64 array of one row per batch row."""
    if gradient is None:
        return np.zeros((like.shape[0], max(1, like[0].numel())))
    array = gradient.detach().double().cpu().numpy()
    return array.reshape(array.shape[0], -1)


def _view_rows(fed, whole):
    """The rows of ``whole`` that ``fed`` views (a slice with a step), or None."""
    try:
        same = fed.untyped_storage().data_ptr() == whole.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return None
    stride = whole.stride(0)
    if not same or fed.stride()[1:] != whole.stride()[1:] or stride == 0:
        return None
    offset = fed.storage_offset() - whole.storage_offset()
    step = fed.stride(0) if fed.shape[0] > 1 else stride
    if offset % stride or step % stride or step <= 0:
        return None
    start, step = offset // stride, step // stride
    rows = tuple(range(start, start + step * fed.shape[0], step))
    return rows if rows[-1] < whole.shape[0] else None


def _row_bytes(tensor):
    array = np.ascontiguousarray(tensor.detach().cpu().numpy())
    return [row.tobytes() for row in array.reshape(array.shape[0], -1)]


def _take(torch, value, index, size):
    """``value`` restricted to the rows ``index`` (tensors whose first axis is the batch's;
    containers element-wise; anything else as it is)."""
    if index is None:
        return value
    if isinstance(value, torch.Tensor):
        return value[index] if value.dim() >= 1 and value.shape[0] == size else value
    if isinstance(value, dict):
        return {k: _take(torch, v, index, size) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_take(torch, v, index, size) for v in value)
    return value
