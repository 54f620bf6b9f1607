"""Exercise 1: a 20-layer net without normalization; the detector fires and suggests a clip value.

The net is 20 ``Linear`` layers with ReLUs, He-initialised, no batch or layer norm, trained on
digits with SGD (momentum 0.9): a warm-up of ``WARMUP_STEPS`` steps at lr 0.01, then the peak lr
0.2, which a net this deep without normalization cannot take. At the first steps of the peak the
gradient norm jumps by orders of magnitude and the loss diverges a few steps later. The outcome
is made by construction, not left to chance: at lr 0.1 the same net sits at the edge of
stability, where whether and when it blows up depends on rounding (the CPU, the thread count);
a peak twice as high blows up within a few steps of its start from any of those
trajectories.

A ``Monitor`` with ``every=1`` watches (an explosion can go from calm to NaN between two
samples of a sparser schedule) and calls an alert on every finding: EXPLODING_GRADIENTS must
fire while the loss is still finite, with a clip value taken from the calm gradient norms of
the warm-up (AutoClip's percentile). The same net from the same weights, trained with
``clip_grad_norm_(max_norm=<that value>)``, must then train: every loss finite, the loss down and
test accuracy at least twice chance, the Monitor quiet about exploding gradients and NaN. How
far the loss falls at that peak is again a matter of rounding, so it is not claimed.
"""
import math

import numpy as np
import torch

from diagnostics import Monitor
from diagnostics.backends import torch_threads

from . import digits
from .result import ScenarioResult

NAME = "exploding_gradients"
TITLE = "a 20-layer net without normalization: exploding gradients detected, clip suggested"
DEPTH = 20
WIDTH = 64
WARMUP_LR = 0.01
WARMUP_STEPS = 50
LR = 0.2
MOMENTUM = 0.9
BATCH = 64
SEED = 0
# what the clip removes; a loss that rises for a while at this peak (LOSS_DIVERGING) it may not
CLIPPED_AWAY_CODES = ("NAN_LOSS", "EXPLODING_GRADIENTS")


def build_model(*, seed=SEED):
    """20 Linear layers (19 hidden of width 64, ReLU), He-normal weights, zero biases."""
    torch.manual_seed(seed)
    layers, features = [], 64
    for _ in range(DEPTH - 1):
        linear = torch.nn.Linear(features, WIDTH)
        torch.nn.init.normal_(linear.weight, std=math.sqrt(2.0 / features))
        torch.nn.init.zeros_(linear.bias)
        layers += [linear, torch.nn.ReLU()]
        features = WIDTH
    layers.append(torch.nn.Linear(features, digits.CLASSES))
    return torch.nn.Sequential(*layers)


def run(*, fast=False, seed=SEED):
    """Train without and with the suggested clip; ``fast`` trains 200 steps instead of 500.
    ``seed`` draws the weights and the batches: the lesson holds for any."""
    result = ScenarioResult(NAME, TITLE, fast)
    with result.timed(), torch_threads(1):
        steps = 200 if fast else 500
        split = digits.load_split()
        data = digits.as_torch(split.x_train, split.y_train)
        test = digits.as_torch(split.x_test, split.y_test)

        result.section(f"{DEPTH} layers, no normalization, SGD momentum={MOMENTUM}: lr={WARMUP_LR} "
                       f"for {WARMUP_STEPS} steps, then lr={LR}; {steps} steps, no clipping; "
                       f"Monitor(every=1) with an alert callback")
        plain = _train(build_model(seed=seed), data, test, steps=steps, clip=None, seed=seed)
        result.say(_run_text(plain))
        alert = next((a for a in plain.alerts if a.finding.code == "EXPLODING_GRADIENTS"), None)
        if alert is not None:
            result.say(f"alert at step {alert.step}:\n{alert.finding}")
        clip = None if alert is None else alert.finding.evidence.get("suggested_clip")
        _check_detection(result, plain, alert, clip)
        if clip is None:
            return result

        result.section(f"the same net from the same weights, with "
                       f"clip_grad_norm_(model.parameters(), max_norm={clip:.3g})")
        clipped = _train(build_model(seed=seed), data, test, steps=steps, clip=clip,
                         seed=seed)
        result.say(_run_text(clipped))
        findings = clipped.report.findings
        result.say(f"Monitor over the clipped run: {len(findings)} finding(s)"
                   + "".join(f"\n{finding}" for finding in findings))
        _check_clipped(result, clipped)
    return result


class _Alert:
    """A finding as the ``on_finding`` callback saw it, with the step it came at."""

    def __init__(self, step, finding):
        self.step, self.finding = step, finding


