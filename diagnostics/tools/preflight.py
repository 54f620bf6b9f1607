"""``preflight``: the checklist to run before a long training run, as code.

Each item is PASS, FAIL or SKIP, with findings: the parameters (the optimizer's must be the
model's, with an eps their dtype can hold: EPS_UNDERFLOWS), the forward pass, label dtype
and range (LABEL_DTYPE, checked before the framework raises), output/target shapes that would
broadcast silently (SHAPE_BROADCAST), the loss at init against that of an uninformative output
(-log(1/C) for C classes; BAD_INIT_LOSS), overfitting one batch (OVERFIT_FAILED), a few
training steps with the loss going down, and, watched by a ``Monitor`` over those steps,
activation statistics, gradient flow, STALE_GRADIENTS (with the user's ``train_step``) and
PARAMS_NOT_UPDATING; a gradient check on a small slice of the batch; last, what one batch
can show about the model and the labels: example i's output depends only on example i's
input (BATCH_MIXING; with ``causal=True``, position t only on positions <= t,
CAUSALITY_LEAK), no view or reshape moves axes where a permute was meant (torch, one forward;
VIEW_SCRAMBLES_AXES), output units the labels never use (LABEL_RANGE) and labels sorted by class
(LABELS_SORTED).
"""
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from .. import outputs
from ..batch import Batch
from ..errors import DiagnosticsError, require
from ..findings import Finding
from ..gradcheck.check import run_check
from ..gradcheck.report_text import headline as gradient_headline
from ..gradcheck.settings import Settings as GradientSettings
from ..jsonable import to_jsonable
from ..layouts import class_axis, rows_coupled
from ..monitor import Monitor
from ..monitor.checks.optimizer_eps import eps_finding
from ..monitor.probes.optimizer_eps import lost_eps
from . import _training as T
from . import overfit
from .batch_independence import check_batch_independence
from .contexts import eval_mode
from .label_checks import check_batch_label_order, check_label_range
from .next_token import misaligned_targets
from .overfit import DEFAULT_LR
from .reshapes import reshape_findings, watch_reshapes

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
TRAIN_STEPS = 8           # steps watched by the Monitor
OVERFIT_STEPS = 200
GRADCHECK_ROWS = 4        # the slice of the batch the gradient check uses
INIT_LOSS_FACTOR = 1.5    # BAD_INIT_LOSS above this times the uninformative output's loss...
INIT_LOSS_MARGIN = 0.1    # ...and at least this much above it
# For a squared error, an all-zero output scores mean(y**2), and a fresh net's output adds
# about mean(output**2): the ratio is 1 + (output scale / target scale)**2, which a healthy
# init puts anywhere from about 1 to 3 when the targets are small. Above 10 the outputs are
# over 3 times the targets' scale.
SQUARED_INIT_LOSS_FACTOR = 10.0
IGNORE_INDEX = -100       # the class index torch's cross-entropy skips
LABELS_PER_CLASS = 20     # one batch tells an unused output unit only with this many labels
                          # per unit (a class rarer than 1/4 of its share is then seldom absent)
ORDER_PARTS = 4           # the batch is read as this many consecutive parts for label order

ACTIVATION_CODES = ("DEAD_UNITS", "SATURATED_ACTIVATIONS", "EXPLODING_ACTIVATIONS",
                    "COLLAPSED_ACTIVATIONS")
FLOW_CODES = ("VANISHING_GRADIENTS", "EXPLODING_GRADIENTS", "NO_GRADIENT")


@dataclass
class CheckItem:
    """One line of the checklist."""

    name: str
    status: str
    summary: str
    findings: list = field(default_factory=list)

    def to_dict(self):
        return to_jsonable({"name": self.name, "status": self.status, "summary": self.summary,
                            "findings": [finding.to_dict() for finding in self.findings]})


