"""``TrainingWatch`` on loops without an optimizer (issue 32): parameters moved by hand after
each backward are watched by a Monitor with ``optimizer=None``, one step per iteration."""
import importlib

import pytest

torch = pytest.importorskip("torch")

from diagnostics.integrations import TrainingWatch  # noqa: E402
from tests.realistic.examples import word_language_model  # noqa: E402

F = torch.nn.functional
modules = importlib.import_module("torch.nn.modules.module")
optimizers = importlib.import_module("torch.optim.optimizer")


def _state():
    return (len(modules._global_forward_pre_hooks), len(modules._global_forward_hooks),
            len(optimizers._global_optimizer_pre_hooks), torch.autograd.backward,
            torch.nn.Module.__call__)


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 8, generator=g)
    return x, (x @ torch.randn(8, 3, generator=g)).argmax(1)


def _alarms(watch, heard):
    alarms = [(label, f) for label, f in heard if f.is_alarm]
    alarms += [(label, f) for label, r in watch.reports() for f in r.findings if f.is_alarm]
    return alarms


@pytest.mark.parametrize("update", ["data", "no_grad"])
def test_the_hand_sgd_word_language_model_is_watched_and_quiet(update):
    before = _state()
    heard = []
    with TrainingWatch(on_finding=lambda label, f: heard.append((label, f))) as watch:
        metrics = word_language_model.main(update=update)
    assert _state() == before                         # Module.__call__ put back too
    assert word_language_model.healthy(metrics), metrics
    [(label, report)] = watch.reports()
    assert label == "model (RNNModel, no optimizer)" and watch.by_hand == {label}
    assert report.steps == metrics["iterations"] - 1   # the first iteration finds the loop
    assert not watch.problems and not _alarms(watch, heard), _alarms(watch, heard)
    assert all(f.code != "MONITOR_ERROR" for f in report.findings), report.findings


def test_a_hand_sgd_loop_that_never_zeroes_its_gradients_is_named():
    with TrainingWatch() as watch:
        word_language_model.main(epochs=2, zero_grad=False)
    [(label, report)] = watch.reports()
    assert label == "model (RNNModel, no optimizer)"
    assert "STALE_GRADIENTS" in [f.code for f in report.findings]


def test_the_last_hand_iteration_is_stepped_at_exit():
    torch.manual_seed(0)
    x, y = _data()
    model = _mlp()
    with TrainingWatch(every=1) as watch:
        for _ in range(5):
            model.zero_grad()
            F.cross_entropy(model(x), y).backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.1 * p.grad
    [(_, report)] = watch.reports()
    assert report.steps == 4 and report.findings == []   # iterations 2-5, the 5th at exit


def test_an_lbfgs_closure_moving_the_parameters_inside_the_step_is_not_a_hand_loop():
    from tests.realistic.examples import time_sequence

    with TrainingWatch() as watch:
        time_sequence.main(steps=4)
    assert [label for label, _ in watch.watched] == ["model (Sequence, LBFGS)"]
    assert watch.by_hand == set() and watch.problems == []


def test_gradient_accumulation_before_an_optimizer_step_is_not_a_hand_loop():
    torch.manual_seed(0)
    x, y = _data()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with TrainingWatch(every=2) as watch:
        for _ in range(8):
            opt.zero_grad()
            for micro in range(4):                      # forward after backward, unchanged
                rows = slice(64 * micro, 64 * (micro + 1))
                (F.cross_entropy(model(x[rows]), y[rows]) / 4).backward()
            opt.step()
    assert [label for label, _ in watch.watched] == ["model (Sequential, SGD)"]
    assert watch.by_hand == set() and watch.problems == []


def test_gradients_taken_for_the_input_only_watch_nothing():
    """A fixed classifier differentiated for its input (an adversarial example): backward
    reaches its parameters, which never change: no training loop, nothing watched."""
    torch.manual_seed(0)
    x, y = _data()
    model = _mlp()
    with TrainingWatch() as watch:
        for _ in range(6):
            model.zero_grad()
            attack = x.clone().requires_grad_(True)
            F.cross_entropy(model(attack), y).backward()
            x = (x + 0.01 * attack.grad.sign()).detach()
    assert watch.watched == [] and watch.problems == []


def test_a_hand_loop_that_later_gets_an_optimizer_is_handed_over():
    torch.manual_seed(0)
    x, y = _data()
    model = _mlp()
    with TrainingWatch(every=1) as watch:
        for _ in range(4):                              # warm-up by hand
            model.zero_grad()
            F.cross_entropy(model(x), y).backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= 0.05 * p.grad
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(4):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
    labels = [label for label, _ in watch.watched]
    assert labels == ["model (Sequential, no optimizer)", "model (Sequential, Adam)"]
    assert watch.problems == ["model (Sequential, no optimizer): watched as updated by hand "
                              "until it is stepped by an optimizer (Adam) from here on"]
    assert all(f.code != "MONITOR_ERROR" for _, r in watch.reports() for f in r.findings)
