"""``check_step_equivalence``: does the user's training step apply the gradient of the loss on
the whole batch?

Gradient accumulation that averages per-micro-batch means where the window's token count should
normalise (trl#2175, fixed in transformers PR #34191), a loss divided by the accumulation steps
twice, a micro-batch loop that drops the last rows, a part added twice: the loop trains and
prints a loss, and the step computes another objective. The check runs ``train_step`` once on a
copy of the model and optimizer (``capture``) and judges it where the loss meets the model: the
gradient the step's backward passes sent into each call's outputs against the gradient of
``loss_fn`` on the whole batch at those same outputs, row by row (``judge``): exact whatever the
model does with its micro-batches (batch norm, dropout). When they agree, the gradient read at
``optimizer.step()`` is compared with ``loss_fn``'s on the whole batch, which tells a term added
outside ``loss_fn``. Clipping between the last backward and the step is told apart (named in an
info); so is a GradScaler's scaling. A step that matches gives no finding: the result passes
and its ``note`` says so, with the relative difference measured (``evidence``), so that a
STEP_NOT_OBJECTIVE always means the step is wrong (or, as an info, could not be judged).
"""
import contextlib
import copy
import dataclasses

import numpy as np

from ...backends import get_backend
from ...errors import require
from ...findings import Finding
from ...monitor.kinds import DROPOUT, module_kind
from .._training import check_callable
from ..check_result import CheckResult
from . import judge
from .capture import NO_STEP, capture_step, trainable
from .objective import Objective

TOLERANCE = {"float64": 1e-7, "float32": 1e-4, "float16": 1e-2,
             "bfloat16": 1e-2}                  # relative: rounding of each precision
PRECISIONS = ("float32", "float64")
DECLARABLE = ("regularizer",)   # a term added outside loss_fn on purpose
SHOWN = 3        # parameters named where the gradients differ most

_ADVICE = {
    judge.SCALED: "normalise the loss once: divide each micro-batch's loss by the number of "
                  "micro-batches (or take the mean) exactly once; a constant factor also "
                  "rescales the learning rate of SGD, weight decay's balance and any clipping",
    judge.EQUAL: "sum the micro-batches' losses with reduction='sum' and divide by the whole "
                 "window's count of scored elements (e.g. targets != ignore_index), as "
                 "transformers does since PR #34191, instead of averaging per-micro-batch means",
    judge.DROPPED: "make the micro-batch loop cover every row (range(0, n, size), "
                   "torch.split(batch, size)) and accumulate each part's loss or gradient "
                   "(+=, one backward per part) instead of replacing it",
    judge.TWICE: "feed each micro-batch once and add its loss once per window",
    judge.OTHER: "compare your train_step line by line with loss_fn(model(inputs), targets)"
                 ".backward() on the same batch: the step computes another objective",
}


def check_step_equivalence(model, loss_fn, inputs, targets, *, train_step, optimizer=None,
                           precision="float32", declared=(), seed=0):
    """STEP_NOT_OBJECTIVE when ``train_step`` applies a gradient other than that of
    ``loss_fn(model(inputs), targets)`` on the whole batch.

    ``train_step(model, (inputs, targets), optimizer)``: your step (zero_grad, forward,
    backward(s), clipping, ``optimizer.step()``), run once on a deep copy of ``model`` and
    ``optimizer`` up to its first ``optimizer.step()``, which does not run. ``precision``:
    ``"float32"``, or ``"float64"`` to compare down to rounding's last digits (several times
    the cost on CPU); the model's own dtype when the step fails in it. ``loss_fn(output,
    targets)``: the objective, a scalar. ``inputs``: a tensor (examples on the first axis) or a
    dict of keyword tensors (rows read from ``input_ids``, else its first tensor).
    ``optimizer`` defaults to Adam over the model's parameters. Nothing of yours changes: the
    copies are stepped on, the RNG is restored; what your ``train_step`` changes outside its
    arguments before its step (a counter) is yours. ``declared=("regularizer",)``: your step
    adds a term outside ``loss_fn`` on purpose (weight decay in the loss, an auxiliary loss):
    when the loss's part is right, the rest is described in the note. Returns a
    ``CheckResult``: no finding when the step matches (``note`` says so and
    ``evidence["relative_difference"]`` is the difference measured), a warning or an error
    STEP_NOT_OBJECTIVE when it does not, an info one when it could not be judged.
    """
    require(precision in PRECISIONS, "precision", f"one of {PRECISIONS}", repr(precision))
    declared = (declared,) if isinstance(declared, str) else tuple(declared)
    require(all(d in DECLARABLE for d in declared), "declared",
            f"a tuple of {DECLARABLE}", repr(declared))
    verdict = _check(model, loss_fn, inputs, targets, train_step=train_step,
                     optimizer=optimizer, precision=precision, declared=declared, seed=seed)
    if isinstance(verdict, Matched):
        return CheckResult(check="step equivalence", note=verdict.note,
                           evidence=verdict.evidence)
    return CheckResult(verdict, check="step equivalence")