@dataclass
class PreflightReport:
    """The checklist: ``items`` in order; ``passed`` when none FAILed; all ``findings``."""

    items: list
    model: str

    @property
    def passed(self):
        return all(item.status != FAIL for item in self.items)

    @property
    def findings(self):
        return [finding for item in self.items for finding in item.findings]

    @property
    def verdict(self):
        """``all 12 checks passed``, or ``11 passed, 1 skipped (stale gradients: give
        train_step to check your loop)``, or ``2 of 12 FAILED, ...``: a skipped item is
        not a passed one."""
        counts = {status: sum(item.status == status for item in self.items)
                  for status in (PASS, FAIL, SKIP)}
        skipped = [item for item in self.items if item.status == SKIP]
        if not counts[FAIL] and not skipped:
            return f"all {len(self.items)} checks passed"
        parts = [f"{counts[FAIL]} of {len(self.items)} FAILED"] if counts[FAIL] else []
        parts.append(f"{counts[PASS]} passed")
        if skipped:
            reasons = "; ".join(f"{item.name}: {item.summary}" for item in skipped)
            parts.append(f"{len(skipped)} skipped ({reasons})")
        return ", ".join(parts)

    def item(self, name):
        return next(item for item in self.items if item.name == name)

    def to_dict(self):
        return to_jsonable({"passed": self.passed, "model": self.model,
                            "items": [item.to_dict() for item in self.items]})

    def __str__(self):
        lines = [f"preflight: {self.verdict} ({self.model})"]
        width = max(len(item.name) for item in self.items)
        for item in self.items:
            lines.append(f"  {item.status}  {item.name:<{width}}  {item.summary}")
            lines.extend(f"        {line}" for finding in item.findings
                         for line in str(finding).splitlines())
        return "\n".join(lines)


def preflight(model, loss_fn, inputs, targets, *, optimizer=None, train_step=None, output=None,
              causal=False):
    """Run the pre-training checklist on one batch; returns a ``PreflightReport``.

    ``optimizer`` defaults to Adam(lr=3e-3). ``train_step(model, (inputs, targets), optimizer)``
    is your own training step, returning the loss; given, every item that trains (overfit one
    batch, the training steps) runs through it, so that its clipping counts and a missing
    ``zero_grad()`` or ``step()`` shows. ``inputs`` may be a dict of keyword inputs; the model
    may return a tuple, dict or dataclass, which ``loss_fn`` gets whole (``output=`` names the
    logits, see ``diagnostics.outputs``). An exception inside your model, loss or step fails
    its item, quoted. ``causal=True`` declares a model whose output at position t (second
    axis) may depend only on positions <= t (a language model): the batch independence item
    checks that too, and a "next-token targets" item reads from the loss's gradient which
    input token each position is scored against (t + 1, not t itself or t + 2). The model, the optimizer and the RNG states are restored afterwards;
    other side effects of ``train_step`` are not undone.
    """
    require(isinstance(causal, bool), "causal", "True or False", repr(causal))
    backend, batch = T.checked_batch(model, loss_fn, inputs, targets, optimizer=optimizer,
                                     train_step=train_step, output=output, check_foreign=False)
    run = _Run(backend, batch, optimizer=optimizer, train_step=train_step)
    run.causal = causal
    run.state = backend.snapshot()     # the one snapshot: restored after each item
    run.optimizer_state = None if optimizer is None else backend.optimizer_snapshot(optimizer)
    outside = [] if optimizer is None else T.foreign_parameters(backend, optimizer)
    run.extra_state = [(tensor, backend.snapshot_tensor(tensor)) for tensor in outside]
    try:
        items = [_run_item(run, item) for item in ITEMS
                 if item.applies is None or item.applies(run)]
    finally:
        run.restore()
    size = sum(int(np.prod(tuple(p.shape))) for _, p in backend.named_parameters())
    return PreflightReport(items=items, model=f"{backend.name} {type(model).__name__}, "
                                              f"{size:,} parameters")


@dataclass(frozen=True)
class Item:
    """One row of the checklist: ``check(run) -> CheckItem`` runs when every fact in ``needs``
    is known (facts are what earlier items found: ``"output"``, ``"logits"``, ``"loss"``,
    ``"optimizer"``, ``"watched"``); otherwise the item is SKIPped with the reason the missing
    fact gave. A new item is one function and one row of ``ITEMS``."""

    name: str
    check: object
    needs: tuple = ()
    applies: object = None   # run -> bool: whether the item belongs in this checklist at all


class _Run:
    """What the items share: the backend, the batch, the options, one snapshot to go back to
    between items, and the facts found so far (with the reason for each one missing)."""

    def __init__(self, backend, batch, *, optimizer, train_step):
        self.backend, self.batch = backend, batch
        self.optimizer, self.train_step = optimizer, train_step
        self.state = self.optimizer_state = None
        self.extra_state = []      # (tensor, saved) for the optimizer's tensors outside the model
        self.causal = False
        self.facts, self.missing = {}, {}
        self._loss_call = None

    def restore(self):
        """The model and the optimizer back as preflight found them."""
        self.backend.restore(self.state)
        if self.optimizer is not None:
            self.backend.optimizer_restore(self.optimizer, self.optimizer_state)
        for tensor, saved in self.extra_state:
            self.backend.restore_tensor(tensor, saved)

    def loss_call(self):
        """``(loss value, None)`` or ``(None, exception)`` of the loss at init, computed once."""
        if self._loss_call is None:
            try:
                with self.backend.no_grad():
                    _, loss = self.batch.output_and_loss(self.backend)
                self._loss_call = (self.backend.scalar(loss), None)
            except Exception as error:  # the user's loss: its items report it
                self._loss_call = (None, error)
        return self._loss_call


