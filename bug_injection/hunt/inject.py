"""Plant one bug and keep every step: what was changed, what the diagnostic said, where it
points, whether that is the ground truth, and that nothing stayed patched."""
from dataclasses import dataclass

from ..planted.state import changes, snapshot
from ..reference.bench import make_bench
from .catalogue import run_bug
from .runner import single_threaded_torch


@dataclass
class Injection:
    bug: object
    bench: object
    planted: list        # what the plant changed, in words
    reverted: bool       # the bench exactly as before once the plant was taken out
    outcome: object      # the hunt's Outcome for this run (verdict, diagnosis, leftovers)


def inject(bug, backend, *, seed=0):
    """Plant ``bug`` into a fresh reference bench on ``backend`` and diagnose it."""
    bench = make_bench(bug.setup, backend, seed=seed)
    before = snapshot(bench)
    with bug.planted(bench):
        planted = changes(before, snapshot(bench))
    reverted = not changes(before, snapshot(bench))
    with single_threaded_torch((backend,)):
        outcome = run_bug(bug, bench)
    return Injection(bug, bench, planted, reverted, outcome)


def render(injection):
    """The injection, step by step, as text."""
    bug, bench, outcome = injection.bug, injection.bench, injection.outcome
    lines = [f"gradhunt inject {bug.name} --backend {bench.backend}", "",
             f"1. The bench: {bench.setup} on {bench.backend}, loss "
             f"{type(bench.loss_fn).__name__}, {bench.train_x.shape[0]} training rows",
             _indent(repr(bench.model)), "",
             f"2. The bug ({bug.kind}): {bug.description}.", "   Planting it changed:"]
    lines += [f"     {line}" for line in injection.planted] or ["     (nothing)"]
    lines += [f"   Taken out again, the bench is exactly as before: "
              f"{'yes' if injection.reverted else 'NO'}", "",
              f"3. The diagnostic: {outcome.tool} (expected to raise "
              f"{' or '.join(bug.codes)}), {outcome.seconds:.2f} s"]
    if outcome.diagnosis is None:
        lines.append(f"   it raised {outcome.message}")
    else:
        lines += ["", "4. What it reports:", _indent(str(outcome.diagnosis.report)), ""]
    lines += [f"5. Where it points: {outcome.found}  (finding {outcome.code or 'none'})",
              f"   Ground truth:     {outcome.expected}",
              f"   Verdict: {outcome.verdict.upper()}"]
    if outcome.warnings:
        lines.append(f"   (warnings raised during the run: {'; '.join(outcome.warnings)})")
    leftovers = outcome.leftovers
    lines += ["", "6. After the run: " + ("nothing stays patched." if not leftovers else
                                          "STILL PATCHED: " + "; ".join(leftovers))]
    return "\n".join(lines)


def _indent(text, prefix="   "):
    return "\n".join(prefix + line for line in text.splitlines())
