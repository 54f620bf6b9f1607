"""Run one of gradhunt's diagnostics on a bench, the way a user would, and collect its findings.

``gradcheck``: ``check_gradients`` on the first rows of the training set. ``monitor``: the
reference training loop with a ``Monitor`` attached. ``preflight``: the checklist on one training
batch with the bench's optimizer. ``validate_data``: the bench's train and test sets.
"""
from dataclasses import dataclass, field

from diagnostics import Monitor, check_gradients, preflight, validate_data

from .loop import train

GRADCHECK_ROWS = 8
MONITOR_EVERY, MONITOR_WINDOW = 1, 20


@dataclass(frozen=True)
class Diagnosis:
    """What a diagnostic said: its ``findings``, and for a gradient check the culprit's ``path``
    and ``pattern`` kind per culprit module; ``report`` is the diagnostic's own report."""

    probe: str
    findings: list
    report: object
    paths: dict = field(default_factory=dict)      # culprit module -> gradient path
    patterns: dict = field(default_factory=dict)   # culprit module -> pattern kind


def run_probe(probe, bench):
    """Run the diagnostic ``probe`` (a name in ``catalog.PROBES``) on ``bench``."""
    return _PROBES[probe](bench)


def _gradcheck(bench):
    report = check_gradients(bench.model, bench.loss_fn, bench.train_x[:GRADCHECK_ROWS],
                             bench.train_y[:GRADCHECK_ROWS])
    paths, patterns = {}, {}
    for cause in report.causes:
        paths.setdefault(cause.module, cause.path)
        patterns.setdefault(cause.module, None if cause.pattern is None else cause.pattern.kind)
    return Diagnosis("gradcheck", list(report.findings), report, paths, patterns)


def _monitor(bench):
    with Monitor(bench.model, bench.optimizer, every=MONITOR_EVERY,
                 window=MONITOR_WINDOW) as monitor:
        train(bench, after_step=monitor.step)
    report = monitor.report()
    return Diagnosis("monitor", list(report.findings), report)


def _preflight(bench):
    rows = bench.loop.batch_size
    report = preflight(bench.model, bench.loss_fn, bench.train_x[:rows], bench.train_y[:rows],
                       optimizer=bench.optimizer)
    return Diagnosis("preflight", list(report.findings), report)


def _validate_data(bench):
    report = validate_data(bench.train_x, bench.train_y, test_x=bench.test_x,
                           test_y=bench.test_y)
    return Diagnosis("validate_data", list(report.findings), report)


_PROBES = {"gradcheck": _gradcheck, "monitor": _monitor, "preflight": _preflight,
           "validate_data": _validate_data}
