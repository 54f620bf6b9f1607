"""``compare_gradients``: minigrad's gradients next to torch's, parameter by parameter.

Both models are copied in float64 (the user's are left as they were); the torch copy's
parameters and buffers are copied into the minigrad copy by name, dropout is switched off in
both (their random masks cannot match), and one forward and backward pass runs on each.
"""
from dataclasses import dataclass

import numpy as np

from ..backends import MinigradBackend, TorchBackend
from ..errors import DiagnosticsError, require
from ..jsonable import to_jsonable

LOSSES = ("cross_entropy", "mse", "bce_with_logits")


@dataclass(frozen=True)
class ParameterComparison:
    name: str
    shape: tuple
    max_abs_error: float
    max_rel_error: float
    passed: bool

    def to_dict(self):
        return to_jsonable(self.__dict__)


@dataclass(frozen=True)
class CompareReport:
    """``passed`` when every parameter's gradient agrees within ``rtol``/``atol``."""

    passed: bool
    parameters: list
    loss_minigrad: float
    loss_torch: float
    output_max_abs_error: float
    rtol: float
    atol: float

    def to_dict(self):
        return to_jsonable({
            "passed": self.passed, "loss_minigrad": self.loss_minigrad,
            "loss_torch": self.loss_torch, "output_max_abs_error": self.output_max_abs_error,
            "rtol": self.rtol, "atol": self.atol,
            "parameters": [p.to_dict() for p in self.parameters]})

    def __str__(self):
        verdict = "gradients agree" if self.passed else "gradients DISAGREE"
        disagree = [p.name for p in self.parameters if not p.passed]
        lines = [f"minigrad vs torch: {verdict} ({len(self.parameters)} parameters, float64, "
                 f"rtol {self.rtol:g}, atol {self.atol:g})"
                 + (f": {', '.join(disagree)}" if disagree else "."),
                 f"loss    minigrad {self.loss_minigrad:.16g}  torch {self.loss_torch:.16g}  "
                 f"|diff| {abs(self.loss_minigrad - self.loss_torch):.1e}",
                 f"output  max |diff| {self.output_max_abs_error:.1e}", ""]
        rows = [("parameter", "shape", "max abs err", "max rel err", "agree")]
        rows += [(p.name, str(p.shape), f"{p.max_abs_error:.1e}", f"{p.max_rel_error:.1e}",
                  "yes" if p.passed else "NO") for p in self.parameters]
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        for row in rows:
            cells = [c.rjust(w) if i in (2, 3) else c.ljust(w)
                     for i, (c, w) in enumerate(zip(row, widths))]
            lines.append("  ".join(cells).rstrip())
        return "\n".join(lines)


def compare_gradients(minigrad_model, torch_model, loss, inputs, targets, *, rtol=1e-6,
                      atol=1e-9):
    """Compare the gradients of a minigrad model and its torch twin on one batch.

    ``loss``: one of ``LOSSES`` or a pair ``(minigrad_loss, torch_loss)`` of callables
    ``loss(output, targets)``. ``inputs``, ``targets``: NumPy arrays or tensors of either
    framework, alone or in tuples; integer targets stay integer. Parameter names and shapes
    must match (``"0.weight"`` in both); the torch model's values are used for both.
    """
    require(MinigradBackend.accepts(minigrad_model), "minigrad_model",
            "a minigrad.nn.Module", type(minigrad_model).__name__)
    require(TorchBackend.accepts(torch_model), "torch_model", "a torch.nn.Module",
            type(torch_model).__name__)
    require(rtol >= 0 and atol >= 0, "rtol/atol", "numbers >= 0", f"{rtol}, {atol}")
    mine, theirs = MinigradBackend(minigrad_model), TorchBackend(torch_model)
    _check_names(mine, theirs)
    loss_mine, loss_theirs = _losses(loss)
    inputs = tuple(_array(v, "inputs") for v in _as_tuple(inputs))
    targets = tuple(_array(v, "targets") for v in _as_tuple(targets))
    with mine.preserved(), theirs.preserved():
        mine_copy, theirs_copy = mine.clone(dtype=np.float64), theirs.clone(dtype=np.float64)
        _copy_values(theirs_copy, mine_copy)
        results = [_run(copy, loss_fn, inputs, targets, argument)
                   for copy, loss_fn, argument in ((mine_copy, loss_mine, "minigrad_model"),
                                                   (theirs_copy, loss_theirs, "torch_model"))]
    (out_m, value_m, grads_m), (out_t, value_t, grads_t) = results
    comparisons = [_compare(name, grads_m[name], grads_t[name], rtol, atol) for name in grads_t]
    return CompareReport(
        passed=all(c.passed for c in comparisons), parameters=comparisons,
        loss_minigrad=value_m, loss_torch=value_t,
        output_max_abs_error=float(np.max(np.abs(out_m - out_t))) if out_m.size else 0.0,
        rtol=rtol, atol=atol)