def _run_item(run, item):
    missing = [fact for fact in item.needs if fact not in run.facts]
    if missing:
        return CheckItem(item.name, SKIP, run.missing.get(missing[0], f"no {missing[0]}"))
    try:
        return item.check(run)
    except Exception as error:  # the user's model, loss, backward or train_step: quote it
        return CheckItem(item.name, FAIL, f"{_who(run, item)} raised {type(error).__name__}: "
                                          f"{_first_line_of(error)}")
    finally:
        run.restore()


def _who(run, item):
    """Whose code raised, in the words of the item."""
    if item.name in ("forward", "loss at init"):
        return {"forward": "forward", "loss at init": "loss_fn"}[item.name]
    if run.train_step is not None and item.name != "gradient check":
        return "train_step"
    return "the model's forward or backward, or loss_fn,"


def _first_line_of(error):
    text = str(error).strip().splitlines()
    return text[0] if text else ""


# ----------------------------------------------------------------- structure
def _parameters(run):
    """Trainable parameters, and an optimizer that holds the model's own tensors with an eps
    their dtype can hold."""
    backend = run.backend
    params = backend.named_parameters()
    sizes = {name: int(np.prod(tuple(p.shape))) for name, p in params}
    trainable = sum(sizes[name] for name, p in params if p.requires_grad)
    summary = f"{sum(sizes.values()):,} in {len(params)} tensors, {trainable:,} trainable"
    if params:
        largest = max(sizes, key=sizes.get)
        summary += f"; largest {largest} {tuple(backend.parameter(largest).shape)}"
    findings = []
    if not trainable:
        findings.append(Finding(
            "NO_GRADIENT", "error", None, "no parameter requires a gradient: nothing can learn",
            "model.requires_grad_(True), or unfreeze the layers to train",
            {"parameters": len(params)}))
    foreign = (0 if run.optimizer is None
               else T.foreign_parameter_count(backend, run.optimizer))
    if foreign and not T.unheld_parameters(backend, run.optimizer):
        # every trainable parameter is held, and more: a learnable loss temperature, a prompt
        # passed to forward; healthy (their values are restored after each item)
        summary += f"; the optimizer also holds {foreign} tensor(s) outside the model"
        foreign = 0
    if foreign:
        held = sum(len(group["params"]) for group in run.optimizer.param_groups)
        findings.append(Finding(
            "PARAMS_NOT_UPDATING", "error", None,
            f"the optimizer holds {foreign} of its {held} tensor(s) that are not this model's "
            f"parameters: optimizer.step() will not train this model (was the optimizer built "
            f"for a copy of the model, or before the model was replaced or moved?)",
            "build the optimizer from this model's parameters, after moving the model: "
            "optimizer = Optimizer(model.parameters(), ...)",
            {"foreign_tensors": foreign, "optimizer_tensors": held}))
        run.missing["optimizer"] = "the optimizer does not hold the model's parameters"
    else:
        run.facts["optimizer"] = run.optimizer
    if run.optimizer is not None:      # an eps its parameters' dtype rounds away (fp16 Adam)
        findings += [eps_finding(lost) for lost in lost_eps(run.optimizer)]
    if findings:
        return CheckItem("parameters", FAIL, summary, findings)
    return CheckItem("parameters", PASS, summary)


def _forward(run):
    backend, batch = run.backend, run.batch
    run.missing.update({fact: "the forward pass failed"
                        for fact in ("output", "logits", "loss", "watched")})
    with backend.no_grad():
        output = batch.forward(backend.model)
    summary = f"input {batch.describe_inputs()} -> output {outputs.describe(backend, output)}"
    run.facts["output"] = output
    key = T.logits_key(backend, batch, output)
    if key is T.NO_LOGITS:
        run.missing["logits"] = "no floating tensor in the output to read as logits"
        return CheckItem("forward", PASS, summary)
    logits = outputs.pick(output, key)
    run.facts["logits"] = backend.to_numpy(logits)
    run.facts["logits_key"] = key
    if not backend.is_tensor(output):
        summary += f"; logits: {_key_text(key)} {tuple(logits.shape)}"
    batch_size = batch.batch_size
    shape = tuple(logits.shape)
    if not shape or shape[0] != batch_size:
        return CheckItem("forward", FAIL, summary + f": the logits' first dimension should be "
                                                    f"the batch size {batch_size}")
    return CheckItem("forward", PASS, summary)