@dataclasses.dataclass(frozen=True)
class Matched:
    """The verdict on a step that applies loss_fn's gradient: what was compared, in words,
    and the numbers (``relative_difference``, ``precision``, a clip's words)."""

    note: str
    evidence: dict


def _check(model, loss_fn, inputs, targets, *, train_step, optimizer, precision, declared,
           seed):
    backend = get_backend(model)
    require(backend.name == "torch", "model", "a torch.nn.Module (the check reads gradients "
            "at a torch optimizer's step)", backend.name)
    torch = backend.torch
    check_callable(loss_fn, "loss_fn")
    check_callable(train_step, "train_step", "a callable train_step(model, (inputs, targets), "
                   "optimizer)")
    key = _rows_key(torch, inputs)
    require(bool(trainable(model)), "model", "a model with trainable parameters",
            "none that require a gradient")
    if optimizer is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    require(hasattr(optimizer, "param_groups") and callable(getattr(optimizer, "step", None)),
            "optimizer", "a torch.optim optimizer", type(optimizer).__name__)
    failures, own = [], str(trainable(model)[0].dtype).removeprefix("torch.")
    for attempt in dict.fromkeys((precision, own if own in TOLERANCE else precision)):
        with _untouched(torch, model) as original, _rng_kept(backend):
            result = _attempt(torch, model, optimizer, loss_fn, inputs, targets, key=key,
                              train_step=train_step, precision=attempt, declared=declared,
                              seed=seed)
        if original.touched:
            return [_not_judged("train_step changed the model it was built with, not the "
                                "`model` it was passed (it must train its arguments; yours "
                                "were put back)")]
        if isinstance(result, (list, Matched)):
            return result
        failures.append(result)
    return [Finding("STEP_NOT_OBJECTIVE", "error", "train_step",
                    f"the step could not be compared: {failures[-1]}",
                    suggestion="make train_step(model, (inputs, targets), optimizer) run on the "
                               "batch given (it is called with a copy of your model and "
                               "optimizer)")]


def _attempt(torch, model, optimizer, loss_fn, inputs, targets, *, key, train_step, precision,
             declared, seed):
    """The findings or ``Matched``, or a str saying why this precision could not judge."""
    dtype = getattr(torch, precision)
    try:
        copied, copied_optimizer = copy.deepcopy((model, optimizer))
        copied_loss = copy.deepcopy(loss_fn) if isinstance(loss_fn, torch.nn.Module) else loss_fn
    except Exception as raised:   # an uncopyable model or optimizer
        return f"the model or optimizer cannot be deep-copied ({type(raised).__name__}: {raised})"
    if trainable(copied)[0].dtype != dtype:
        copied.to(dtype)
        if isinstance(copied_loss, torch.nn.Module):
            copied_loss.to(dtype)
    _silence_dropout(torch, copied)
    batch_inputs, batch_targets = _cast(torch, inputs, dtype), _cast(torch, targets, dtype)
    objective = Objective(torch, copied, copied_loss, batch_inputs, batch_targets, key=key,
                          seed=seed)
    torch.manual_seed(seed)
    capture = capture_step(torch, copied, copied_optimizer, train_step,
                           (batch_inputs, batch_targets), batch_rows=objective.rows,
                           keywords=tuple(batch_inputs) if isinstance(batch_inputs, dict) else (),
                           positional=(len(batch_inputs) if isinstance(batch_inputs, tuple)
                                       else 0 if isinstance(batch_inputs, dict) else 1))
    if capture.error == NO_STEP and capture.scaled:
        return [_not_judged("a GradScaler skipped optimizer.step() (the scaled gradients held "
                            "inf or NaN, as it does while it settles its scale); run the check "
                            "with a smaller init_scale or after a few steps")]
    if capture.error == NO_STEP:
        return [Finding("STEP_NOT_OBJECTIVE", "warning", "train_step", NO_STEP,
                        suggestion="call optimizer.step() (or scaler.step(optimizer)) once "
                                   "per batch, after the backward passes")]
    if capture.error is not None:
        return capture.error
    if capture.other_optimizer and not np.any(capture.applied):
        return ("train_step stepped an optimizer other than the one it was passed, and the "
                "model it was passed got no gradient")
    try:
        return _judge(torch, copied, objective, capture, TOLERANCE[precision], precision,
                      declared)
    except Exception as raised:   # the user's model or loss, run by the check on parts
        return f"loss_fn(model(inputs), targets) raised {type(raised).__name__}: {raised}"


