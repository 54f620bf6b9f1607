"""Exercise 5: a transposed weight in a minigrad backward pass, localized by the gradient check.

A minigrad MLP on digits has one square layer (``"2"``) whose autograd Function carries a bug
(a wrong formula from the catalogue, ``bug_injection.planted.formulas``). Two variants are planted,
one at a time: the weight gradient comes out transposed, and the
input gradient uses ``W.T`` where ``W`` belongs. For each, ``check_gradients`` must name the
module ``"2"``, the parameter whose gradient is wrong, and the pattern "transpose"; with the
correct Function the check passes. The whole session is written as a Markdown debugging log.
"""
import inspect
from dataclasses import dataclass

import numpy as np

import minigrad
from bug_injection.planted import formulas
from bug_injection.planted.functions import minigrad_op, spoiled_function
from diagnostics import check_gradients
from minigrad import nn

from . import digits
from .files import output_dir
from .result import ScenarioResult

NAME = "localize_gradient_bug"
TITLE = "a transposed weight in a minigrad backward pass, localized"
LOG_FILE = "gradient_debugging_log.md"
PLANTED = "2"  # the square layer that gets the buggy Function


RIGHT = minigrad_op("linear")  # minigrad's own Linear Function: the correct backward


class HandWrittenLinear(nn.Linear):
    """``nn.Linear`` whose forward calls a given autograd Function."""

    def __init__(self, in_features, out_features, *, function):
        super().__init__(in_features, out_features, dtype=np.float64)
        self.function = function

    def forward(self, x):
        return self.function.apply(x, self.weight, self.bias)


@dataclass(frozen=True)
class Case:
    title: str
    gradient: str        # the gradient the bug spoils: "input", "weight" or "bias"
    formula: object      # the wrong formula, from bug_injection.planted.formulas
    faulty: tuple        # the parameters whose gradient must be reported wrong
    path: str            # the culprit's gradient path: "weight" or "input"

    @property
    def function(self):
        """minigrad's Linear Function with this case's gradient spoiled."""
        index = ("input", "weight", "bias").index(self.gradient)
        return spoiled_function("minigrad", "linear", index, self.formula)


CASES = (
    Case("transposed weight gradient", "weight", formulas.transposed, (f"{PLANTED}.weight",),
         "weight"),
    Case("W.T where W belongs in the input gradient", "input",
         formulas.input_with_weight_transposed, ("0.weight", "0.bias"), "input"),
)


def build_model(function, *, seed=0):
    """64 -> 16 -> 16 -> 10 with ReLUs; layer ``"2"`` (16 -> 16) runs ``function``."""
    minigrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 16, dtype=np.float64), nn.ReLU(),
                         HandWrittenLinear(16, 16, function=function), nn.ReLU(),
                         nn.Linear(16, digits.CLASSES, dtype=np.float64))


def run(*, fast=False, out_dir=None):
    """Plant each bug, check, and write the debugging log; ``fast`` skips the element-by-element
    confirmation with ``mode="full"``."""
    result = ScenarioResult(NAME, TITLE, fast)
    with result.timed():
        folder = output_dir(out_dir)
        split = digits.load_split()
        inputs, targets = split.x_train[:32], split.y_train[:32]
        loss_fn = nn.CrossEntropyLoss()
        log = _MarkdownLog()
        log.intro(build_model(RIGHT), len(inputs))
        for case in CASES:
            _hunt(result, log, case, batch=(loss_fn, inputs, targets), fast=fast)
        _verify_fix(result, log, batch=(loss_fn, inputs, targets))
        path = folder / LOG_FILE
        path.write_text(log.text())
        result.files["debugging log"] = str(path)
        text = path.read_text()
        result.check("the Markdown log names the module, the parameters and the pattern",
                     all(word in text for word in (f"`{PLANTED}`", f"`{PLANTED}.weight`",
                                                   "`0.weight`", "transpose")),
                     str(path))
    return result


