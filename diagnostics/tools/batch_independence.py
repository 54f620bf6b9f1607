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
import functools
import warnings

import numpy as np

from .. import outputs
from ..backends import get_backend
from ..errors import DiagnosticsError, require
from ..findings import Finding
from . import batch_inputs, batch_padding, batch_permutation
from .check_result import CheckResult

_HOOK_WARNINGS = ("Full backward hook is firing", "For backward hooks to be called")
LEAK = 1e-9          # a gradient share above this (relative to the largest) is a dependence
ROWS = 2             # examples backpropagated from (first and last)
POSITIONS = 3        # positions checked in a causal model (first, middle, one before last)


def check_batch_independence(model, inputs, *, causal=False, output=None, seed=0,
                             pad_value=None):
    """BATCH_MIXING, BATCH_POSITION_DEPENDENT, CAUSALITY_LEAK and PADDING_CHANGES_OUTPUT
    findings for a torch ``model`` on a batch ``inputs``.

    ``inputs``: one batch, examples on the first axis (floats, or token ids for a model that
    starts with an embedding); at least 2 examples. A tuple or list is the model's positional
    inputs, a dict its keyword inputs (``input_ids``, ``attention_mask``, ...): every tensor
    whose first axis has the batch size (read on ``input_ids``, else on the first tensor) is
    probed for mixing and permuted with the batch; the others go along unchanged. ``causal``:
    also check that the output at position t (second axis of output and inputs) depends only
    on positions <= t. ``pad_value``: also pad every sequence input at the end (as a collate
    does when a longer neighbour joins) and require each example's output to stay the same
    (None: no padding test). ``output``: picks the prediction from the model's output when it
    is a tuple or dict (a callable, an index or a key); by default the rule of
    ``diagnostics.outputs``: ``logits``, else the first floating entry that is not a 0-d
    tensor (a ``(loss, logits)`` tuple of a model given ``labels=`` gives its logits).
    The model is not changed: the check works on a copy. Returns a ``CheckResult`` (a list
    of findings with ``passed`` and a readable ``str()``; ``note`` says what was not judged).
    """
    require(isinstance(causal, bool), "causal", "True or False", repr(causal))
    require(isinstance(seed, int) and not isinstance(seed, bool), "seed", "an int", repr(seed))
    require(pad_value is None or (isinstance(pad_value, (int, float))
                                  and not isinstance(pad_value, bool)), "pad_value",
            "None or a number (the id or value a collate pads sequences with)", repr(pad_value))
    notes = []
    findings = _check(model, inputs, causal=causal, output=output, seed=seed,
                      pad_value=pad_value, notes=notes)
    return CheckResult(findings, check="batch independence", note="; ".join(dict.fromkeys(notes)))


