"""A character-level GPT in minigrad and torch: trained side by side, then an attention bug
planted from the catalogue and localized by the gradient check, with a Markdown debugging log.

1. The twins (``bug_injection/reference/gpt.py``: token and position embeddings, pre-LayerNorm
   blocks of causal self-attention and a GELU MLP, an output head tied to the token embedding)
   train on the Zen of Python with AdamW in float64: their loss curves agree step by step, and
   both write the same greedy continuation.
2. ``attention_mask_not_in_backward`` is planted in the hunt's tiny GPT on both frameworks:
   attention's backward forgets the causal mask its forward applied. ``check_gradients`` must
   name the attention module and its own code ("internal") between its sub-modules.
3. Without the bug the same check passes.
"""
import inspect

import numpy as np
import torch

import minigrad
from bug_injection import make_bench
from bug_injection.planted import transformer
from bug_injection.planted.catalog import get_bug
from bug_injection.reference import gpt, text
from diagnostics import check_gradients
from diagnostics.backends import torch_threads

from .files import output_dir
from .result import ScenarioResult

NAME = "tiny_gpt"
TITLE = "a character-level GPT in minigrad and torch; an attention bug planted and localized"
LOG_FILE = "tiny_gpt_debugging_log.md"
BUG = "attention_mask_not_in_backward"
CONFIG = gpt.GPTConfig(vocab_size=len(text.vocabulary()), block_size=16, width=16, heads=2,
                       layers=2)
PROMPT = "Beautiful is "
CURVE_RTOL = 1e-9
ROWS = 8       # the gradient check's batch, as the hunt's


def run(*, fast=False, out_dir=None):
    """Train, plant, localize, fix; ``fast`` trains 8 steps instead of 60 and checks the fixed
    model on minigrad only."""
    result = ScenarioResult(NAME, TITLE, fast)
    with result.timed(), torch_threads(1):
        folder = output_dir(out_dir)
        log = _MarkdownLog()
        _train_side_by_side(result, log, steps=8 if fast else 60)
        bug = get_bug(BUG)
        for backend in ("minigrad", "torch"):
            _localize(result, log, bug, backend)
        for backend in ("minigrad",) if fast else ("minigrad", "torch"):
            _verify_fix(result, log, bug, backend)
        path = folder / LOG_FILE
        path.write_text(log.text())
        result.files["debugging log"] = str(path)
        written = path.read_text()
        result.check("the Markdown log names the module, the path and the wrong line",
                     all(word in written for word in (f"`{bug.culprit}`", "internal",
                                                      "# bug")), str(path))
    return result


