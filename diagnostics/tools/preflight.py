"""``preflight``: the checklist to run before a long training run, as code.

Each item is PASS, FAIL or SKIP, with findings: the parameters, the forward pass, label dtype
and range (LABEL_DTYPE, checked before the framework raises), output/target shapes that would
broadcast silently (SHAPE_BROADCAST), the loss at init against that of an uninformative output
(-log(1/C) for C classes; BAD_INIT_LOSS), overfitting one batch (OVERFIT_FAILED), a few
training steps with the loss going down, and, watched by a ``Monitor`` over those steps,
activation statistics, gradient flow, STALE_GRADIENTS (with the user's ``train_step``) and
PARAMS_NOT_UPDATING; last, a gradient check on a small slice of the batch.
"""
import contextlib
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import DiagnosticsError
from ..findings import Finding
from ..gradcheck import check_gradients
from ..jsonable import to_jsonable
from ..monitor import Monitor
from . import _training as T
from .overfit import DEFAULT_LR, overfit_one_batch

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

    def item(self, name):
        return next(item for item in self.items if item.name == name)

    def to_dict(self):
        return to_jsonable({"passed": self.passed, "model": self.model,
                            "items": [item.to_dict() for item in self.items]})

    def __str__(self):
        failed = sum(item.status == FAIL for item in self.items)
        verdict = "all checks passed" if not failed else f"{failed} of {len(self.items)} FAILED"
        lines = [f"preflight: {verdict} ({self.model})"]
        width = max(len(item.name) for item in self.items)
        for item in self.items:
            lines.append(f"  {item.status}  {item.name:<{width}}  {item.summary}")
            lines.extend(f"        {line}" for finding in item.findings
                         for line in str(finding).splitlines())
        return "\n".join(lines)


def preflight(model, loss_fn, inputs, targets, *, optimizer=None, train_step=None):
    """Run the pre-training checklist on one batch; returns a ``PreflightReport``.

    ``optimizer`` defaults to Adam(lr=3e-3). ``train_step(model, (inputs, targets), optimizer)``
    is your own training step, returning the loss; given, the training steps run through it, so
    that a missing ``zero_grad()`` or ``step()`` shows. The model, the optimizer and the
    RNG states are restored afterwards; other side effects of ``train_step`` are not undone.
    """
    backend, inputs, targets = T.checked_batch(model, loss_fn, inputs, targets, optimizer)
    if train_step is not None:
        T.check_callable(train_step, "train_step")
    with backend.preserved(optimizer):
        items = _Checklist(backend, loss_fn, inputs, targets, optimizer=optimizer,
                           train_step=train_step).run()
    size = sum(int(np.prod(tuple(p.shape))) for _, p in backend.named_parameters())
    return PreflightReport(items=items, model=f"{backend.name} {type(model).__name__}, "
                                              f"{size:,} parameters")


