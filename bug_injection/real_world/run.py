"""Run one corpus entry's twin, built in one backend, through its tool; say what it found.

The verdict of a buggy twin: ``"diagnosed"`` when a warning or error carries one of the
entry's codes, ``"symptom"`` when only other warnings or errors appear, ``"missed"`` when
none appears. A fixed twin is ``"clean"`` when no warning or error appears.
"""
import contextlib
import time
import warnings
from dataclasses import dataclass, field

from diagnostics import Monitor, check_gradients, preflight, validate_data
from diagnostics.backends import torch_threads
from diagnostics.tools.batch_independence import check_batch_independence
from diagnostics.tools.label_checks import check_batch_label_order

ALARMS = ("warning", "error")


@dataclass
class Run:
    """One twin in one backend through one tool: the findings, the alarm codes, the verdict."""

    entry: object
    twin: str                    # "buggy" or "fixed"
    backend: str                 # "torch" or "minigrad"
    verdict: str                 # diagnosed / symptom / missed, or clean / false alarm / error
    codes: list = field(default_factory=list)
    findings: list = field(default_factory=list)
    message: str = ""
    seconds: float = 0.0


def run_entry(entry, twin="buggy", backend="torch"):
    """Build ``entry``'s ``twin`` (``"buggy"`` or ``"fixed"``) in ``backend`` (``"torch"`` or
    ``"minigrad"``, one of ``entry.backends``), run its tool, judge."""
    if twin not in ("buggy", "fixed"):
        raise ValueError(f"twin: expected 'buggy' or 'fixed', got {twin!r}")
    if backend not in entry.backends:
        raise ValueError(f"backend: {entry.name} is reproduced on {', '.join(entry.backends)}, "
                         f"got {backend!r}")
    start = time.perf_counter()
    threads = torch_threads(1) if backend == "torch" else contextlib.nullcontext()
    with threads, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            findings = list(TOOLS[entry.tool](entry.build(twin, backend)))
        except Exception as error:  # a crash is this run's verdict; the hunt goes on
            return Run(entry, twin, backend, "error",
                       message=f"{type(error).__name__}: {error}",
                       seconds=time.perf_counter() - start)
    codes = list(dict.fromkeys(f.code for f in findings if f.severity in ALARMS))
    if twin == "fixed":
        verdict = "false alarm" if codes else "clean"
    elif any(f.code in entry.codes and f.severity in ALARMS
             and entry.location in (None, f.location) for f in findings):
        verdict = "diagnosed"
    else:
        verdict = "symptom" if codes else "missed"
    return Run(entry, twin, backend, verdict, codes, findings,
               seconds=time.perf_counter() - start)


def _monitor(case):
    with Monitor(case.model, case.optimizer, every=1, window=20,
                 scaler=case.scaler) as monitor:
        case.train(monitor.step)
    return monitor.report().findings


def _preflight(case):
    return preflight(case.model, case.loss_fn, case.inputs, case.targets,
                     optimizer=case.optimizer, causal=case.causal).findings


def _check_gradients(case):
    return check_gradients(case.model, case.loss_fn, case.inputs, case.targets).findings


def _validate_data(case):
    return validate_data(**case.data).findings


def _batch_independence(case):
    return check_batch_independence(case.model, case.inputs, causal=case.causal)


def _label_order(case):
    return check_batch_label_order(case.label_batches)


TOOLS = {"monitor": _monitor, "preflight": _preflight, "check_gradients": _check_gradients,
         "validate_data": _validate_data, "batch_independence": _batch_independence,
         "label_order": _label_order}