def _cleared(capture):
    """A finding when the step called zero_grad() after some of its backward passes, so that
    the gradients of the micro-batches before it never reach optimizer.step()."""
    early = [count for count in capture.cleared_after if count < capture.backward_passes] or \
        list(capture.cleared_after)
    if not early:
        return None
    last, total = max(early), capture.backward_passes
    kept = total - last
    text = (f"train_step clears the gradients (zero_grad) after {last} of its {total} "
            f"backward passes, before optimizer.step(): the step applies "
            + (f"only the last {kept} pass{'es' if kept > 1 else ''}" if kept else "nothing")
            + f"; the gradients of the first {last} never reach it")
    return Finding("STEP_NOT_OBJECTIVE", "warning", "train_step", text,
                   suggestion="call zero_grad() once per optimizer step, before the first "
                              "micro-batch's backward (or right after optimizer.step())",
                   evidence={"pattern": judge.DROPPED, "backward_passes": total,
                             "cleared_after": list(capture.cleared_after)})


def _judge(torch, model, objective, capture, tolerance, precision, declared):
    flags = capture.calls[0].modes if capture.calls else tuple(m.training
                                                               for m in model.modules())
    evidence = {"precision": precision}
    if any(call.low_precision for call in capture.calls):    # autocast: its own rounding
        tolerance = max(tolerance, TOLERANCE["bfloat16"])
        evidence["precision"] = f"{precision} under autocast"
    cleared = _cleared(capture)
    if cleared is not None:
        return [cleared]
    applied, clipping = _before_clipping(capture, tolerance)
    at_outputs = _at_outputs(objective, capture, flags, tolerance)
    if at_outputs is not None and at_outputs.pattern is not None:
        return [_finding(at_outputs, (), clipping, evidence)]
    if at_outputs is not None and _normalises_batches(torch, model, flags):
        return _matches(at_outputs.difference, clipping, evidence,
                        why=("batch-norm layers normalise each micro-batch over its own rows, "
                             "by design" if len(capture.calls) > 1 else
                             "its parameters are not compared again: batch-norm layers "
                             "normalise over the rows fed"))
    if at_outputs is not None and any(call.extra_inputs for call in capture.calls):
        return _matches(at_outputs.difference, clipping, evidence,
                        why="train_step feeds the model more than the batch (a carried "
                            "state, say), so its parameters' gradient is not compared with "
                            "loss_fn(model(inputs))'s")
    reference = objective.gradient(None, flags)
    if not np.any(reference):
        return [_not_judged("loss_fn's gradient on the whole batch is zero everywhere")]
    difference = judge.relative(applied, reference)
    if difference <= tolerance:
        return _matches(difference, clipping, evidence)
    objective.seed += 1
    again = objective.gradient(None, flags)
    objective.seed -= 1
    if judge.relative(again, reference) > tolerance:
        return [_not_judged("the model's forward pass is random in train mode beyond its "
                            "dropout layers (which the check turns off): the step cannot be "
                            "compared exactly")]
    verdict = judge.by_scale(applied, reference, tolerance)
    outside = at_outputs is not None        # the outputs' gradient was right: a term elsewhere
    finding = _finding(verdict, _most_different(model, applied, reference), clipping, evidence,
                       outside=outside)
    if outside and "regularizer" in declared:
        return Matched(finding.message + " (declared: a regularizer)", finding.evidence)
    return [finding]


def _at_outputs(objective, capture, flags, tolerance):
    """The Judgement read at the model's outputs, or None when the calls' rows or outputs
    cannot be read."""
    calls = capture.calls
    if not calls or any(call.rows is None for call in calls):
        return None
    found = objective.at_outputs(calls, flags)
    if found is None:
        return None
    return judge.at_outputs(*found, objective.size, tolerance)