def _reshapes(run):
    """One more forward, watching every view/reshape call: one that moves axes (a permute
    was meant) is VIEW_SCRAMBLES_AXES."""
    backend, batch = run.backend, run.batch
    if backend.name != "torch":
        return CheckItem("reshapes", SKIP, "needs a torch model (torch function modes)")
    with backend.no_grad(), watch_reshapes(backend.model) as calls:
        batch.forward(backend.model)
    findings = reshape_findings(calls)
    if findings:
        return CheckItem("reshapes", _status(findings),
                         "; ".join(f"{c.call} {c.before} -> {c.after}" for c in calls),
                         findings)
    return CheckItem("reshapes", PASS, "no view or reshape moves an axis (a permute meant)")


def _key_text(key):
    return getattr(key, "__name__", "output=callable") if callable(key) else repr(key)


# ------------------------------------------------------------------- targets
def _label_dtype(run):
    output, targets = run.facts["logits"], run.batch.target_array()
    if targets is None:
        return CheckItem("label dtype", SKIP, "targets in a tuple: left to loss_fn")
    summary = f"targets {targets.shape} {targets.dtype}"
    fail = _failing("label dtype", summary, code="LABEL_DTYPE", location="data")
    axis = _class_axis(output, targets)
    if axis is None:
        _, error = run.loss_call()
        if targets.dtype.kind in "biu" and output.dtype.kind == "f" and error is not None:
            return fail(
                message=f"{targets.dtype} targets for a loss on {output.dtype} outputs, and "
                        f"loss_fn raised {type(error).__name__}; BCE and MSE need floating "
                        f"targets (torch raises on the dtype)",
                suggestion="pass targets.float()", evidence={"dtype": str(targets.dtype)},
                severity="warning")
        return CheckItem("label dtype", PASS, summary)
    classes = output.shape[axis]
    if targets.dtype.kind == "f":
        return fail(
            message=f"class labels are {targets.dtype} for an output of {classes} class "
                    f"scores; cross-entropy needs int64 class indices (torch raises "
                    f"'expected scalar type Long')",
            suggestion="pass targets.long() (torch) or targets.astype(np.int64)",
            evidence={"dtype": str(targets.dtype), "classes": classes})
    if targets.dtype != np.int64 and run.loss_call()[1] is not None:
        return fail(
            message=f"class labels are {targets.dtype}; cross-entropy needs int64 class "
                    f"indices",
            suggestion="convert with targets.long() (torch) or astype(np.int64)",
            evidence={"dtype": str(targets.dtype), "classes": classes})
    outside = (targets != IGNORE_INDEX) & ((targets < 0) | (targets >= classes))
    if outside.any():
        return fail(
            message=f"{int(outside.sum())} labels lie outside [0, {classes}) (values "
                    f"{targets.min()} to {targets.max()}); the output has {classes} classes",
            suggestion="labels must be 0..C-1: shift 1-based labels down, or widen the "
                       "last layer",
            evidence={"outside": int(outside.sum()), "classes": classes,
                      "min": targets.min(), "max": targets.max()})
    return CheckItem("label dtype", PASS, summary + f", class indices in [0, {classes})")


def _shapes(run):
    output, targets = run.facts["logits"], run.batch.target_array()
    if targets is None:
        return CheckItem("shapes", SKIP, "targets in a tuple: left to loss_fn")
    summary = f"output {output.shape}, targets {targets.shape}"
    if _class_axis(output, targets) is not None or output.shape == targets.shape:
        return CheckItem("shapes", PASS, summary)
    fail = _failing("shapes", summary, code="SHAPE_BROADCAST", location="loss")
    value, error = run.loss_call()
    try:
        joint = np.broadcast_shapes(output.shape, targets.shape)
    except ValueError:
        if error is None:
            return CheckItem("shapes", PASS, summary + "; loss_fn takes them as they are")
        return fail(
            message=f"output {output.shape} and targets {targets.shape} neither match nor "
                    f"are class indices for it",
            suggestion="make the last layer's width match the targets",
            evidence={"output": output.shape, "targets": targets.shape})
    if error is None and not _rows_coupled(run, output, targets):
        return CheckItem("shapes", PASS, summary + "; loss_fn takes them as they are")
    return fail(
        message=f"output {output.shape} and targets {targets.shape} broadcast to {joint} in "
                f"an elementwise loss: every output is compared with every target, and the "
                f"loss cannot reach zero",
        suggestion="make them equal: output.squeeze(-1) or targets.unsqueeze(-1) "
                   "(targets.view_as(output))",
        evidence={"output": output.shape, "targets": targets.shape, "broadcast": joint})