def _check(model, inputs, *, causal, output, seed, pad_value, notes):
    backend = get_backend(model)
    require(backend.name == "torch", "model", "a torch.nn.Module (the check reads input "
            "gradients through torch's autograd)", backend.name)
    torch = backend.torch
    batch = batch_inputs.parse(torch, inputs)
    first = batch.value(batch.primary)
    require(not causal or first.dim() >= 2, "inputs",
            "(batch, positions, ...) for a causal check", f"shape {tuple(first.shape)}")
    layout = None
    if pad_value is not None:
        layout = batch_padding.layout(torch, batch, pad_value)
    run = _Run(backend, batch, causal=causal, output=output, seed=seed, layout=layout)
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
    notes.extend(run.notes)
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

    def __init__(self, backend, batch, *, causal, output, seed, layout):
        self.backend, self.batch, self.layout = backend, batch, layout
        self.causal, self.output, self.seed = causal, output, seed
        self.dtype = backend.floating_dtype()
        self.notes = []

    def findings(self, dtype, *, localize):
        """The findings on a copy in ``dtype`` (None: the model's own) in eval mode; a
        ``DiagnosticsError`` when its forward or backward raises. The probes run in the order
        of their causes: mixing first (a model that mixes examples also moves them when they
        are permuted or padded), then the position in the batch, causality, and padding (a
        causal leak also lets appended pads reach earlier positions)."""
        torch = self.backend.torch
        twin = self.backend.clone(dtype=dtype)
        twin.model.eval()
        batch = batch_inputs.copied(torch, self.batch, dtype)
        probe = _Probe(torch, twin, batch, localize=localize)
        outputs_ = _Outputs(torch, twin, self.output, tolerance=_noise(self.dtype),
                            seed=self.seed)
        casts = twin.float64_casts() if dtype else contextlib.nullcontext()
        self.notes = []
        with torch.random.fork_rng(devices=[]), probe, casts, warnings.catch_warnings():
            for text in _HOOK_WARNINGS:   # torch's notes about our own hooks, not the user's
                warnings.filterwarnings("ignore", message=text)
            try:
                result = probe.output(self.output)
                rng = np.random.default_rng(self.seed)
                findings = _batch_findings(probe, result, rng)
                unjudged = None
                if not findings:
                    unjudged = outputs_.deterministic(batch)
                    if unjudged is not None:
                        self.notes.append(unjudged)
                    else:
                        findings = batch_permutation.findings(outputs_, batch, rng)
                if self.causal and not any(f.code == "BATCH_MIXING" for f in findings):
                    findings += _causal_findings(probe, result, rng,
                                                 batch.value(batch.primary).shape[1])
                if (self.layout is not None and unjudged is None
                        and not any(f.code in ("BATCH_MIXING", "CAUSALITY_LEAK")
                                    for f in findings)):
                    found, note = batch_padding.findings(outputs_, batch, self.layout)
                    findings += found
                    if note:
                        self.notes.append(note)
            except RuntimeError as error:  # the backward through the user's model
                raise DiagnosticsError(f"model: the backward pass on a copy of the model "
                                       f"raised RuntimeError: {error}") from error
        return findings


def _noise(dtype):
    """How far two forwards of one example may differ and still be the same computation: the
    square root of the model's own machine epsilon, relative to the largest output (3.4e-4
    in float32, 0.088 in bfloat16, 1.5e-8 in float64). The comparisons run on the float64
    copy, where summing in another order (another batch size or row, more zeros in a
    reduction) moves a value by about 1e-16 per operation: far below this. What a model in
    its own dtype cannot tell from its rounding is no change worth a finding, and any change
    a mechanism makes (a bias per row, pads in a mean) is of the order of the output itself."""
    return float(np.sqrt(np.finfo(dtype if dtype is not None else np.float32).eps))


class _Outputs:
    """Forwards of the copy without a graph, in eval mode, the prediction picked and in
    float64; every forward draws the same random numbers (``seed``)."""

    def __init__(self, torch, twin, pick, *, tolerance, seed):
        self.torch, self.twin, self.pick = torch, twin, pick
        self.tolerance, self.seed = tolerance, seed

    def __call__(self, batch, *, seed=None):
        torch = self.torch
        torch.manual_seed(self.seed if seed is None else seed)
        with torch.no_grad():
            try:
                result = batch.call(self.twin.model)
            except Exception as error:  # the user's forward: report it, do not crash inside
                raise DiagnosticsError(f"model: the forward pass on a copy of the model "
                                       f"raised {type(error).__name__}: {error}") from error
            return _pick(self.twin, result, self.pick).detach().to(torch.float64)

    def deterministic(self, batch):
        """None when two forwards of the batch with other random draws agree; else why the
        outputs cannot be compared (a forward that samples in eval mode)."""
        first, second = self(batch), self(batch, seed=self.seed + 1)
        if first.shape == second.shape and self.change(first, second) <= self.tolerance:
            return None
        return ("permutation and padding not judged: two forwards of the same batch in eval "
                "mode differ (the forward draws random numbers: sampling, noise, or dropout "
                "that ignores eval mode)")

    @staticmethod
    def change(before, after, scale=None):
        """The largest absolute difference, relative to the largest output (``scale``)."""
        scale = float(before.abs().max()) if scale is None else scale
        diff = float((before - after).abs().max()) if before.numel() else 0.0
        return diff / scale if scale > 0 else (0.0 if diff == 0 else float("inf"))