def _hunt(result, log, case, *, batch, fast):
    loss_fn, inputs, targets = batch
    model = build_model(case.function)
    report = check_gradients(model, loss_fn, inputs, targets)
    result.section(f"planted: {case.title} in layer '{PLANTED}'")
    result.say(report)
    pattern = report.causes[0].pattern if report.causes else None
    result.check(f"{case.title}: the check fails", not report.passed)
    result.check(f"{case.title}: culprit module is '{PLANTED}' ({case.path} path)",
                 report.culprits[:1] == [PLANTED]
                 and report.causes[0].path == case.path,
                 f"culprits {report.culprits}, path "
                 f"{report.causes[0].path if report.causes else None}")
    result.check(f"{case.title}: wrong parameter gradients are {', '.join(case.faulty)}",
                 sorted(report.faulty) == sorted(case.faulty), f"faulty {report.faulty}")
    result.check(f"{case.title}: pattern is 'transpose'",
                 pattern is not None and pattern.kind == "transpose", f"pattern {pattern}")
    full = None
    if not fast:
        full = check_gradients(model, loss_fn, inputs, targets, mode="full")
        result.check(f"{case.title}: mode='full' (every element) agrees on the wrong parameters",
                     sorted(full.faulty) == sorted(case.faulty), f"faulty {full.faulty}")
    log.case(case, report, full)


def _verify_fix(result, log, *, batch):
    loss_fn, inputs, targets = batch
    report = check_gradients(build_model(RIGHT), loss_fn, inputs, targets)
    result.section("fixed: the correct backward")
    result.say(report)
    result.check("with the correct backward the check passes", report.passed,
                 f"{report.forward_evaluations} forward evaluations")
    log.fix(report)


class _MarkdownLog:
    """The debugging session as Markdown: setup, one section per planted bug, the fix."""

    def __init__(self):
        self.parts = []

    def intro(self, model, batch):
        self.parts += [
            "# Debugging log: a wrong gradient in a minigrad backward pass", "",
            "Model (minigrad, float64) for scikit-learn's digits, with `CrossEntropyLoss` "
            f"and integer labels; checked on one batch of {batch} images:", "",
            "```", repr(model), "```", "",
            f"Layer `{PLANTED}` calls an autograd Function: minigrad's own Linear op when "
            "correct, or the same op with one gradient replaced by a wrong formula.", ""]

    def case(self, case, report, full):
        cause = report.causes[0] if report.causes else None
        self.parts += [f"## Planted: {case.title}", "",
                       f"The backward returns the right gradients, the {case.gradient}'s "
                       "replaced by (`right` is the correct one):", "", "```python",
                       inspect.getsource(case.formula).rstrip(), "```", "",
                       "`check_gradients(model, nn.CrossEntropyLoss(), inputs, targets)`:", "",
                       "```", str(report), "```", ""]
        if cause is not None:
            self.parts += [
                "Conclusion:", "",
                f"- module: `{cause.module}` ({cause.module_type}), {cause.path} path",
                f"- wrong parameter gradients: {', '.join(f'`{n}`' for n in report.faulty)}"
                + (f" (only as a consequence: they lie upstream of `{cause.module}`)"
                   if cause.affected else ""),
                f"- pattern: {cause.pattern}",
                f"- look for: {cause.pattern.hint if cause.pattern else 'n/a'}", ""]
        if full is not None:
            self.parts += [f"Confirmed element by element (`mode=\"full\"`, "
                           f"{full.forward_evaluations} forward evaluations): wrong parameter "
                           f"gradients {', '.join(f'`{n}`' for n in full.faulty)}.", ""]

    def fix(self, report):
        self.parts += ["## Fix", "",
                       "Back to minigrad's correct Linear Function; the same check:", "",
                       "```", str(report), "```", ""]

    def text(self):
        return "\n".join(self.parts)