def _train_side_by_side(result, log, *, steps):
    model, twin = gpt.build_twins(CONFIG, seed=0)
    loss_fn = gpt.gpt_classes(minigrad.nn).NextTokenLoss()
    twin_loss_fn = gpt.gpt_classes(torch.nn).NextTokenLoss()
    optimizer = minigrad.optim.AdamW(model.parameters(), lr=1e-2)
    twin_optimizer = torch.optim.AdamW(twin.parameters(), lr=1e-2)
    x, y = text.sequences(length=CONFIG.block_size)
    rng = np.random.default_rng(0)
    curve, twin_curve = [], []
    for _ in range(steps):
        rows = rng.choice(len(x), size=16, replace=False)
        for net, opt, fn, convert, losses in (
                (model, optimizer, loss_fn, minigrad.tensor, curve),
                (twin, twin_optimizer, twin_loss_fn, torch.from_numpy, twin_curve)):
            opt.zero_grad()
            loss = fn(net(convert(x[rows])), convert(y[rows]))
            loss.backward()
            opt.step()
            losses.append(loss.item())
    worst = float(np.max(np.abs(np.array(curve) - twin_curve) / np.abs(twin_curve)))
    sample, twin_sample = _continue(model, minigrad.tensor), _continue(twin, torch.from_numpy)
    result.section(f"training the twins side by side: {steps} AdamW steps, float64, "
                   f"{sum(p.numel() for p in twin.parameters())} parameters")
    result.say("step  minigrad loss       torch loss")
    for step in sorted({0, steps // 2, steps - 1}):
        result.say(f"{step:4d}  {curve[step]:.12f}  {twin_curve[step]:.12f}")
    result.say(f"greedy continuation of {PROMPT!r}: minigrad {sample!r}, torch {twin_sample!r}")
    result.check(f"the loss curves agree at every step to {CURVE_RTOL:g} relative",
                 worst <= CURVE_RTOL, f"largest relative difference {worst:.1e}")
    result.check("both twins learn (last loss below the first)",
                 curve[-1] < curve[0] and twin_curve[-1] < twin_curve[0],
                 f"{curve[0]:.3f} -> {curve[-1]:.3f}")
    result.check("both twins write the same continuation", sample == twin_sample, repr(sample))
    log.training(model, steps, curve, twin_curve, sample)


def _continue(model, convert, *, characters=12):
    """Greedy decoding from ``PROMPT`` (the last ``block_size`` characters as context)."""
    model.eval()
    ids = list(text.encode(PROMPT))
    with (minigrad.no_grad() if convert is minigrad.tensor else torch.no_grad()):
        for _ in range(characters):
            context = np.array([ids[-CONFIG.block_size:]])
            logits = model(convert(context))
            ids.append(int(np.argmax(np.asarray(logits[0, -1].tolist()))))
    model.train()
    return text.decode(ids[len(PROMPT):])


def _localize(result, log, bug, backend):
    bench = make_bench(bug.setup, backend)
    with bug.planted(bench):
        report = check_gradients(bench.model, bench.loss_fn, bench.train_x[:ROWS],
                                 bench.train_y[:ROWS])
    cause = report.causes[0] if report.causes else None
    result.section(f"planted on {backend}: {bug.description}")
    result.say(report)
    result.check(f"{backend}: the check fails", not report.passed)
    result.check(f"{backend}: culprit is '{bug.culprit}', its own code between its "
                 f"sub-modules ({bug.path})",
                 cause is not None and cause.module == bug.culprit and cause.path == bug.path,
                 f"culprits {report.culprits}, path {cause.path if cause else None}")
    log.case(backend, bug, report)


def _verify_fix(result, log, bug, backend):
    bench = make_bench(bug.setup, backend)
    report = check_gradients(bench.model, bench.loss_fn, bench.train_x[:ROWS],
                             bench.train_y[:ROWS])
    result.section(f"fixed on {backend}: the correct attention backward")
    result.say(report)
    result.check(f"{backend}: with the correct backward the check passes", report.passed,
                 f"{report.forward_evaluations} forward evaluations")
    log.fix(backend, report)


class _MarkdownLog:
    """The session as Markdown: the twins, the planted bug per framework, the fix."""

    def __init__(self):
        self.parts = []

    def training(self, model, steps, curve, twin_curve, sample):
        self.parts += [
            "# Debugging log: an attention backward that forgets the causal mask", "",
            "A character-level GPT, written once for both frameworks "
            "(`bug_injection/reference/gpt.py`), trained on the Zen of Python:", "",
            "```", repr(model), "```", "",
            f"{steps} AdamW steps in float64, minigrad and torch side by side: loss "
            f"{curve[0]:.6f} -> {curve[-1]:.6f} (minigrad), {twin_curve[0]:.6f} -> "
            f"{twin_curve[-1]:.6f} (torch); both continue {PROMPT!r} with {sample!r}.", ""]

    def case(self, backend, bug, report):
        cause = report.causes[0] if report.causes else None
        self.parts += [
            f"## Planted on {backend}: `{bug.name}`", "", bug.description + ".", "",
            "The wrong backward (written once in NumPy, run by both frameworks):", "",
            "```python", inspect.getsource(transformer.attention_mask_not_in_backward).rstrip(),
            "```", "",
            "`check_gradients(model, loss_fn, inputs, targets)` on the hunt's tiny GPT:", "",
            "```", str(report), "```", ""]
        if cause is not None:
            self.parts += [
                "Conclusion:", "",
                f"- module: `{cause.module}` ({cause.module_type}), {cause.path} path: the "
                f"gradient entering its code is right, the one leaving it is wrong",
                f"- pattern: {cause.pattern}",
                f"- look for: {cause.pattern.hint if cause.pattern else 'n/a'}", ""]

    def fix(self, backend, report):
        self.parts += [f"## Fix ({backend})", "", "The right attention backward; the same check:",
                       "", "```", str(report), "```", ""]

    def text(self):
        return "\n".join(self.parts)