class _Probe:
    """The copy, its input-gradient sources (every batched floating input; the embedding
    outputs fed by a token input), and a backward hook on every module that keeps the
    gradient of its output and the part of its input gradient that flows through it."""

    def __init__(self, torch, twin, batch, *, localize=True):
        self.torch, self.twin = torch, twin
        self.rows = batch.rows
        self.localize = localize
        self.order = [name for name, _ in twin.model.named_modules()]
        self.grads = {}         # module name -> (input grads through it, output grads)
        self.slots = batch.batched(torch)
        values = {}
        for slot in self.slots:
            value = batch.value(slot)
            if value.is_floating_point():
                value = value.requires_grad_(True)
            values[slot] = value
        self.batch = batch.replaced(values)
        self.tokens = {s: v for s, v in values.items()
                       if not v.is_floating_point() and v.dtype != torch.bool}
        self.sources = {}       # slot -> tensors whose gradient stands for that input's
        self.unclaimed = []     # embedding outputs fed by no input as it was given
        self._handles = []

    def __enter__(self):
        embedding = self.torch.nn.Embedding
        for name, module in self.twin.model.named_modules():
            if self.localize and not getattr(module, "inplace", False):
                self._handles.append(module.register_full_backward_hook(self._recorder(name)))
            if isinstance(module, embedding) and self.tokens:
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
        if not (isinstance(out, self.torch.Tensor) and out.requires_grad and out.dim() >= 2
                and out.shape[0] == self.rows and args):
            return
        out.retain_grad()
        slot = self._fed_by(args[0])
        (self.unclaimed if slot is None else self.sources.setdefault(slot, [])).append(out)

    def _fed_by(self, ids):
        """The token input an embedding reads: the same tensor, else one equal to it."""
        for slot, value in self.tokens.items():
            if ids is value:
                return slot
        for slot, value in self.tokens.items():
            if (isinstance(ids, self.torch.Tensor) and ids.shape == value.shape
                    and bool((ids == value).all())):
                return slot
        return None

    def output(self, pick):
        try:
            result = self.batch.call(self.twin.model)
        except Exception as error:  # the user's forward: report it, do not crash inside
            raise DiagnosticsError(f"model: the forward pass on a copy of the model raised "
                                   f"{type(error).__name__}: {error}") from error
        primary = self.batch.primary
        if primary in self.tokens and primary not in self.sources and self.unclaimed:
            # the token input reaches its embedding changed (ids + offset): the first
            # embedding output stands for it, as it did before inputs were told apart
            self.sources[primary] = self.unclaimed[:1]
        return _pick(self.twin, result, pick)

    def inputs(self):
        """Per probed input slot, the tensors whose gradient is that input's."""
        found = {}
        for slot in self.slots:
            value = self.batch.value(slot)
            if value.is_floating_point():
                found[slot] = [value]
            elif slot in self.sources:
                found[slot] = self.sources[slot]
        return found

    def gradients(self, result, weight):
        """Backpropagate ``sum(result * weight)``: per input slot the gradients of its
        sources (None when no gradient reaches any input), and per module the gradients its
        backward hook saw."""
        sources = self.inputs()
        if not sources or not result.requires_grad:
            return None, {}
        for tensors in sources.values():
            for tensor in tensors:
                tensor.grad = None
        self.grads = {}
        (result * weight).sum().backward(retain_graph=True)
        grads = {slot: [t.grad for t in tensors if t.grad is not None]
                 for slot, tensors in sources.items()}
        grads = {slot: g for slot, g in grads.items() if g}
        return (grads or None), self.grads