def _normalises_batches(torch, model, flags):
    """Batch-norm layers in train mode: micro-batches are not the whole batch, by design."""
    batch_norm = torch.nn.modules.batchnorm._BatchNorm
    return any(flag and isinstance(m, batch_norm) for m, flag in zip(model.modules(), flags))


def _before_clipping(capture, tolerance):
    """``(gradient to judge, clipping in words or None)``: what the backward passes computed
    when the step only scaled it down or clamped it before applying it (clipping)."""
    applied, after = capture.applied, capture.after_backward
    if after is None or judge.relative(applied, after) <= tolerance:
        return applied, None
    factor = judge.scale_of(applied, after, tolerance)
    if factor is not None and 0 <= factor < 1:
        return after, f"scaled by {factor:.3g} between the last backward and the step (a clip " \
                      f"by norm)"
    changed = np.abs(applied - after) > tolerance * float(np.max(np.abs(after)))
    limit = float(np.max(np.abs(applied)))
    if changed.any() and np.allclose(np.abs(applied[changed]), limit, rtol=tolerance) and \
            np.all(np.abs(after[changed]) >= limit * (1 - tolerance)):
        return after, f"clamped to +-{limit:.3g} between the last backward and the step (a " \
                      f"clip by value)"
    return applied, None


def _finding(verdict, different, clipping, evidence, outside=False):
    pattern = verdict.pattern
    evidence = {**evidence, "relative_difference": verdict.difference, "pattern": pattern}
    if different:
        evidence["parameters"] = list(different)
    if verdict.factor is not None:
        evidence["factor"] = verdict.factor
    if verdict.parts:
        evidence.update(parts=[p.label for p in verdict.parts], rows_never_fed=len(verdict.missing))
    if verdict.weights:
        evidence.update(weights=list(verdict.weights), documented_weights=list(verdict.documented))
    text = _describe(verdict, outside, different)
    if clipping:
        text += f" (the gradient judged is the backward's, before it was {clipping})"
        evidence["clipping"] = clipping
    return Finding("STEP_NOT_OBJECTIVE", "warning", "train_step", text,
                   suggestion=_ADVICE[pattern], evidence=evidence)


def _describe(verdict, outside, different):
    where = " at the model's outputs" if verdict.at_outputs else ""
    off = f"relative difference {verdict.difference:.3g}{where} from the gradient of loss_fn " \
          f"on the whole batch"
    pattern, parts = verdict.pattern, verdict.parts
    if pattern == judge.SCALED:
        return f"train_step's gradient is the whole batch's loss gradient scaled by " \
               f"{verdict.factor:.4g} (a loss normalised twice, or summed where a mean was " \
               f"meant)"
    if pattern == judge.EQUAL:
        return (f"train_step's {len(parts)} micro-batches' mean losses are weighted equally "
                f"({_numbers(verdict.weights)}) where they hold different shares of the "
                f"batch's scored elements ({_numbers(verdict.documented)}): {off}")
    if pattern == judge.DROPPED:
        if verdict.missing:
            return (f"{len(verdict.missing)} of the batch's rows are dropped: train_step never "
                    f"feeds {judge.Part(verdict.missing, 1).label} to the model: {off}")
        lost = ", ".join(p.label for p in verdict.lost)
        return (f"{lost} are fed to the model but their loss is dropped before the gradient: "
                f"{off}")
    if pattern == judge.TWICE:
        twice = ", ".join(p.label for p in verdict.doubled)
        return f"the loss of {twice} is counted twice in train_step's gradient: {off}"
    if outside:
        return (f"train_step's loss sends loss_fn's gradient into the model's outputs, but its "
                f"parameters' gradient differs (a term outside loss_fn: a regulariser, an "
                f"auxiliary loss; or a gradient edited after backward), most in "
                f"{', '.join(different)}: {off}")
    if verdict.at_outputs:
        return (f"train_step's backward passes do not send loss_fn's gradient into the model's "
                f"outputs: its loss is another function of them (another loss or reduction, "
                f"a broadcast, a detached or missing term): {off}")
    if different:
        off += f", most in {', '.join(different)}"
    return f"train_step's gradient is not the gradient of loss_fn on the batch: {off}"


def _numbers(values):
    shown = ", ".join(f"{v:.3g}" for v in values[:6])
    return shown + (", ..." if len(values) > 6 else "")