def _rows_coupled(run, logits, targets):
    """The loss compares examples with each other's targets (``layouts.rows_coupled``)."""
    return rows_coupled(run.backend, run.batch.loss_fn, run.facts["output"],
                        run.facts["logits_key"], logits, targets)


# ---------------------------------------------------------------------- loss
def _loss_at_init(run):
    value, error = run.loss_call()
    if error is not None:
        run.missing["loss"] = "the loss could not be computed"
        return CheckItem("loss at init", FAIL,
                         f"loss_fn raised {type(error).__name__}: {_first_line_of(error)}")
    output, logits = run.facts["output"], run.facts.get("logits")
    targets = run.batch.target_array()
    baseline = T.uninformative_loss(run.backend, run.batch, output,
                                    run.facts.get("logits_key", T.NO_LOGITS), logits)
    if not math.isfinite(value):
        run.missing["loss"] = "the loss at init is not finite"
        return _failing("loss at init", f"loss {value}", code="NAN_LOSS", location="loss")(
            message=f"the loss at init is {value}",
            suggestion="look for log(0), division by zero or overflow in forward or the "
                       "loss; check the inputs for NaN/Inf",
            evidence={"loss": value})
    run.facts["loss"] = value
    if baseline is None:
        return CheckItem("loss at init", PASS, f"loss {value:.4g}")
    axis = _class_axis(logits, targets) if targets is not None else None
    classes = logits.shape[axis] if axis is not None else None
    reference = (f"-log(1/{classes}) = {baseline:.4g}" if classes
                 else f"{baseline:.4g} for an all-zero output")
    summary = f"loss {value:.4g}, expected about {reference}"
    ratio = value / baseline
    if not classes and targets is not None and _is_squared_error(baseline, targets):
        return _squared_error_at_init(summary, value, baseline, ratio)
    too_high = value > INIT_LOSS_FACTOR * baseline and value - baseline > INIT_LOSS_MARGIN
    if not too_high:
        return CheckItem("loss at init", PASS, summary)
    return _failing("loss at init", summary, code="BAD_INIT_LOSS", location="loss")(
        message=f"the loss at init is {value:.4g}, {ratio:.1f} times the "
                f"{reference} of an uninformative output: the initial outputs are "
                f"confidently wrong",
        suggestion="scale the last layer's weights down (e.g. by 0.01) and set its bias to "
                   "0 (or to the log of the class frequencies); check the init scale",
        evidence={"loss": value, "expected": baseline, "classes": classes, "ratio": ratio},
        severity="warning")


def _squared_error_at_init(summary, loss, baseline, ratio):
    """Regression: only outputs far larger than the targets are a bad init."""
    if ratio <= SQUARED_INIT_LOSS_FACTOR:
        return CheckItem("loss at init", PASS, summary)
    scale = math.sqrt(ratio - 1)
    return _failing("loss at init", summary, code="BAD_INIT_LOSS", location="loss")(
        message=f"the squared error at init is {loss:.4g}, {ratio:.1f} times the "
                f"{baseline:.4g} (mean of the squared targets) of an all-zero output: the "
                f"initial outputs are about {scale:.1f} times the targets' scale (a fresh "
                f"net's squared error depends on the target scale, so only a ratio above "
                f"{SQUARED_INIT_LOSS_FACTOR:g}, outputs over 3 times the targets, is "
                f"flagged)",
        suggestion="scale the last layer's weights down, or standardise the targets "
                   "(subtract their mean, divide by their std) and undo it on prediction",
        evidence={"loss": loss, "expected": baseline, "classes": None,
                  "ratio": ratio, "limit": SQUARED_INIT_LOSS_FACTOR},
        severity="warning")


# ------------------------------------------------------------------ training
def _overfit(run):
    result = _overfit_with(run, run.optimizer)
    if result.inconclusive:   # the loss cannot reach the target by design: nothing to judge
        return CheckItem("overfit one batch", SKIP, result.headline, list(result.findings))
    if result.passed or run.optimizer is None:
        return CheckItem("overfit one batch", PASS if result.passed else FAIL, result.headline,
                         list(result.findings))
    run.restore()
    fallback = _overfit_with(run, None)   # Adam(lr=DEFAULT_LR): is it the optimizer?
    if not fallback.passed:
        return CheckItem("overfit one batch", FAIL, result.headline, list(result.findings))
    return CheckItem("overfit one batch", FAIL, result.headline,
                     [_slow_optimizer_finding(result, fallback, run.optimizer)])


