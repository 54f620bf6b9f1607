"""``TrainingWatch``: the models, optimizers and losses of a loop it was not handed."""
import importlib

import pytest

torch = pytest.importorskip("torch")

from diagnostics.integrations import TrainingWatch  # noqa: E402

modules = importlib.import_module("torch.nn.modules.module")
optimizers = importlib.import_module("torch.optim.optimizer")


def _global_hooks():
    return (len(modules._global_forward_pre_hooks), len(modules._global_forward_hooks),
            len(optimizers._global_optimizer_post_hooks), torch.autograd.backward,
            torch.amp.GradScaler.scale)


def _data(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(128, 8, generator=g)
    return x, (x @ torch.randn(8, 3, generator=g)).argmax(1)


def _mlp():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))


def test_gradient_accumulation_steps_the_monitor_once_per_optimizer_step():
    torch.manual_seed(0)
    x, y = _data()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = _global_hooks()
    with TrainingWatch(every=2) as watch:
        for step in range(12):
            opt.zero_grad()
            for micro in range(4):                       # 4 backwards per optimizer step
                rows = slice(32 * micro, 32 * (micro + 1))
                (torch.nn.functional.cross_entropy(model(x[rows]), y[rows]) / 4).backward()
            opt.step()
    assert _global_hooks() == before                     # every hook and patch gone
    [(label, report)] = watch.reports()
    assert label == "model (Sequential, SGD)" and report.steps == 11   # the first step discovers
    assert report.findings == [] and watch.problems == []


def test_a_gradscaler_loss_is_seen_unscaled():
    torch.manual_seed(0)
    x, y = _data()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)
    with TrainingWatch(every=1) as watch:
        for step in range(6):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    [(_, report)] = watch.reports()
    assert report.history.losses[0] == pytest.approx(loss.item(), rel=0.5)   # ~1, not ~4096
    assert report.findings == []


def test_clipping_before_unscale_is_named_through_the_scaler_the_loop_used():
    torch.manual_seed(0)
    x, y = _data()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu")
    before, clip = _global_hooks(), torch.nn.utils.clip_grad_norm_
    with TrainingWatch(every=1) as watch:
        for step in range(8):
            opt.zero_grad()
            scaler.scale(torch.nn.functional.cross_entropy(model(x), y)).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)   # before unscale_
            scaler.step(opt)
            scaler.update()
    assert _global_hooks() == before
    assert torch.nn.utils.clip_grad_norm_ is clip                     # the patch is off
    [(_, report)] = watch.reports()
    assert "CLIP_BEFORE_UNSCALE" in [f.code for f in report.findings]


def test_two_models_with_their_own_optimizers_get_one_monitor_each():
    torch.manual_seed(0)
    x, _ = _data()
    encoder, head = torch.nn.Linear(8, 4), torch.nn.Linear(4, 1)
    opts = [torch.optim.Adam(encoder.parameters(), lr=1e-3),
            torch.optim.SGD(head.parameters(), lr=1e-2)]
    with TrainingWatch(every=5) as watch:
        for step in range(10):
            for opt in opts:
                opt.zero_grad()
            head(encoder(x)).pow(2).mean().backward()
            for opt in opts:
                opt.step()
    assert [label for label, _ in watch.watched] == ["encoder (Linear, Adam)",
                                                     "head (Linear, SGD)"]
    assert all(report.steps == 9 for _, report in watch.reports())


