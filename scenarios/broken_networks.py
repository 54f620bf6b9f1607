"""The lesson's broken-network demo, done right.

One torch MLP (64 -> 128 -> 128 -> 10, ReLU) on scikit-learn's digits, trained four ways under a
``Monitor``: with lr=10, with ReLUs dead from init (biases at -10), without
``optimizer.zero_grad()``, and healthy. Each bug must be named by its own finding code, first
among the findings (errors first, then in the order found; later ones are its consequences),
and the healthy net must draw no warning at all, although half of its ReLU outputs are zero.
Then the lesson's other tools: overfitting one batch (the healthy net does, the dead one cannot
and is told why), the LR range test (lr=10 lies past the divergence), and a gradient check with
``CrossEntropyLoss`` and integer labels (the lesson cast the labels to double, which torch
rejects; ``preflight`` names that as LABEL_DTYPE before torch raises).
"""
from dataclasses import dataclass

import torch

from diagnostics import Monitor, check_gradients, find_lr, overfit_one_batch, preflight
from diagnostics.backends import torch_threads

from . import digits
from .result import ScenarioResult

NAME = "broken_networks"
TITLE = "the lesson's demo done right: three broken nets and a healthy one"
BATCH = 64
SEED = 0
DEAD_BIAS = -10.0


@dataclass(frozen=True)
class Case:
    title: str
    lr: float
    dead: bool = False
    zero_grad: bool = True
    signature: tuple = ()   # the codes that name this bug; empty for the healthy net


CASES = (
    Case("learning rate 10", lr=10.0, signature=("NAN_LOSS", "LOSS_DIVERGING")),
    Case("dead ReLUs from init (biases at -10)", lr=0.1, dead=True, signature=("DEAD_UNITS",)),
    Case("missing optimizer.zero_grad()", lr=0.1, zero_grad=False,
         signature=("STALE_GRADIENTS",)),
    Case("healthy", lr=0.1),
)


def build_model(*, dead=False, seed=SEED):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, digits.CLASSES))
    if dead:
        with torch.no_grad():
            model[0].bias.fill_(DEAD_BIAS)
            model[2].bias.fill_(DEAD_BIAS)
    return model


def run(*, fast=False):
    """The four training runs, then overfit-one-batch, the LR finder and the gradient check;
    ``fast`` trains 60 steps per run instead of 300."""
    result = ScenarioResult(NAME, TITLE, fast)
    with result.timed(), torch_threads(1):
        steps = 60 if fast else 300
        split = digits.load_split()
        x, y = digits.as_torch(split.x_train, split.y_train)
        for case in CASES:
            report = _train(case, x, y, steps=steps)
            result.section(f"{case.title}: SGD lr={case.lr:g}, {steps} steps"
                           + ("" if case.zero_grad else ", no zero_grad()"))
            result.say(_findings_text(report))
            _check_case(result, case, report)
        _overfit(result, x, y)
        _lr_finder(result, x, y)
        _gradient_check(result, x, y)
    return result


def _train(case, x, y, *, steps):
    model = build_model(dead=case.dead)
    optimizer = torch.optim.SGD(model.parameters(), lr=case.lr)
    generator = torch.Generator().manual_seed(SEED)
    loss_fn = torch.nn.CrossEntropyLoss()
    with Monitor(model, optimizer) as monitor:
        for _ in range(steps):
            rows = torch.randint(0, len(x), (BATCH,), generator=generator)
            if case.zero_grad:
                optimizer.zero_grad()
            loss = loss_fn(model(x[rows]), y[rows])
            loss.backward()
            optimizer.step()
            monitor.step(loss)
        return monitor.report()


def _findings_text(report):
    loss = report.loss
    head = f"loss {loss['first']:.4g} -> {loss['last']:.4g}" if loss else "no loss recorded"
    layers = ", ".join(f"'{layer.name}' {layer.zero_fraction:.0%} zeros / "
                       f"{layer.dead_fraction:.0%} dead" for layer in report.layers
                       if layer.type_name == "ReLU")
    findings = [str(f) for f in report.findings] or ["no findings"]
    return "\n".join([f"{head}; ReLU outputs: {layers}"] + findings)


def _serious(report):
    return [f for f in report.findings if f.is_alarm]