def _overfit_with(run, optimizer):
    return overfit.run(run.backend, run.batch, optimizer=optimizer, train_step=run.train_step,
                       steps=OVERFIT_STEPS)


def _training_steps(run):
    """A few steps through ``train_step`` (or a plain step) under a Monitor."""
    run.missing["watched"] = "the training steps failed"
    optimizer = T.make_optimizer(run.backend, run.optimizer, lr=DEFAULT_LR)
    state = run.backend.rng_state()
    before = _measured_loss(run, state)
    with T.at_base_rates(optimizer), Monitor(run.backend.model, optimizer, every=1, window=TRAIN_STEPS,
                 output=run.batch.selector) as monitor:
        for _ in range(TRAIN_STEPS):
            monitor.step(_one_step(run, optimizer))
        report = monitor.report()
    findings = report.findings
    skipped = report.mixed_precision.get("skipped_steps", 0)
    after = _measured_loss(run, state)
    run.facts["watched"] = findings
    return _loss_trend(run, before, after, findings, skipped)


def _one_step(run, optimizer):
    """One step; its loss from ``train_step``'s return value, or measured after it. A loss
    tensor goes to the Monitor as it is: the checks that read its graph (a sigmoid before
    BCE with logits) need it, not its value."""
    backend, batch = run.backend, run.batch
    if run.train_step is None:
        backend.zero_grad()
        _, loss = batch.output_and_loss(backend)
        if math.isfinite(backend.scalar(loss)):
            backend.backward(loss)
            optimizer.step()
        return loss
    returned = run.train_step(backend.model, (batch.inputs, batch.targets), optimizer)
    if backend.is_tensor(returned):
        return returned
    if isinstance(returned, (int, float)):
        return backend.scalar(returned)
    with eval_mode(backend):  # the Monitor would take a train-mode pass for a bug
        return _measured_loss(run, None)


def _measured_loss(run, rng):
    """The loss on the batch without a graph; with ``rng``, the same dropout draws each time."""
    if rng is not None:
        run.backend.set_rng_state(rng)
    with run.backend.no_grad():
        _, loss = run.batch.output_and_loss(run.backend)
    return run.backend.scalar(loss)


def _loss_trend(run, before, after, findings, skipped=0):
    how = "train_step" if run.train_step is not None else "plain steps"
    summary = f"loss {before:.4g} -> {after:.4g} after {TRAIN_STEPS} {how}"
    others = [f for f in findings if f.code not in ACTIVATION_CODES + FLOW_CODES
              + ("STALE_GRADIENTS", "PARAMS_NOT_UPDATING")]
    if math.isfinite(after) and after < before:
        return CheckItem("training steps", _status(others), summary, others)
    if skipped >= TRAIN_STEPS and after == before:   # a GradScaler still finding its scale
        return CheckItem("training steps", SKIP if not others else _status(others),
                         f"{summary}: the GradScaler skipped all {skipped} steps (inf/NaN "
                         f"fp16 gradients while its scale comes down), nothing to judge",
                         others)
    if not math.isfinite(after) or after > before:
        code, message = "LOSS_DIVERGING", f"the loss rose from {before:.4g} to {after:.4g}"
        hint = "lower the learning rate; check the sign of the loss and of the update"
    else:
        code, message = "LOSS_PLATEAU", f"the loss did not move from {before:.4g}"
        hint = "check that optimizer.step() runs and that the learning rate is not 0"
    finding = Finding(code, "error", "loss", f"{message} in {TRAIN_STEPS} training steps",
                      hint, {"before": before, "after": after, "steps": TRAIN_STEPS})
    return CheckItem("training steps", FAIL, summary, [finding] + others)


def _watched(name, codes, healthy):
    """An item reading the Monitor's findings of the training steps."""
    def check(run):
        return _monitored(name, run.facts["watched"], codes, healthy)
    return check


def _stale_gradients(run):
    if run.train_step is None:
        return CheckItem("stale gradients", SKIP, "give train_step to check your loop")
    return _monitored("stale gradients", run.facts["watched"], ("STALE_GRADIENTS",),
                      "train_step clears gradients between steps")


