"""Batch independence (Karpathy's recipe): example i's output depends only on example i's input.

A wrong ``view``/``reshape`` across the batch axis, a softmax over ``dim=0``, an RNN or
attention layer fed ``(batch, seq, ...)`` while it expects ``(seq, batch, ...)``: the model
trains, the loss falls, and every prediction quietly depends on the rest of the batch. The
check backpropagates from one example's output (a fixed random projection of it) and looks
at the gradient on the other examples' inputs, which must be exactly zero. For a model the
user declares causal it also checks that the output at position t has no gradient on input
positions after t (a missing or wrong attention mask).

It runs on a float64 deep copy in eval mode (in the model's own dtype if its forward fails in
float64; a missing dependence gives an exact zero in any precision): batch norm in train mode mixes
examples by
design, in eval mode it does not, so a healthy batch-norm model stays quiet. Token-id inputs
have no gradient; for them the gradient is read on the output of every embedding layer.
The module where the mixing happens is named: the innermost module whose own contribution
to its input gradient (what its backward hook sees) leaks into other rows (positions) while
its output gradient does not (with several mixing layers, the one nearest the output).
"""
import contextlib
import warnings

import numpy as np

from .. import outputs
from ..backends import get_backend
from ..errors import DiagnosticsError, require
from ..findings import Finding
from .check_result import CheckResult

_HOOK_WARNINGS = ("Full backward hook is firing", "For backward hooks to be called")
LEAK = 1e-9          # a gradient share above this (relative to the largest) is a dependence
ROWS = 2             # examples backpropagated from (first and last)
POSITIONS = 3        # positions checked in a causal model (first, middle, one before last)


def check_batch_independence(model, inputs, *, causal=False, output=None, seed=0):
    """BATCH_MIXING and CAUSALITY_LEAK findings for a torch ``model`` on a batch ``inputs``.

    ``inputs``: one batch, examples on the first axis (floats, or token ids for a model that
    starts with an embedding); at least 2 examples. A dict is the model's keyword inputs
    (``input_ids``, ``attention_mask``, ...): the examples probed are those of ``input_ids``
    (else of its first tensor), the other entries go along unchanged. ``causal``: also check
    that the output at position t (second axis of output and inputs) depends only on positions <= t.
    ``output``: picks the prediction from the model's output when it is a tuple or dict (a
    callable, an index or a key); by default the rule of ``diagnostics.outputs``: ``logits``,
    else the first floating entry that is not a 0-d tensor (a ``(loss, logits)`` tuple of a
    model given ``labels=`` gives its logits).
    The model is not changed: the check works on a copy. Returns a ``CheckResult`` (a list
    of findings with ``passed`` and a readable ``str()``).
    """
    return CheckResult(_check(model, inputs, causal=causal, output=output, seed=seed),
                       check="batch independence")


def _check(model, inputs, *, causal, output, seed):
    backend = get_backend(model)
    require(backend.name == "torch", "model", "a torch.nn.Module (the check reads input "
            "gradients through torch's autograd)", backend.name)
    torch = backend.torch
    keyword, others = None, {}
    if isinstance(inputs, dict):
        tensors = [k for k, v in inputs.items() if isinstance(v, torch.Tensor)]
        require(bool(tensors), "inputs", "a torch.Tensor batch, or a dict of keyword inputs "
                "holding one", f"a dict without tensors ({sorted(inputs)})")
        keyword = "input_ids" if "input_ids" in tensors else tensors[0]
        others = {k: v for k, v in inputs.items() if k != keyword}
        inputs = inputs[keyword]
    require(isinstance(inputs, torch.Tensor), "inputs", "a torch.Tensor batch",
            type(inputs).__name__)
    require(inputs.dim() >= 1 and inputs.shape[0] >= 2, "inputs",
            "a batch of at least 2 examples on the first axis", f"shape {tuple(inputs.shape)}")
    require(not causal or inputs.dim() >= 2, "inputs",
            "(batch, positions, ...) for a causal check", f"shape {tuple(inputs.shape)}")
    require(not inputs.dtype.is_complex, "inputs", "floats or integer token ids",
            str(inputs.dtype))
    run = _Run(backend, inputs, keyword, others, causal=causal, output=output, seed=seed)
    attempts = ((np.float64, True), (np.float64, False), (None, False))
    for number, (dtype, localize) in enumerate(attempts):
        # float64 first; without backward hooks if they break the forward (in-place ops on
        # a hooked output); in the model's own dtype if float64 fails
        try:
            findings = run.findings(dtype, localize=localize)
        except DiagnosticsError:
            if number == len(attempts) - 1:
                raise
            continue
        break
    if findings and dtype is not None and not _confirmed(run, findings):
        return []
    return findings


def _confirmed(run, findings):
    """Whether the model in its own dtype shows the finding the float64 copy showed: a copy
    whose forward differs from the user's (a kernel that reads a float32 mask next to float64
    queries differently) must not report a leak the user's model does not have. A missing
    dependence is an exact zero in any precision, so a real one shows in both; where the
    model's own dtype is float64, or its forward cannot run again, the finding stands."""
    if run.dtype == np.float64:
        return True
    try:
        again = run.findings(None, localize=False)
    except DiagnosticsError:
        return True
    return {f.code for f in again} >= {f.code for f in findings}