def _check_names(mine, theirs):
    shapes_m = {n: tuple(p.shape) for n, p in mine.named_parameters()}
    shapes_t = {n: tuple(p.shape) for n, p in theirs.named_parameters()}
    require(bool(shapes_t), "torch_model", "a module with parameters", "none")
    missing = sorted(set(shapes_t) - set(shapes_m))
    extra = sorted(set(shapes_m) - set(shapes_t))
    differ = sorted(n for n in set(shapes_m) & set(shapes_t) if shapes_m[n] != shapes_t[n])
    if missing or extra or differ:
        parts = [f"missing in minigrad: {missing}" if missing else "",
                 f"only in minigrad: {extra}" if extra else "",
                 "shapes differ: " + ", ".join(f"{n} {shapes_m[n]} vs {shapes_t[n]}"
                                               for n in differ) if differ else ""]
        raise DiagnosticsError("minigrad_model: expected the same parameter names and shapes "
                               "as torch_model; " + "; ".join(p for p in parts if p))


def _losses(loss):
    if isinstance(loss, str):
        require(loss in LOSSES, "loss", f"one of {LOSSES} or a pair of callables", repr(loss))
        import torch.nn.functional as torch_functional

        from minigrad import functional as minigrad_functional

        name = {"mse": "mse_loss", "bce_with_logits": "binary_cross_entropy_with_logits"}.get(
            loss, loss)
        return getattr(minigrad_functional, name), getattr(torch_functional, name)
    require(isinstance(loss, (tuple, list)) and len(loss) == 2 and all(map(callable, loss)),
            "loss", f"one of {LOSSES} or a pair (minigrad_loss, torch_loss) of callables",
            type(loss).__name__)
    return loss[0], loss[1]


def _as_tuple(values):
    return tuple(values) if isinstance(values, (tuple, list)) else (values,)


def _array(value, argument):
    if isinstance(value, np.ndarray):
        array = value
    elif hasattr(value, "detach"):          # a torch tensor
        array = value.detach().cpu().numpy()
    elif hasattr(value, "data") and isinstance(getattr(value, "data"), np.ndarray):
        array = value.data                  # a minigrad tensor
    else:
        raise DiagnosticsError(f"{argument}: expected NumPy arrays or tensors (minigrad or "
                               f"torch), alone or in a tuple, got {type(value).__name__}")
    require(array.size > 0, argument, "a non-empty batch", f"shape {array.shape}")
    return array.astype(np.float64) if array.dtype.kind == "f" else np.array(array, copy=True)


def _copy_values(source, target):
    """The torch copy's parameters and buffers into the minigrad copy, by name."""
    for name, _ in source.named_parameters():
        target.write_parameter(name, source.read_parameter(name))
    buffers = dict(target.named_buffers())
    for name, buffer in source.named_buffers():
        if name in buffers and buffers[name] is not None and buffer is not None:
            values = source.to_numpy(buffer)
            if tuple(buffers[name].shape) == values.shape:
                buffers[name].data = values.astype(buffers[name].data.dtype)
    for copy in (source, target):
        for _, module in copy.named_modules():
            if "Dropout" in type(module).__name__:
                module.eval()


def _run(copy, loss_fn, inputs, targets, argument):
    tensors = tuple(copy.from_numpy(a) for a in inputs)
    target_tensors = tuple(copy.from_numpy(a) for a in targets)
    try:
        output = copy.forward(tensors)
        loss = loss_fn(output, *target_tensors)
        copy.zero_grad()
        copy.backward(loss)
    except DiagnosticsError:
        raise
    except Exception as error:
        raise DiagnosticsError(f"{argument}: expected forward, loss and backward to run on "
                               f"the batch; they raised {type(error).__name__}: {error}") from error
    grads = {}
    for name, param in copy.named_parameters():
        grad = copy.read_gradient(name)
        grads[name] = np.zeros(tuple(param.shape)) if grad is None else grad
    return copy.to_numpy(output), copy.scalar(loss), grads


def _compare(name, mine, theirs, rtol, atol):
    difference = np.abs(mine - theirs)
    scale = np.maximum(np.maximum(np.abs(mine), np.abs(theirs)), atol)
    return ParameterComparison(
        name=name, shape=tuple(theirs.shape),
        max_abs_error=float(difference.max()) if difference.size else 0.0,
        max_rel_error=float((difference / scale).max()) if difference.size else 0.0,
        passed=bool(np.all(difference <= atol + rtol * np.abs(theirs))))