# ----------------------------------------------------------------- gradients
def _gradient_check(run):
    rows = min(GRADCHECK_ROWS, run.batch.batch_size)
    part = run.batch.rows(rows)
    try:
        batch = Batch.prepare(run.backend, run.batch.loss_fn, part.inputs, part.targets,
                              output=part.selector, float64=True, targets_required=False)
        report = run_check(run.backend, batch, GradientSettings())
    except DiagnosticsError as error:   # raised by the user's code (its cause) fails the item
        status = FAIL if error.__cause__ is not None else SKIP
        return CheckItem("gradient check", status, f"not checked: {error}")
    return CheckItem("gradient check", PASS if report.passed else FAIL,
                     f"{gradient_headline(report)} (first {rows} rows)", list(report.findings))


# ------------------------------------------------------------ one batch's data
def _batch_independence(run):
    """Karpathy's check: backpropagate from one example's output, on a copy in eval mode."""
    backend, batch = run.backend, run.batch
    if backend.name != "torch":
        return CheckItem("batch independence", SKIP, "needs a torch model (input gradients "
                                                     "through torch's autograd)")
    if batch.kwargs and not batch.args:
        probed = dict(batch.kwargs)                  # keyword inputs: input_ids and the rest
    elif not batch.kwargs and len(batch.args) == 1 and backend.is_tensor(batch.args[0]):
        probed = batch.args[0]
    else:
        return CheckItem("batch independence", SKIP, "one tensor input or keyword inputs "
                                                     "needed: run check_batch_independence")
    if batch.batch_size < 2:
        return CheckItem("batch independence", SKIP, "a batch of one example")
    what = "example i's output depends only on example i's input"
    if run.causal:
        what += ", and position t's only on positions <= t"
    try:
        findings = check_batch_independence(backend.model, probed, causal=run.causal,
                                            output=batch.selector)
    except DiagnosticsError as error:   # raised by the user's model (its cause) fails the item
        status = FAIL if error.__cause__ is not None else SKIP
        return CheckItem("batch independence", status, f"not checked: {error}")
    if findings:
        return CheckItem("batch independence", _status(findings),
                         "; ".join(_first_line(f) for f in findings), findings)
    return CheckItem("batch independence", PASS, what + " (on a copy in eval mode)")


def _next_token(run):
    """With ``causal=True``: the loss scores position t against input token t + 1."""
    judged, summary, findings = misaligned_targets(run.backend, run.batch, run.facts["output"],
                                                   run.facts["logits_key"])
    return CheckItem("next-token targets", _status(findings) if judged else SKIP, summary,
                     findings)


def _class_labels(run):
    """``(labels as a 1-D int array without ignored ones, classes)``, or ``(None, reason)``."""
    logits, targets = run.facts["logits"], run.batch.target_array()
    axis = _class_axis(logits, targets) if targets is not None else None
    if axis is None or targets.dtype.kind not in "iuf":
        return None, "targets are not class indices"
    labels = targets.reshape(-1).astype(np.int64)
    return labels[labels != IGNORE_INDEX], logits.shape[axis]


def _label_range(run):
    labels, classes = _class_labels(run)
    if labels is None or not labels.size:
        return CheckItem("label range", SKIP, classes if labels is None else "no labels")
    low, high = int(labels.min()), int(labels.max())
    if low < 0 or high >= classes:
        return CheckItem("label range", SKIP, "labels outside the output: see label dtype")
    summary = (f"this batch's {labels.size} labels use classes {low}..{high} of the output's "
               f"0..{classes - 1}")
    if labels.size < LABELS_PER_CLASS * classes:
        return CheckItem("label range", PASS, summary + " (one batch is too few to tell an "
                                                        "unused output unit: run "
                                                        "check_label_range on all labels)")
    findings = [_one_batch(f, labels.size) for f in check_label_range(labels,
                                                                      num_classes=classes)]
    return CheckItem("label range", _status(findings), summary, findings)


def _label_order(run):
    labels, classes = _class_labels(run)
    if labels is None:
        return CheckItem("label order", SKIP, classes)
    if run.batch.target_array().ndim != 1:
        return CheckItem("label order", SKIP, "labels per position: order across examples "
                                              "not checked")
    parts = [part for part in np.array_split(labels, ORDER_PARTS) if part.size >= 2]
    used = np.unique(labels)
    summary = (f"{labels.size} labels of {used.size} classes in this one batch; run "
               f"check_batch_label_order on the loader's first batches to see the order "
               f"across batches")
    if len(parts) < 2:
        return CheckItem("label order", SKIP, "a batch too small to read in parts")
    findings = [_one_batch(f, labels.size) for f in check_batch_label_order(parts)]
    return CheckItem("label order", _status(findings), summary, findings)


def _one_batch(finding, rows):
    """A label finding judged on the one batch preflight sees, saying so."""
    return dataclasses.replace(
        finding, message=finding.message + f" (seen in the one batch of {rows} labels "
                                           f"preflight gets)",
        evidence={**finding.evidence, "batches_seen": 1, "labels_seen": rows})


