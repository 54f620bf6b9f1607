"""Monitor(every=1) takes the weights' sample before a step from the comparison of the step
before (``probes/updates.py``): the update sizes stay exact, also when a weight is written
between the forward pass and the backward pass, in place or by a new storage."""
import pytest
import torch

from diagnostics import Monitor

LAYERS = ("0.weight", "2.weight")   # 60,000 entries (measured on a sample) and 1,200


def _net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(200, 300), torch.nn.Tanh(),
                               torch.nn.Linear(300, 4))


def _train(edit=None, steps=6):
    """Train with Monitor(every=1); ``edit(model, step)`` runs between forward and backward.
    Per step: |Δw| / |w| of each weight in ``LAYERS`` on the entries the Monitor samples,
    computed here; the Monitor's; and how many weight samples were copied at first gradients."""
    model = _net()
    weights = dict(model.named_parameters())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    generator = torch.Generator().manual_seed(1)
    exact, copies, made = [], [], []
    with Monitor(model, optimizer, every=1) as monitor:
        kernels = monitor._kernels
        sample = kernels.weight_sample
        original = kernels.weight_samples

        def counting(params, *, into=None):
            made.append(len(params))
            return original(params, into=into)
        kernels.weight_samples = counting
        for step in range(steps):
            optimizer.zero_grad()
            loss = model(torch.randn(32, 200, generator=generator)).pow(2).mean()
            if edit is not None:
                edit(model, step)
            before = {name: sample(weights[name]).double() for name in LAYERS}
            loss.backward()
            optimizer.step()
            exact.append({name: float((sample(weights[name]).double() - before[name]).norm()
                                      / sample(weights[name]).double().norm())
                          for name in LAYERS})
            monitor.step(loss)
            copies.append(sum(made))
            made.clear()
        model(torch.randn(2, 200))     # the last step's update is measured at the next call
        last = {p.name: p.update_ratio for p in monitor.report().parameters}
        measured = [{name: monitor.history.column(f"update/{name}/ratio")[step]
                     for name in LAYERS} for step in range(1, steps)] + [last]
    return exact, measured, copies


def _assert_same(exact, measured):
    for step, (want, got) in enumerate(zip(exact, measured)):
        for name in LAYERS:
            assert got[name] == pytest.approx(want[name], rel=1e-5), (step, name)


def test_every_1_measures_each_update_exactly_and_copies_the_weights_once():
    exact, measured, copies = _train()
    _assert_same(exact, measured)
    assert copies == [4] + [0] * 5     # four parameters at the first step, none after


@pytest.mark.parametrize("how", ["in place", "new storage"])
def test_a_weight_written_between_forward_and_backward_is_copied_again(how):
    def edit(model, step):
        if step == 3:
            with torch.no_grad():     # the first layer's weight: backward does not read it
                if how == "in place":
                    model[0].weight.mul_(1.5)
                else:
                    model[0].weight.data = model[0].weight.data * 1.5
    exact, measured, copies = _train(edit)
    _assert_same(exact, measured)
    assert copies == [4, 0, 0, 1, 0, 0]