def _check_case(result, case, report):
    codes = {f.code for f in _serious(report)}
    if not case.signature:
        result.check(f"{case.title}: no warning or error", not codes,
                     f"found: {', '.join(sorted(codes)) or 'none'}")
        relu = [layer for layer in report.layers if layer.type_name == "ReLU"]
        result.check(f"{case.title}: about half of each ReLU layer's outputs are zero, yet no "
                     f"unit is dead",
                     bool(relu) and all(0.2 <= layer.zero_fraction <= 0.8
                                        and layer.dead_fraction == 0 for layer in relu),
                     ", ".join(f"'{layer.name}' {layer.zero_fraction:.0%} zeros, "
                               f"{layer.dead_fraction:.0%} dead" for layer in relu))
        return
    first = _serious(report)[0].code if codes else None
    result.check(f"{case.title}: named {' or '.join(case.signature)}, first of its findings",
                 first in case.signature,
                 f"findings in order: {', '.join(f.code for f in _serious(report)) or 'none'}")
    if case.dead:
        dead_at = sorted(f.location for f in report.findings if f.code == "DEAD_UNITS")
        result.check(f"{case.title}: DEAD_UNITS names both ReLU layers", dead_at == ["1", "3"],
                     f"at {dead_at}")


def _overfit(result, x, y):
    loss_fn = torch.nn.CrossEntropyLoss()
    healthy = overfit_one_batch(build_model(), loss_fn, x[:32], y[:32])
    dead = overfit_one_batch(build_model(dead=True), loss_fn, x[:32], y[:32])
    result.section("overfit one batch of 32 (Adam lr 3e-3, up to 200 steps)")
    result.say(f"healthy net: {healthy}\ndead net: {dead}")
    result.check("overfit one batch: the healthy net memorises it", healthy.passed,
                 f"{healthy.steps} steps")
    causes = dead.findings[0].evidence["likely_causes"] if dead.findings else []
    result.check("overfit one batch: the dead net cannot, and is told no gradient reaches its "
                 "layers", not dead.passed and any("gradient" in cause for cause in causes[:1]),
                 f"first likely cause: {causes[0] if causes else 'none'}")


def _lr_finder(result, x, y):
    model = build_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    sweep = find_lr(model, torch.nn.CrossEntropyLoss(), _Batches(x, y), optimizer=optimizer,
                    start_lr=1e-5, end_lr=100.0, steps=100, progress=False)
    result.section("LR range test on the healthy net (SGD, lr 1e-5 -> 100)")
    result.say(sweep)
    diverged = sweep.diverged_at
    result.check("LR finder: the loss diverges before lr=10, and the suggestion is 10x or more "
                 "below that", diverged is not None and diverged <= 10.0
                 and sweep.suggestion is not None and sweep.suggestion * 10 <= diverged,
                 f"diverged at {diverged if diverged is None else f'{diverged:.3g}'}, suggestion "
                 f"{sweep.suggestion if sweep.suggestion is None else f'{sweep.suggestion:.3g}'}")


class _Batches:
    """Random minibatches of the training set, a fresh seeded draw on every pass."""

    def __init__(self, x, y, *, passes_of=20):
        self.x, self.y, self.count = x, y, passes_of
        self.generator = torch.Generator().manual_seed(SEED)

    def __iter__(self):
        for _ in range(self.count):
            rows = torch.randint(0, len(self.x), (BATCH,), generator=self.generator)
            yield self.x[rows], self.y[rows]


def _gradient_check(result, x, y):
    loss_fn = torch.nn.CrossEntropyLoss()
    model = build_model()
    result.section("gradient check with CrossEntropyLoss and integer labels")
    try:
        loss_fn(model(x[:16]).double(), y[:16].double())
        raised = None
    except RuntimeError as error:
        raised = str(error).splitlines()[0]
    result.say(f"the lesson's way, labels cast to double: torch raises: {raised}")
    checklist = preflight(model, loss_fn, x[:32], y[:32].double())
    item = checklist.item("label dtype")
    result.say("preflight with those labels:\n" + "\n".join(
        [f"  {item.status}  label dtype  {item.summary}"] + [f"  {f}" for f in item.findings]))
    result.check("preflight names double labels for cross-entropy as LABEL_DTYPE",
                 item.status == "FAIL" and [f.code for f in item.findings] == ["LABEL_DTYPE"],
                 f"{item.status}: {', '.join(f.code for f in item.findings) or 'no finding'}")
    report = check_gradients(model, loss_fn, x[:16], y[:16])
    result.say(report)
    result.check("check_gradients with int64 labels: the healthy net passes", report.passed,
                 f"{report.forward_evaluations} forward evaluations")