ITEMS = (
    Item("parameters", _parameters),
    Item("forward", _forward),
    Item("label dtype", _label_dtype, needs=("logits",)),
    Item("shapes", _shapes, needs=("logits",)),
    Item("loss at init", _loss_at_init, needs=("output",)),
    Item("overfit one batch", _overfit, needs=("loss", "optimizer")),
    Item("training steps", _training_steps, needs=("loss", "optimizer")),
    Item("activations", _watched("activations", ACTIVATION_CODES,
                                 "no dead, saturated, exploding or collapsed layer"),
         needs=("watched",)),
    Item("gradient flow", _watched("gradient flow", FLOW_CODES,
                                   "gradients reach every parameter, no vanishing or exploding "
                                   "norm"), needs=("watched",)),
    Item("stale gradients", _stale_gradients, needs=("watched",)),
    Item("parameters update", _watched("parameters update", ("PARAMS_NOT_UPDATING",),
                                       "every parameter with a gradient changed"),
         needs=("watched",)),
    Item("gradient check", _gradient_check, needs=("loss",)),
    Item("batch independence", _batch_independence, needs=("output",)),
    Item("next-token targets", _next_token, needs=("logits",), applies=lambda run: run.causal),
    Item("reshapes", _reshapes, needs=("output",)),
    Item("label range", _label_range, needs=("logits",)),
    Item("label order", _label_order, needs=("logits",)),
)


def _class_axis(output, targets):
    """The class axis of ``output`` (ndarray) when ``targets`` are class indices for it, in a
    layout ``diagnostics.layouts`` recognises, holding whole numbers of any dtype (a float
    dtype is the label dtype item's business); else None."""
    axis = class_axis(output.shape, targets.shape)
    if axis is None or targets.dtype.kind in "iu":
        return axis
    whole = (targets.dtype.kind == "f" and bool(np.all(np.isfinite(targets)))
             and bool(np.all(targets == np.round(targets))))
    return axis if whole else None


def _is_squared_error(baseline, targets):
    """True when an all-zero output's loss is the mean (or sum) of the squared targets: a
    squared-error loss, whose scale is the targets'."""
    if targets.dtype.kind != "f":
        return False
    squares = np.square(targets.astype(np.float64))
    return any(math.isclose(baseline, level, rel_tol=1e-4)
               for level in (float(squares.mean()), float(squares.sum())))


def _failing(name, summary, *, code, location):
    """A function that makes the FAIL item ``name`` with one ``code`` finding."""
    def fail(*, message, suggestion, evidence, severity="error"):
        finding = Finding(code, severity, location, message, suggestion, evidence)
        return CheckItem(name, FAIL, summary, [finding])
    return fail


def _status(findings):
    return FAIL if any(f.severity in ("warning", "error") for f in findings) else PASS


def _monitored(name, findings, codes, healthy):
    mine = [finding for finding in findings if finding.code in codes]
    return CheckItem(name, _status(mine), "; ".join(_first_line(f) for f in mine) or healthy,
                     mine)


def _first_line(finding):
    return f"{finding.code} at {finding.location}" if finding.location else finding.code


def _slow_optimizer_finding(result, fallback, optimizer):
    """OVERFIT_FAILED as a warning: the user's optimizer cannot memorise the batch in time,
    the default Adam can, so the model and the loss learn and the settings are slow."""
    reached = ("reaches its target" if fallback.steps is not None
               else "comes down to the loss's own floor" if fallback.inconclusive
               else "is memorising it")
    steps = fallback.steps if fallback.steps is not None else fallback.max_steps
    return Finding(
        "OVERFIT_FAILED", "warning", "loss",
        f"with your optimizer ({type(optimizer).__name__}, lr {T.lr_text(optimizer)}) the loss "
        f"went from {result.initial_loss:.4g} to {result.final_loss:.4g} in "
        f"{result.max_steps} steps without reaching {result.target_loss:.4g}; "
        f"Adam(lr={DEFAULT_LR:g}) on the same batch "
        f"{reached} in {steps} steps: the model and the loss can learn, the optimizer "
        f"settings are slow{T.rate_note(optimizer)}",
        "raise the learning rate (find_lr suggests one) or use Adam; then run preflight again",
        {"initial_loss": result.initial_loss, "final_loss": result.final_loss,
         "steps": result.max_steps, "learning_rates": T.base_rates(optimizer),
         "adam_steps": fallback.steps, "adam_final_loss": fallback.final_loss})
