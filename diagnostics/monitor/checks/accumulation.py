"""Gradient accumulation that keeps only the last micro-batches."""
from ...findings import Finding
from ..probes.accumulation import AccumulationTrace

MIN_PASSES = 3       # two passes per step with a clear between are also SAM (the first
                     # gradient picks the perturbation, the second is applied)
MIN_WINDOWS = 2      # seen at two optimizer steps at least


def accumulation_discarded(view):
    """ACCUMULATION_DISCARDED: at ``MIN_WINDOWS`` optimizer steps or more, ``.grad`` was
    cleared between backward passes of the same step (``probes.accumulation``), with at least
    ``MIN_PASSES`` passes in that step: the step applied only the passes after the last
    clearing."""
    trace = view.signal(AccumulationTrace)
    if trace is None:
        return []
    windows = [w for w in trace.dropping if w.passes >= MIN_PASSES]
    if len(windows) < MIN_WINDOWS:
        return []
    step, passes, discarded = windows[0].step, windows[0].passes, windows[0].discarded
    kept = passes - discarded
    return [Finding(
        "ACCUMULATION_DISCARDED", "error", "optimizer",
        f"gradient accumulation keeps only the last micro-batches: the optimizer step at step "
        f"{step} applied {kept} of the {passes} backward passes since the previous step: "
        f".grad was cleared (zero_grad) between them and the gradients of the other "
        f"{discarded} were thrown away; {trace.dropping_count} of {trace.windows} steps "
        f"dropped gradients this way",
        "call optimizer.zero_grad() only right after optimizer.step() (or before the first "
        "micro-batch of a step), never inside the micro-batch loop or at an epoch start "
        "while a window is unfinished; step on a leftover window before clearing it",
        {"step": step, "backward_passes": passes, "discarded_passes": discarded,
         "dropping_steps": trace.dropping_count, "steps": trace.windows,
         "windows": [[w.step, w.passes, w.discarded] for w in trace.dropping],
         "watched_parameter": trace.parameter})]


CHECKS = (accumulation_discarded,)