class _Run:
    """The check's inputs; ``findings`` runs it on a fresh copy in a given dtype."""

    def __init__(self, backend, inputs, keyword, others, *, causal, output, seed):
        self.backend, self.inputs, self.keyword, self.others = backend, inputs, keyword, others
        self.causal, self.output, self.seed = causal, output, seed
        self.dtype = backend.floating_dtype()

    def findings(self, dtype, *, localize):
        """The findings on a copy in ``dtype`` (None: the model's own) in eval mode; a
        ``DiagnosticsError`` when its forward or backward raises."""
        torch = self.backend.torch
        twin = self.backend.clone(dtype=dtype)
        twin.model.eval()
        x = self.inputs.detach().clone()
        if x.dtype.is_floating_point:
            x = x.to(dtype=torch.float64 if dtype else self.inputs.dtype).requires_grad_(True)
        probe = _Probe(torch, twin, x, localize=localize,
                       keyword=self.keyword, others=_cast(torch, self.others, dtype))
        casts = twin.float64_casts() if dtype else contextlib.nullcontext()
        with torch.random.fork_rng(devices=[]), probe, casts, warnings.catch_warnings():
            for text in _HOOK_WARNINGS:   # torch's notes about our own hooks, not the user's
                warnings.filterwarnings("ignore", message=text)
            try:
                result = probe.output(self.output)
                rng = np.random.default_rng(self.seed)
                findings = _batch_findings(probe, result, rng)
                if self.causal and not findings:
                    findings = _causal_findings(probe, result, rng, self.inputs.shape[1])
            except RuntimeError as error:  # the backward through the user's model
                raise DiagnosticsError(f"model: the backward pass on a copy of the model "
                                       f"raised RuntimeError: {error}") from error
        return findings


class _Probe:
    """The copy, its input-gradient source, and a backward hook on every module that keeps
    the gradient of its output and the part of its input gradient that flows through it."""

    def __init__(self, torch, twin, x, *, localize=True, keyword=None, others=None):
        self.torch, self.twin, self.x = torch, twin, x
        self.keyword, self.others = keyword, others or {}
        self.rows = x.shape[0]
        self.localize = localize
        self.order = [name for name, _ in twin.model.named_modules()]
        self.grads = {}         # module name -> (input grads through it, output grads)
        self.sources = []       # the embedding output that stands for token inputs
        self._handles = []

    def __enter__(self):
        embedding = self.torch.nn.Embedding
        for name, module in self.twin.model.named_modules():
            if self.localize and not getattr(module, "inplace", False):
                self._handles.append(module.register_full_backward_hook(self._recorder(name)))
            if isinstance(module, embedding) and not self.x.is_floating_point():
                self._handles.append(module.register_forward_hook(self._source))
        return self

    def __exit__(self, *exc):
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _recorder(self, name):
        def hook(module, grad_input, grad_output):
            self.grads[name] = (tuple(g for g in grad_input if g is not None),
                                tuple(g for g in grad_output if g is not None))
        return hook

    def _source(self, module, args, out):
        if (not self.sources and isinstance(out, self.torch.Tensor) and out.requires_grad
                and out.dim() >= 2 and out.shape[0] == self.rows):
            out.retain_grad()
            self.sources.append(out)

    def output(self, pick):
        try:
            result = (self.twin.forward(self.x) if self.keyword is None
                      else self.twin.model(**self.others, **{self.keyword: self.x}))
        except Exception as error:  # the user's forward: report it, do not crash inside
            raise DiagnosticsError(f"model: the forward pass on a copy of the model raised "
                                   f"{type(error).__name__}: {error}") from error
        return _pick(self.twin, result, pick)

    def gradients(self, result, weight):
        """Backpropagate ``sum(result * weight)``: the input gradient, and per module the
        gradients its backward hook saw."""
        source = self.x if self.x.is_floating_point() else next(iter(self.sources), None)
        if source is None or not result.requires_grad:
            return None, {}
        source.grad = None
        self.grads = {}
        (result * weight).sum().backward(retain_graph=True)
        return source.grad, self.grads


def _cast(torch, others, dtype):
    """The other keyword inputs for the copy: floating tensors in its dtype, detached."""
    cast = {}
    for key, value in others.items():
        if isinstance(value, torch.Tensor):
            value = value.detach()
            if value.is_floating_point() and dtype is not None:
                value = value.to(torch.float64)
        cast[key] = value
    return cast