def test_two_models_of_one_type_with_one_optimizer_type_get_labels_apart():
    """A GAN: generator and discriminator, both Sequential, both with Adam."""
    x, _ = _data()
    torch.manual_seed(0)
    generator = torch.nn.Sequential(torch.nn.Linear(8, 8))
    discriminator = torch.nn.Sequential(torch.nn.Linear(8, 1))
    opt_g = torch.optim.Adam(generator.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    with TrainingWatch(every=5) as watch:
        for _ in range(6):
            opt_d.zero_grad()
            discriminator(generator(x).detach()).mean().backward()
            opt_d.step()
            opt_g.zero_grad()
            (-discriminator(generator(x)).mean()).backward()
            opt_g.step()
    assert [label for label, _ in watch.watched] == ["discriminator (Sequential, Adam)",
                                                     "generator (Sequential, Adam)"]


def test_models_are_labelled_by_the_attribute_a_trainer_holds_them_in():
    """Models reached as ``self.generator`` inside a trainer's method; two unnamed ones of
    one type and optimizer type still get labels apart."""
    x, _ = _data()

    class Trainer:
        def __init__(self):
            self.generator = torch.nn.Sequential(torch.nn.Linear(8, 8))
            self.opt = torch.optim.Adam(self.generator.parameters(), lr=1e-3)

        def fit(self):
            for _ in range(3):
                self.opt.zero_grad()
                self.generator(x).pow(2).mean().backward()
                self.opt.step()

    with TrainingWatch(every=1) as watch:
        Trainer().fit()
        models = [torch.nn.Sequential(torch.nn.Linear(8, 1)) for _ in range(2)]
        opts = [torch.optim.Adam(m.parameters(), lr=1e-3) for m in models]
        for _ in range(3):
            for i in range(2):
                opts[i].zero_grad()
                models[i](x).mean().backward()
                opts[i].step()
    assert [label for label, _ in watch.watched] == [
        "self.generator (Sequential, Adam)", "Sequential (Adam)", "Sequential (Adam) #2"]


def test_an_optimizer_over_bare_tensors_is_reported_as_not_watched():
    weight = torch.zeros(3, requires_grad=True)
    opt = torch.optim.SGD([weight], lr=0.1)
    with TrainingWatch() as watch:
        for step in range(3):
            opt.zero_grad()
            (weight - 1).pow(2).sum().backward()
            opt.step()
    assert watch.watched == []
    assert watch.problems == ["SGD: no module called before its first step holds its "
                              "parameters, so nothing is watched for it"]


def test_hooks_are_removed_when_the_loop_raises():
    before = _global_hooks()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(RuntimeError, match="user code"):
        with TrainingWatch() as watch:
            for step in range(3):
                opt.zero_grad()
                model(torch.ones(2, 8)).sum().backward()
                opt.step()
            raise RuntimeError("user code")
    assert _global_hooks() == before
    [(_, monitor)] = watch.watched
    assert monitor.report().steps == 2
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


def test_an_error_inside_a_monitor_never_stops_the_script(monkeypatch):
    from diagnostics.monitor import Monitor

    step, calls = Monitor.step, []

    def failing_step(monitor, loss):
        calls.append(loss)
        if len(calls) == 3:
            raise ValueError("a probe broke")
        return step(monitor, loss)

    monkeypatch.setattr(Monitor, "step", failing_step)
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with TrainingWatch(every=1) as watch:
        for _ in range(8):
            opt.zero_grad()
            model(torch.ones(4, 8)).sum().backward()
            opt.step()
    assert len(calls) == 3                 # given up after the failure, the loop went on
    assert watch.problems == [
        "model (Sequential, SGD): stopped watching: ValueError: a probe broke"]
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


@pytest.mark.parametrize("options, argument", [
    ({"every": 0}, "every"), ({"jsonl": 3}, "jsonl"), ({"on_finding": "print"}, "on_finding")])
def test_bad_arguments_are_refused(options, argument):
    from diagnostics import DiagnosticsError

    with pytest.raises(DiagnosticsError, match=argument):
        TrainingWatch(**options)


def test_a_model_that_raises_while_being_inspected_is_a_problem_not_a_crash():
    class Odd(torch.nn.Linear):
        def parameters(self, recurse=True):       # user code that raises when asked
            raise RuntimeError("parameters() is not supported here")

    model = Odd(8, 2)
    opt = torch.optim.SGD(torch.nn.Linear.parameters(model), lr=0.1)
    with TrainingWatch() as watch:
        for _ in range(3):
            opt.zero_grad()
            model(torch.ones(2, 8)).sum().backward()
            opt.step()
    assert watch.watched == []
    assert watch.problems == ["SGD: not watched: RuntimeError: parameters() is not supported "
                              "here"]