class _Checklist:
    def __init__(self, backend, loss_fn, inputs, targets, *, optimizer, train_step):
        self.backend, self.loss_fn = backend, loss_fn
        self.inputs, self.targets = inputs, targets
        self.optimizer, self.train_step = optimizer, train_step
        self.output = None     # NumPy copy of the output at init
        self.loss = None

    def run(self):
        items = [self._parameters(), self._forward()]
        if items[-1].status == FAIL:
            return items + _skipped(("label dtype", "shapes", "loss at init", "overfit one batch",
                                     "training steps", "activations", "gradient flow",
                                     "stale gradients", "parameters update", "gradient check"),
                                    "the forward pass failed")
        items += [self._label_dtype(), self._shapes(), self._loss_at_init()]
        if items[-1].status == FAIL and self.loss is None:
            return items + _skipped(("overfit one batch", "training steps", "activations",
                                     "gradient flow", "stale gradients", "parameters update",
                                     "gradient check"), "the loss could not be computed")
        items.append(self._overfit())
        items += self._training_steps()
        items.append(self._gradient_check())
        return items

    # ----------------------------------------------------------- structure
    def _parameters(self):
        params = self.backend.named_parameters()
        sizes = {name: int(np.prod(tuple(p.shape))) for name, p in params}
        trainable = sum(sizes[name] for name, p in params if p.requires_grad)
        summary = f"{sum(sizes.values()):,} in {len(params)} tensors, {trainable:,} trainable"
        if params:
            largest = max(sizes, key=sizes.get)
            summary += f"; largest {largest} {tuple(self.backend.parameter(largest).shape)}"
        if trainable:
            return CheckItem("parameters", PASS, summary)
        return CheckItem("parameters", FAIL, summary, [Finding(
            "NO_GRADIENT", "error", None, "no parameter requires a gradient: nothing can learn",
            "model.requires_grad_(True), or unfreeze the layers to train",
            {"parameters": len(params)})])

    def _forward(self):
        try:
            with self.backend.no_grad():
                output = self.backend.forward(self.inputs)
        except Exception as error:  # the user's forward: report it, do not crash the checklist
            return CheckItem("forward", FAIL, f"forward raised {type(error).__name__}: {error}")
        if not self.backend.is_tensor(output):
            return CheckItem("forward", FAIL, f"forward returned {type(output).__name__}, not a "
                                              f"{self.backend.name} tensor")
        self.output = self.backend.to_numpy(output)
        batch = T.first_dimension(self.backend, self.inputs)
        summary = f"input {_shapes(self.backend, self.inputs)} -> output {self.output.shape} " \
                  f"{self.output.dtype}"
        if self.output.ndim == 0 or self.output.shape[0] != batch:
            return CheckItem("forward", FAIL, summary + f": the output's first dimension should "
                                                        f"be the batch size {batch}")
        return CheckItem("forward", PASS, summary)

    # ------------------------------------------------------------- targets
    def _label_dtype(self):
        output, targets = self.output, self.backend.to_numpy(self.targets)
        summary = f"targets {targets.shape} {targets.dtype}"
        fail = _failing("label dtype", summary, code="LABEL_DTYPE", location="data")
        if not _class_layout(output, targets):
            if targets.dtype.kind in "biu" and output.dtype.kind == "f":
                return fail(
                    message=f"{targets.dtype} targets for a loss on {output.dtype} outputs of the "
                            f"same layout; BCE and MSE need floating targets (torch raises on "
                            f"the dtype)",
                    suggestion="pass targets.float()", evidence={"dtype": str(targets.dtype)},
                    severity="warning")
            return CheckItem("label dtype", PASS, summary)
        classes = output.shape[1]
        if targets.dtype.kind == "f":
            return fail(
                message=f"class labels are {targets.dtype} for an output of {classes} class "
                        f"scores; cross-entropy needs int64 class indices (torch raises "
                        f"'expected scalar type Long')",
                suggestion="pass targets.long() (torch) or targets.astype(np.int64)",
                evidence={"dtype": str(targets.dtype), "classes": classes})
        if targets.dtype != np.int64:
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

    def _shapes(self):
        output, targets = self.output, self.backend.to_numpy(self.targets)
        summary = f"output {output.shape}, targets {targets.shape}"
        if _class_layout(output, targets) or output.shape == targets.shape:
            return CheckItem("shapes", PASS, summary)
        fail = _failing("shapes", summary, code="SHAPE_BROADCAST", location="loss")
        try:
            joint = np.broadcast_shapes(output.shape, targets.shape)
        except ValueError:
            return fail(
                message=f"output {output.shape} and targets {targets.shape} neither match nor "
                        f"are class indices for it",
                suggestion="make the last layer's width match the targets",
                evidence={"output": output.shape, "targets": targets.shape})
        return fail(
            message=f"output {output.shape} and targets {targets.shape} broadcast to {joint} in "
                    f"an elementwise loss: every output is compared with every target, and the "
                    f"loss cannot reach zero",
            suggestion="make them equal: output.squeeze(-1) or targets.unsqueeze(-1) "
                       "(targets.view_as(output))",
            evidence={"output": output.shape, "targets": targets.shape, "broadcast": joint})

    # ------------------------------------------------------------------ loss
    def _loss_at_init(self):
        try:
            with self.backend.no_grad():
                _, loss = T.compute_loss(self.backend, self.loss_fn, self.inputs, self.targets)
                baseline = T.uninformative_loss(self.backend, self.loss_fn, self.output,
                                                self.targets)
        except DiagnosticsError:
            raise
        except Exception as error:  # the user's loss: report it, do not crash the checklist
            return CheckItem("loss at init", FAIL,
                             f"loss_fn raised {type(error).__name__}: {error}")
        self.loss = self.backend.scalar(loss)
        if not math.isfinite(self.loss):
            return _failing("loss at init", f"loss {self.loss}", code="NAN_LOSS",
                            location="loss")(
                message=f"the loss at init is {self.loss}",
                suggestion="look for log(0), division by zero or overflow in forward or the "
                           "loss; check the inputs for NaN/Inf",
                evidence={"loss": self.loss})
        if baseline is None:
            return CheckItem("loss at init", PASS, f"loss {self.loss:.4g}")
        classes = self.output.shape[1] if _class_layout(
            self.output, self.backend.to_numpy(self.targets)) else None
        reference = (f"-log(1/{classes}) = {baseline:.4g}" if classes
                     else f"{baseline:.4g} for an all-zero output")
        summary = f"loss {self.loss:.4g}, expected about {reference}"
        ratio = self.loss / baseline
        if not classes and _is_squared_error(baseline, self.backend.to_numpy(self.targets)):
            return self._squared_error_at_init(summary, baseline, ratio)
        too_high = (self.loss > INIT_LOSS_FACTOR * baseline
                    and self.loss - baseline > INIT_LOSS_MARGIN)
        if not too_high:
            return CheckItem("loss at init", PASS, summary)
        return _failing("loss at init", summary, code="BAD_INIT_LOSS", location="loss")(
            message=f"the loss at init is {self.loss:.4g}, {self.loss / baseline:.1f} times the "
                    f"{reference} of an uninformative output: the initial outputs are "
                    f"confidently wrong",
            suggestion="scale the last layer's weights down (e.g. by 0.01) and set its bias to "
                       "0 (or to the log of the class frequencies); check the init scale",
            evidence={"loss": self.loss, "expected": baseline, "classes": classes,
                      "ratio": ratio},
            severity="warning")

    def _squared_error_at_init(self, summary, baseline, ratio):
        """Regression: only outputs far larger than the targets are a bad init."""
        if ratio <= SQUARED_INIT_LOSS_FACTOR:
            return CheckItem("loss at init", PASS, summary)
        scale = math.sqrt(ratio - 1)
        return _failing("loss at init", summary, code="BAD_INIT_LOSS", location="loss")(
            message=f"the squared error at init is {self.loss:.4g}, {ratio:.1f} times the "
                    f"{baseline:.4g} (mean of the squared targets) of an all-zero output: the "
                    f"initial outputs are about {scale:.1f} times the targets' scale (a fresh "
                    f"net's squared error depends on the target scale, so only a ratio above "
                    f"{SQUARED_INIT_LOSS_FACTOR:g}, outputs over 3 times the targets, is "
                    f"flagged)",
            suggestion="scale the last layer's weights down, or standardise the targets "
                       "(subtract their mean, divide by their std) and undo it on prediction",
            evidence={"loss": self.loss, "expected": baseline, "classes": None,
                      "ratio": ratio, "limit": SQUARED_INIT_LOSS_FACTOR},
            severity="warning")

    # -------------------------------------------------------------- training
    def _overfit(self):
        result = self._overfit_with(self.optimizer)
        summary = str(result).splitlines()[0].replace("overfit one batch: ", "")
        if result.passed or self.optimizer is None:
            return CheckItem("overfit one batch", PASS if result.passed else FAIL, summary,
                             list(result.findings))
        fallback = self._overfit_with(None)   # Adam(lr=DEFAULT_LR): is it the optimizer?
        if not fallback.passed:
            return CheckItem("overfit one batch", FAIL, summary, list(result.findings))
        return CheckItem("overfit one batch", FAIL, summary,
                         [_slow_optimizer_finding(result, fallback, self.optimizer)])

    def _overfit_with(self, optimizer):
        return overfit_one_batch(self.backend.model, self.loss_fn, self.inputs, self.targets,
                                 optimizer=optimizer, steps=OVERFIT_STEPS)

    def _training_steps(self):
        """A few steps through ``train_step`` (or a plain step) under a Monitor."""
        names = ("training steps", "activations", "gradient flow", "stale gradients",
                 "parameters update")
        with self.backend.preserved(self.optimizer):
            optimizer = T.make_optimizer(self.backend, self.optimizer, lr=DEFAULT_LR)
            try:
                before, after, findings, skipped = self._watched_steps(optimizer)
            except DiagnosticsError:
                raise
            except Exception as error:
                how = "train_step" if self.train_step is not None else "a training step"
                return ([CheckItem("training steps", FAIL,
                                   f"{how} raised {type(error).__name__}: {error}")]
                        + _skipped(names[1:], "the training steps failed"))
        return [self._loss_trend(before, after, findings, skipped),
                _monitored("activations", findings, ACTIVATION_CODES,
                           "no dead, saturated, exploding or collapsed layer"),
                _monitored("gradient flow", findings, FLOW_CODES,
                           "gradients reach every parameter, no vanishing or exploding norm"),
                (_monitored("stale gradients", findings, ("STALE_GRADIENTS",),
                            "train_step clears gradients between steps")
                 if self.train_step is not None
                 else CheckItem("stale gradients", SKIP, "give train_step to check your loop")),
                _monitored("parameters update", findings, ("PARAMS_NOT_UPDATING",),
                           "every parameter with a gradient changed")]

    def _watched_steps(self, optimizer):
        rng = self.backend.rng_state()
        before = self._measured_loss(rng)
        with Monitor(self.backend.model, optimizer, every=1, window=TRAIN_STEPS) as monitor:
            for _ in range(TRAIN_STEPS):
                monitor.step(self._one_step(optimizer))
            report = monitor.report()
        skipped = report.mixed_precision.get("skipped_steps", 0)
        return before, self._measured_loss(rng), report.findings, skipped

    def _one_step(self, optimizer):
        if self.train_step is None:
            value, _ = T.train_step(self.backend, optimizer, self.loss_fn, self.inputs,
                                    self.targets)
            return value
        returned = self.train_step(self.backend.model, (self.inputs, self.targets), optimizer)
        if self.backend.is_tensor(returned) or isinstance(returned, (int, float)):
            return self.backend.scalar(returned)
        with _eval_mode(self.backend):  # the Monitor would take a train-mode pass for a bug
            return self._measured_loss(None)

    def _measured_loss(self, rng):
        """The loss on the batch without a graph; with ``rng``, the same dropout draws each time."""
        if rng is not None:
            self.backend.set_rng_state(rng)
        with self.backend.no_grad():
            _, loss = T.compute_loss(self.backend, self.loss_fn, self.inputs, self.targets)
        return self.backend.scalar(loss)

    def _loss_trend(self, before, after, findings, skipped=0):
        how = "train_step" if self.train_step is not None else "plain steps"
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

    # ------------------------------------------------------------- gradients
    def _gradient_check(self):
        rows = min(GRADCHECK_ROWS, T.first_dimension(self.backend, self.inputs))
        inputs = tuple(x[:rows] for x in self.inputs) if isinstance(self.inputs, tuple) \
            else self.inputs[:rows]
        try:
            report = check_gradients(self.backend.model, self.loss_fn, inputs,
                                     self.targets[:rows])
        except DiagnosticsError as error:
            return CheckItem("gradient check", SKIP, f"not checked: {error}")
        summary = str(report).splitlines()[0]
        return CheckItem("gradient check", PASS if report.passed else FAIL,
                         f"{summary} (first {rows} rows)", list(report.findings))