def _batch_findings(probe, result, rng):
    require(result.dim() >= 1, "output", f"a prediction per example ({probe.rows} examples)",
            "a scalar")
    if result.shape[0] != probe.rows:
        return [_moved_batch_axis(probe.rows, tuple(result.shape))]
    rows = sorted({0, probe.rows - 1})[:ROWS]
    for row in rows:
        weight = probe.torch.zeros_like(result)
        weight[row] = probe.torch.from_numpy(rng.standard_normal(tuple(result[row].shape)))
        grads, modules = probe.gradients(result, weight)
        if grads is None:
            return []   # no gradient reaches the inputs: nothing to judge here
        leaks = {slot: _leak(g, row) for slot, g in grads.items()}
        slot = max(leaks, key=lambda s: leaks[s][0])   # the first input on a tie
        share, other = leaks[slot]
        if share > LEAK:
            where = _culprit(probe, modules, lambda g: g.dim() >= 1 and g.shape[0] == probe.rows
                             and _leak([g], row)[0] > LEAK)
            into = _entry(probe.batch, slot, len(grads))
            return [Finding(
                "BATCH_MIXING", "error", where,
                f"example {row}'s output depends on other examples of the batch: its "
                f"gradient reaches example {other}'s input{into} ({share:.2g} of the largest "
                f"gradient){_in(where)}; predictions change with whatever else is in the batch",
                "look for a view/reshape that moves the batch axis (use permute/transpose), a "
                "softmax or normalisation over dim=0, or an RNN/attention layer fed "
                "(batch, seq, ...) without batch_first=True",
                {"row": row, "other_row": other, "leak": share, "module": where,
                 "input": slot})]
    return []


def _entry(batch, slot, probed):
    """Where the mixing enters, in words, when the model has several inputs."""
    if probed == 1 and len(batch.slots()) == 1:
        return ""
    return f" {batch_inputs.name(slot, batch)}, where the mixing enters"


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
        grads, modules = probe.gradients(result, weight)
        grads = {slot: [g for g in gs if g.dim() >= 2 and g.shape[1] == steps]
                 for slot, gs in (grads or {}).items()}
        grads = {slot: gs for slot, gs in grads.items() if gs}
        if not grads:
            return []
        futures = {slot: _future([g[0] for g in gs], t) for slot, gs in grads.items()}
        slot = max(futures, key=lambda s: futures[s][0])
        share, later = futures[slot]
        if share > LEAK:
            where = _culprit(probe, modules, lambda g: g.dim() >= 2 and g.shape[0] == probe.rows
                             and g.shape[1] == steps and _future([g[0]], t)[0] > LEAK)
            return [Finding(
                "CAUSALITY_LEAK", "error", where,
                f"the output at position {t} depends on input position {later}, after it "
                f"({share:.2g} of the largest gradient){_in(where)}: the model sees the "
                f"future it is trained to predict, so its training loss is too good to be true",
                "apply a causal mask in every self-attention layer (is_causal=True or a "
                "triu(-inf, diagonal=1) mask) and check the mask's diagonal",
                {"position": t, "future_position": later, "leak": share, "module": where})]
    return []


def _magnitudes(grads):
    """Per index of the first axis, the largest gradient magnitude over ``grads`` (the
    tensors that stand for one input: itself, or the embedding outputs it feeds)."""
    return functools.reduce(lambda a, b: a.maximum(b), [
        g.detach().abs().reshape(g.shape[0], -1).amax(dim=1) for g in grads])


def _leak(grads, row):
    """The largest gradient share on rows other than ``row``, and where it is."""
    magnitude = _magnitudes(grads)
    total = float(magnitude.max())
    if total == 0.0:
        return 0.0, None
    others = magnitude.clone()
    others[row] = 0
    other = int(others.argmax())
    return float(others[other]) / total, other


def _future(grads, t):
    """The largest gradient share on positions after ``t`` (``grads``: positions first)."""
    magnitude = _magnitudes(grads)
    total = float(magnitude.max())
    if total == 0.0 or t + 1 >= magnitude.shape[0]:
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