class _Run:
    def __init__(self):
        self.losses, self.norms, self.alerts = [], [], []
        self.report = None
        self.accuracy = None


def _train(model, data, test, *, steps, clip, seed):
    """SGD with momentum on random minibatches; the loop keeps going after the alerts, so the
    run shows what happens when nobody reacts."""
    x, y = data
    run = _Run()
    optimizer = torch.optim.SGD(model.parameters(), lr=WARMUP_LR, momentum=MOMENTUM)
    generator = torch.Generator().manual_seed(seed)
    alert = lambda finding: run.alerts.append(_Alert(len(run.losses), finding))
    with Monitor(model, optimizer, every=1, on_finding=alert) as monitor:
        for step in range(steps):
            if step == WARMUP_STEPS:
                for group in optimizer.param_groups:
                    group["lr"] = LR
            rows = torch.randint(0, len(x), (BATCH,), generator=generator)
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x[rows]), y[rows])
            loss.backward()
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(),
                                                  clip if clip is not None else math.inf)
            optimizer.step()
            monitor.step(loss)
            run.losses.append(loss.item())
            run.norms.append(float(norm))
        run.report = monitor.report()
    with torch.no_grad():
        run.accuracy = float((model(test[0]).argmax(1) == test[1]).float().mean())
    return run


def _run_text(run):
    losses, norms = np.array(run.losses), np.array(run.norms)
    marks = sorted(set(np.linspace(0, len(losses) - 1, 8).astype(int)))
    rows = ["  step   loss        gradient norm (before clipping)"]
    rows += [f"  {i:>4}   {losses[i]:<10.4g}  {norms[i]:.4g}" for i in marks]
    finite = np.isfinite(losses)
    first_bad = int(np.argmin(finite)) if not finite.all() else None
    ending = (f"the loss became {losses[first_bad]} at step {first_bad}" if first_bad is not None
              else f"every loss finite; mean of the last 20: {losses[-20:].mean():.4g}")
    return "\n".join(rows + [f"  {ending}; test accuracy {run.accuracy:.1%}",
                             f"  alerts: {_alerts_text(run.alerts)}"])


def _alerts_text(alerts, *, shown=3):
    """One entry per code, in the order the codes first came: the steps and where."""
    by_code = {}
    for alert in alerts:
        by_code.setdefault(alert.finding.code, []).append(alert)
    entries = []
    for code, group in by_code.items():
        steps = sorted({a.step for a in group})
        when = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        places = list(dict.fromkeys(a.finding.location for a in group
                                    if a.finding.location is not None))
        where = ", ".join(places[:shown])
        if len(places) > shown:
            where += f" and {len(places) - shown} more"
        entries.append(f"{code} ({when}{', at ' + where if where else ''})")
    return "; ".join(entries) or "none"


def _check_detection(result, run, alert, clip):
    losses = np.array(run.losses)
    result.check("without clipping the training blows up (a non-finite loss or a loss 10x "
                 "its start)",
                 not np.isfinite(losses).all() or np.nanmax(losses) > 10 * losses[0],
                 f"largest loss {np.nanmax(losses):.3g}, gradient norm up to "
                 f"{np.nanmax(run.norms):.3g}")
    step = None if alert is None else alert.step
    result.check("EXPLODING_GRADIENTS fires while the loss is still finite",
                 alert is not None and np.isfinite(losses[:step + 1]).all(),
                 "never fired" if alert is None else f"at step {step}, loss "
                 f"{losses[step]:.4g}")
    result.check("it suggests a clip value, in its evidence and its advice",
                 clip is not None and math.isfinite(clip) and clip > 0
                 and f"max_norm={clip:.3g}" in alert.finding.suggestion,
                 "no suggested_clip" if clip is None else f"suggested_clip {clip:.4g}")


def _check_clipped(result, run):
    losses = np.array(run.losses)
    start, end = losses[:20].mean(), losses[-20:].mean()
    result.check("with the clip every loss is finite, the loss falls and test accuracy is at "
                 "least twice chance",
                 np.isfinite(losses).all() and end < start
                 and run.accuracy >= 2 / digits.CLASSES,
                 f"loss {start:.4g} -> {end:.4g} (means of the first and last 20 steps), test "
                 f"accuracy {run.accuracy:.1%}")
    codes = [f.code for f in run.report.findings if f.code in CLIPPED_AWAY_CODES]
    result.check("with the clip the Monitor reports no exploding gradients or NaN",
                 not codes, f"found: {', '.join(codes) or 'none'}")