@contextlib.contextmanager
def _eval_mode(backend):
    """Every module in eval mode for the block, then each back in its own mode."""
    modes = {name: module.training for name, module in backend.named_modules()}
    backend.model.eval()
    try:
        yield
    finally:
        for name, module in backend.named_modules():
            module.training = modes[name]


def _class_layout(output, targets):
    """Class-index targets for class scores: (N, C, ...) output with C >= 2, (N, ...) targets
    holding whole numbers (of any dtype: a float dtype is the LABEL_DTYPE item's business)."""
    if not (output.ndim == targets.ndim + 1 and output.ndim >= 2 and output.shape[1] >= 2
            and output.shape[:1] + output.shape[2:] == targets.shape):
        return False
    if targets.dtype.kind in "iu":
        return True
    return targets.dtype.kind == "f" and bool(np.all(np.isfinite(targets))) and bool(
        np.all(targets == np.round(targets)))


def _is_squared_error(baseline, targets):
    """True when an all-zero output's loss is the mean (or sum) of the squared targets: a
    squared-error loss, whose scale is the targets'."""
    if targets.dtype.kind != "f":
        return False
    squares = np.square(targets.astype(np.float64))
    return any(math.isclose(baseline, level, rel_tol=1e-4)
               for level in (float(squares.mean()), float(squares.sum())))


