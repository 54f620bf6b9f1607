"""Exercise 2: a ReLU net with over 70% dead units; after ``revive_dead_units`` it trains again.

A torch MLP on digits whose hidden biases were pushed to -3 (what one huge bad update does):
most units output zero on every example, get no gradient, and stay dead, so training goes
nowhere, and the ``Monitor`` says so (DEAD_UNITS). The same net, revived (fresh incoming weights
for dead units, zero outgoing weights, optimizer moments reset), trains. Both runs start from the
same weights and take the same steps.
"""
import copy

import numpy as np
import torch

from diagnostics import Monitor, revive_dead_units
from diagnostics.backends import torch_threads

from . import digits
from .result import ScenarioResult

NAME = "revive_dead_units"
TITLE = "over 70% dead ReLU units; after revival the net trains again"
DEAD_BIAS = -3.0
BATCH = 64
LR = 0.05
SEED = 0


def build_model(*, seed=SEED):
    """64 -> 128 -> 128 -> 10, ReLU, hidden biases at ``DEAD_BIAS``."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, 128), torch.nn.ReLU(),
                                torch.nn.Linear(128, digits.CLASSES))
    with torch.no_grad():
        model[0].bias.fill_(DEAD_BIAS)
        model[2].bias.fill_(DEAD_BIAS)
    return model


def run(*, fast=False):
    """Train the dead net as it is and after revival; ``fast`` trains 3 epochs instead of 10."""
    result = ScenarioResult(NAME, TITLE, fast)
    with result.timed(), torch_threads(1):
        epochs = 3 if fast else 10
        split = digits.load_split()
        x, y = digits.as_torch(split.x_train, split.y_train)
        x_test, y_test = digits.as_torch(split.x_test, split.y_test)
        dead_model = build_model()
        revived_model = copy.deepcopy(dead_model)
        start_loss = _loss(dead_model, x, y)
        result.section(f"the net as found: hidden biases at {DEAD_BIAS:g}")
        fractions = _dead_fractions(dead_model, x)
        result.say("dead units per ReLU layer over the training set: "
                   + ", ".join(f"'{name}' {share:.0%}" for name, share in fractions.items())
                   + f"; loss {start_loss:.4f} (chance: ln 10 = {np.log(10):.4f})")

        result.section(f"training it as it is ({epochs} epochs, SGD lr={LR}, momentum 0.9)")
        optimizer = torch.optim.SGD(dead_model.parameters(), lr=LR, momentum=0.9)
        before, dead_before = _train(dead_model, optimizer, x, y, epochs=epochs)
        result.say(_outcome(before, dead_model, x, test=(x_test, y_test)))
        result.say("\n".join(["the Monitor during that training:"]
                             + [str(f) for f in dead_before]))

        result.section("revive_dead_units(model, x_train, optimizer=optimizer), then the same "
                       "training")
        optimizer = torch.optim.SGD(revived_model.parameters(), lr=LR, momentum=0.9)
        report = revive_dead_units(revived_model, x, optimizer=optimizer)
        result.say(report)
        after, dead_after = _train(revived_model, optimizer, x, y, epochs=epochs)
        result.say(_outcome(after, revived_model, x, test=(x_test, y_test)))
        result.say("the Monitor during that training: "
                   + (", ".join(str(f) for f in dead_after) or "no DEAD_UNITS"))

        result.check("over 70% of the units are dead before revival",
                     report.dead_fraction_before > 0.7,
                     f"{report.dead_fraction_before:.0%} of {report.units}")
        flagged = sorted(f.location for f in dead_before if f.is_alarm)
        result.check("the Monitor flags the dead layers while the net trains as it is",
                     "3" in flagged, f"DEAD_UNITS at {flagged}")
        result.check("without revival the net does not train (loss stays within 5% of its "
                     "start)", before[-1] > 0.95 * start_loss,
                     f"loss {start_loss:.4f} -> {before[-1]:.4f}")
        result.check("under 10% dead right after revival", report.dead_fraction_after < 0.1,
                     f"{report.dead_fraction_after:.0%}")
        result.check("revival leaves the output unchanged at that moment",
                     report.output_change <= 1e-6, f"max change {report.output_change:.2g}")
        result.check("after revival the Monitor reports no dead layer",
                     not [f for f in dead_after if f.is_alarm],
                     f"DEAD_UNITS at {sorted(f.location for f in dead_after)}")
        accuracy = _accuracy(revived_model, x_test, y_test)
        result.check("after revival it trains: loss below half its start, test accuracy "
                     "over 80%", after[-1] < 0.5 * start_loss and accuracy > 0.8,
                     f"loss {start_loss:.4f} -> {after[-1]:.4f}, accuracy {accuracy:.1%}")
    return result


def _train(model, optimizer, x, y, *, epochs):
    """Minibatch SGD under a Monitor; the full-batch training loss after each epoch, and the
    Monitor's DEAD_UNITS findings."""
    generator = torch.Generator().manual_seed(SEED)
    losses = []
    with Monitor(model, optimizer) as monitor:
        for _ in range(epochs):
            order = torch.randperm(len(x), generator=generator)
            for start in range(0, len(x), BATCH):
                batch = order[start:start + BATCH]
                optimizer.zero_grad()
                loss = torch.nn.functional.cross_entropy(model(x[batch]), y[batch])
                loss.backward()
                optimizer.step()
                monitor.step(loss)
            losses.append(_loss(model, x, y))
        dead = [f for f in monitor.report().findings if f.code == "DEAD_UNITS"]
    return losses, dead


def _loss(model, x, y):
    with torch.no_grad():
        return float(torch.nn.functional.cross_entropy(model(x), y))


def _accuracy(model, x, y):
    with torch.no_grad():
        return float((model(x).argmax(1) == y).float().mean())


def _dead_fractions(model, x):
    """Per ReLU module, the share of units that are zero on every example of ``x``."""
    fractions, handles = {}, []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ReLU):
            handles.append(module.register_forward_hook(_dead_recorder(fractions, name)))
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return fractions


def _dead_recorder(fractions, name):
    def record(module, args, output):
        fractions[name] = float((output.amax(dim=0) == 0).float().mean())
    return record


def _outcome(losses, model, x, *, test):
    x_test, y_test = test
    shares = ", ".join(f"'{n}' {s:.0%}" for n, s in _dead_fractions(model, x).items())
    curve = ", ".join(f"{loss:.3f}" for loss in losses)
    return (f"training loss after each epoch: {curve}\n"
            f"test accuracy {_accuracy(model, x_test, y_test):.1%}; dead units now: {shares}")