def _matches(difference, clipping, evidence, why=None):
    text = (f"train_step's gradient is the gradient of loss_fn on the whole batch (relative "
            f"difference {difference:.2g})")
    if why:
        text = (f"train_step's loss weighs the model's outputs as loss_fn on the whole batch "
                f"does (relative difference {difference:.2g} at the outputs; {why})")
    if clipping:
        text += f"; then {clipping}"
    return Matched(text, {**evidence, "relative_difference": difference,
                          **({"clipping": clipping} if clipping else {})})


def _not_judged(reason):
    return Finding("STEP_NOT_OBJECTIVE", "info", "train_step", f"not judged: {reason}")


def _most_different(model, applied, reference):
    """The parameters whose gradients differ most (relative to the whole gradient)."""
    offset, gaps = 0, []
    by_id = {id(p): n for n, p in model.named_parameters()}
    for param in trainable(model):
        size = param.numel()
        gap = float(np.linalg.norm(applied[offset:offset + size]
                                   - reference[offset:offset + size]))
        gaps.append((gap, by_id.get(id(param), "?")))
        offset += size
    gaps.sort(reverse=True)
    return [name for gap, name in gaps[:SHOWN] if gap > 0]


def _rows_key(torch, inputs):
    """Where the batch's rows are read: None for a tensor, the first tensor's position in a
    tuple, ``input_ids`` (else the first tensor's key) in a dict."""
    if isinstance(inputs, (dict, tuple)):
        entries = inputs.items() if isinstance(inputs, dict) else enumerate(inputs)
        tensors = [k for k, v in entries if isinstance(v, torch.Tensor)]
        require(bool(tensors), "inputs", "a tensor, or a tuple or dict of tensors holding one",
                f"a {type(inputs).__name__} without tensors")
        key = "input_ids" if "input_ids" in tensors else tensors[0]
        shape = tuple(inputs[key].shape)
    else:
        require(isinstance(inputs, torch.Tensor), "inputs", "a torch.Tensor batch, or a tuple "
                "or dict of tensors", type(inputs).__name__)
        key, shape = None, tuple(inputs.shape)
    require(len(shape) >= 1 and shape[0] >= 1, "inputs",
            "a batch with examples on the first axis", f"shape {shape}")
    return key


def _cast(torch, value, dtype):
    """A copy of ``value`` (tensors; dicts, tuples and lists of them) with floating tensors in
    ``dtype`` (None: their own), so the step's in-place edits stay on the copy."""
    if isinstance(value, np.ndarray):
        value = torch.from_numpy(value)
    if isinstance(value, torch.Tensor):
        copied = value.detach().clone()
        return copied.to(dtype) if dtype is not None and copied.is_floating_point() else copied
    if isinstance(value, dict):
        return {k: _cast(torch, v, dtype) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_cast(torch, v, dtype) for v in value)
    return value


def _silence_dropout(torch, model):
    """Dropout off in the copy (layers, attention's and recurrent nets' own), so the step and
    the objective see one deterministic network."""
    for module in model.modules():
        if module_kind(module) == DROPOUT:
            module.p = 0.0
        elif isinstance(module, (torch.nn.MultiheadAttention, torch.nn.RNNBase)):
            module.dropout = 0.0


class _Touched:
    touched = False


@contextlib.contextmanager
def _untouched(torch, model):
    """Put the user's model back (gradients, parameters, buffers) if the step changed it;
    ``.touched`` says whether it did."""
    state = _Touched()
    params = list(model.parameters())
    saved = [(p.detach().clone(), None if p.grad is None else p.grad.detach().clone())
             for p in params]
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    try:
        yield state
    finally:
        with torch.no_grad():
            for param, (value, grad) in zip(params, saved):
                if not torch.equal(param, value):
                    param.copy_(value)
                    state.touched = True
                now = param.grad
                if (now is None) != (grad is None) or (
                        grad is not None and not torch.equal(now, grad)):
                    param.grad = grad
                    state.touched = True
            for buffer, value in buffers:
                if not torch.equal(buffer, value):
                    buffer.copy_(value)
                    state.touched = True


@contextlib.contextmanager
def _rng_kept(backend):
    """The global generators (NumPy's, Python's, torch's) put back as they were."""
    state = backend.rng_state()
    try:
        yield
    finally:
        backend.set_rng_state(state)