def _shapes(backend, inputs):
    if isinstance(inputs, tuple):
        return ", ".join(str(tuple(x.shape)) for x in inputs)
    return str(tuple(inputs.shape))


def _failing(name, summary, *, code, location):
    """A function that makes the FAIL item ``name`` with one ``code`` finding."""
    def fail(*, message, suggestion, evidence, severity="error"):
        finding = Finding(code, severity, location, message, suggestion, evidence)
        return CheckItem(name, FAIL, summary, [finding])
    return fail


def _skipped(names, why):
    return [CheckItem(name, SKIP, why) for name in names]


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
    reached = "reaches its target" if fallback.steps is not None else "is memorising it"
    steps = fallback.steps if fallback.steps is not None else fallback.max_steps
    return Finding(
        "OVERFIT_FAILED", "warning", "loss",
        f"with your optimizer ({type(optimizer).__name__}, lr {T.lr_text(optimizer)}) the loss "
        f"went from {result.initial_loss:.4g} to {result.final_loss:.4g} in "
        f"{result.max_steps} steps without reaching {result.target_loss:.4g}; "
        f"Adam(lr={DEFAULT_LR:g}) on the same batch "
        f"{reached} in {steps} steps: the model and the loss can learn, the optimizer "
        f"settings are slow",
        "raise the learning rate (find_lr suggests one) or use Adam; then run preflight again",
        {"initial_loss": result.initial_loss, "final_loss": result.final_loss,
         "steps": result.max_steps, "learning_rates": T.learning_rates(optimizer),
         "adam_steps": fallback.steps, "adam_final_loss": fallback.final_loss})
