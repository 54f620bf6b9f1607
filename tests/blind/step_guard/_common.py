"""What every step-guard program shares: the optimizer-step call site and the Monitor's opening.

The programs differ in model, optimizer and loop idiom; they all end an iteration through
``Control.step`` so that the same program can run plain, with a hand-written reference
protection (skip the steps whose gradients are non-finite, or leave out given steps), or under a
gradhunt Monitor, without a second copy of the loop that could drift from the first.
"""
import math

import torch

import gradhunt


class Control:
    """The end of one optimizer step: ``optimizer.step()`` (or the scaler's), then the Monitor.

    ``omit``: step indices (0-based, counted per call) whose optimizer step is not applied;
    forward and backward still ran. ``skip_nonfinite``: a hand-written guard, not applying a step
    whose gradients hold a NaN or an inf. It records each step's gradient norm (divided by the
    loss scale under a GradScaler) so that a test can see where the spike is, without gradhunt.
    """

    def __init__(self, monitor=None, *, omit=(), skip_nonfinite=False):
        self.monitor = monitor
        self.omit = frozenset(omit)
        self.skip_nonfinite = skip_nonfinite
        self.count = 0
        self.norms = []
        self.dropped = []

    def grad_norm(self, optimizer, scaler=None):
        grads = [p.grad.detach().float() for group in optimizer.param_groups
                 for p in group["params"] if p.grad is not None]
        if not grads:
            return 0.0
        norm = torch.linalg.vector_norm(
            torch.stack([torch.linalg.vector_norm(g) for g in grads])).item()
        if scaler is not None:
            norm /= scaler.get_scale()
        return norm

    def step(self, optimizer, loss, *, scaler=None):
        norm = self.grad_norm(optimizer, scaler)
        self.norms.append(norm)
        drop = self.count in self.omit or (self.skip_nonfinite and not math.isfinite(norm))
        if drop:
            self.dropped.append(self.count)
        elif scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        if self.monitor is not None:
            self.monitor.step(loss)
        self.count += 1


def open_monitor(model, optimizer, *, guard=None, guard_replay=False, **kwargs):
    """The default Monitor when no guard is asked for (so the default is what is exercised)."""
    if guard is None and not guard_replay:
        return gradhunt.Monitor(model, optimizer, **kwargs)
    return gradhunt.Monitor(model, optimizer, guard=guard, guard_replay=guard_replay, **kwargs)


def all_finite(model):
    return all(bool(torch.isfinite(p).all()) for p in model.parameters())


def params_of(model):
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def execute(model, optimizer, train, evaluate, *, guard=None, guard_replay=False, plain=False,
            omit=(), skip_nonfinite=False, monitor_kwargs=None):
    """Run ``train(control)`` plain or under a Monitor; evaluate; the result dict of ``run``.

    A GuardStopped (or any exception) raised in the loop propagates after the ``with`` block has
    closed the Monitor.
    """
    control = Control(omit=omit, skip_nonfinite=skip_nonfinite)
    monitor = report = None
    if plain:
        train(control)
    else:
        with open_monitor(model, optimizer, guard=guard, guard_replay=guard_replay,
                          **(monitor_kwargs or {})) as monitor:
            control.monitor = monitor
            train(control)
            report = monitor.report()
    with torch.no_grad():
        metric = float(evaluate())
    return {"monitor": monitor, "report": report, "metric": metric,
            "finite": all_finite(model), "params": params_of(model), "control": control}