def _batch_findings(probe, result, rng):
    require(result.dim() >= 1, "output", f"a prediction per example ({probe.rows} examples)",
            "a scalar")
    if result.shape[0] != probe.rows:
        return [_moved_batch_axis(probe.rows, tuple(result.shape))]
    rows = sorted({0, probe.rows - 1})[:ROWS]
    for row in rows:
        weight = probe.torch.zeros_like(result)
        weight[row] = probe.torch.from_numpy(rng.standard_normal(tuple(result[row].shape)))
        grad, modules = probe.gradients(result, weight)
        if grad is None:
            return []   # no gradient reaches the inputs: nothing to judge here
        share, other = _leak(grad, row)
        if share > LEAK:
            where = _culprit(probe, modules, lambda g: g.dim() >= 1 and g.shape[0] == probe.rows
                             and _leak(g, row)[0] > LEAK)
            return [Finding(
                "BATCH_MIXING", "error", where,
                f"example {row}'s output depends on other examples of the batch: its "
                f"gradient reaches example {other}'s input ({share:.2g} of the largest "
                f"gradient){_in(where)}; predictions change with whatever else is in the batch",
                "look for a view/reshape that moves the batch axis (use permute/transpose), a "
                "softmax or normalisation over dim=0, or an RNN/attention layer fed "
                "(batch, seq, ...) without batch_first=True",
                {"row": row, "other_row": other, "leak": share, "module": where})]
    return []


def _moved_batch_axis(rows, shape):
    """BATCH_MIXING for an output whose first axis is not the batch: a transpose or view moved
    the batch axis, so row i of the output is not example i's prediction."""
    found = [axis for axis, size in enumerate(shape) if size == rows]
    where = (f"; the batch size is on axis {found[0]}" if found else
             "; no axis of the output has the batch size")
    return Finding(
        "BATCH_MIXING", "error", None,
        f"the output's first axis is {shape[0]}, not the batch size {rows}: the batch axis "
        f"moved (a transpose/view) in the output of shape {shape}{where}; a loss reading rows "
        f"as examples compares predictions with the wrong targets",
        "put the batch back on the first axis with permute/transpose (not view/reshape), or "
        "use batch_first=True in RNN/attention layers",
        {"batch_size": rows, "output_shape": list(shape),
         "batch_axis": found[0] if found else None})


def _causal_findings(probe, result, rng, steps):
    require(result.dim() >= 2 and result.shape[1] == steps, "output",
            f"a prediction with the positions ({steps}) on its second axis for a causal check",
            f"shape {tuple(result.shape)}")
    positions = sorted({0, steps // 2, max(steps - 2, 0)})[:POSITIONS]
    for t in positions:
        weight = probe.torch.zeros_like(result)
        weight[0, t] = probe.torch.from_numpy(rng.standard_normal(tuple(result[0, t].shape)))
        grad, modules = probe.gradients(result, weight)
        if grad is None or grad.dim() < 2:
            return []
        share, later = _future(grad[0], t)
        if share > LEAK:
            where = _culprit(probe, modules, lambda g: g.dim() >= 2 and g.shape[0] == probe.rows
                             and g.shape[1] == steps and _future(g[0], t)[0] > LEAK)
            return [Finding(
                "CAUSALITY_LEAK", "error", where,
                f"the output at position {t} depends on input position {later}, after it "
                f"({share:.2g} of the largest gradient){_in(where)}: the model sees the "
                f"future it is trained to predict, so its training loss is too good to be true",
                "apply a causal mask in every self-attention layer (is_causal=True or a "
                "triu(-inf, diagonal=1) mask) and check the mask's diagonal",
                {"position": t, "future_position": later, "leak": share, "module": where})]
    return []


def _leak(grad, row):
    """The largest gradient share on rows other than ``row``, and where it is."""
    magnitude = grad.detach().abs().reshape(grad.shape[0], -1).amax(dim=1)
    total = float(magnitude.max())
    if total == 0.0:
        return 0.0, None
    others = magnitude.clone()
    others[row] = 0
    other = int(others.argmax())
    return float(others[other]) / total, other


def _future(grad, t):
    """The largest gradient share on positions after ``t`` (``grad``: positions first)."""
    magnitude = grad.detach().abs().reshape(grad.shape[0], -1).amax(dim=1)
    total = float(magnitude.max())
    if total == 0.0 or t + 1 >= grad.shape[0]:
        return 0.0, None
    later = int(magnitude[t + 1:].argmax()) + t + 1
    return float(magnitude[later]) / total, later


def _culprit(probe, modules, leaks):
    """The innermost module whose own contribution to its input gradient leaks while the
    gradient of its output does not: where the mixing happens."""
    found = None
    for name in probe.order:
        if name not in modules:
            continue
        inputs, grads_out = modules[name]
        if any(leaks(g) for g in inputs) and not any(leaks(g) for g in grads_out):
            if found is None or found == "" or name.startswith(found + "."):
                found = name
    return found if found else None


def _in(where):
    return f"; it happens in '{where}' (the mixing layer nearest the output)" if where else ""


def _pick(backend, result, pick):
    """The prediction in the model's output by the one rule of ``diagnostics.outputs``
    (``output=`` first, then a tensor, ``logits``, the first floating entry that is not a
    0-d loss)."""
    torch = backend.torch
    try:
        chosen = outputs.pick(result, outputs.select_key(backend, result, selector=pick))
    except LookupError:
        chosen = None
    require(isinstance(chosen, torch.Tensor), "output",
            "a model output that is, or holds, a tensor", type(result).__name__)
    return chosen
