"""A plain ReLU right after a measured output takes its unit extremes from that measurement
(``probes/activations.py``): the records are the ones measured on the ReLU's own output, and
anything that writes the tensor in between makes the ReLU measure itself."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import Monitor


class _Negate(torch.nn.Module):
    def forward(self, x):
        return -x


def _records(model, x):
    """The activation records of one sampled step, and how many outputs were measured
    without their extremes."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=1) as monitor:
        kernels, derived = monitor._kernels, []
        original = kernels.activation_statistics

        def counting(tensor, **options):
            derived.append(options.get("extremes", True) is False)
            return original(tensor, **options)
        kernels.activation_statistics = counting
        loss = model(x).square().mean()
        loss.backward()
        optimizer.step()
        monitor.step(loss)
        return monitor._samples[-1].activations, sum(derived)


def _expected(model, x):
    """Each layer's output per unit, measured directly with forward hooks of our own."""
    outputs = {}
    handles = [module.register_forward_hook(
        lambda m, a, out, name=name: outputs.__setitem__(name, out.detach().clone()))
        for name, module in model.named_children()]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return outputs


@settings(max_examples=25, deadline=None)
@given(inplace=st.lists(st.booleans(), min_size=1, max_size=3), seed=st.integers(0, 99),
       channels=st.booleans())
def test_derived_relu_extremes_equal_the_measured_ones(inplace, seed, channels):
    torch.manual_seed(seed)
    layers = []
    for flag in inplace:
        layers += [torch.nn.Conv2d(3, 3, 1) if channels else torch.nn.Linear(3, 3),
                   torch.nn.ReLU(inplace=flag)]
    model = torch.nn.Sequential(*layers)
    x = torch.randn(5, 3, 4, 2) if channels else torch.randn(5, 3)
    expected = _expected(model, x)    # before the Monitor's step moves the weights
    records, derived = _records(model, x)
    assert derived == len(inplace)
    for name, out in expected.items():
        if name in records and isinstance(model.get_submodule(name), torch.nn.ReLU):
            per_unit = out.transpose(0, 1).reshape(out.shape[1], -1)
            np.testing.assert_array_equal(records[name].unit_max, per_unit.amax(1).numpy())
            np.testing.assert_array_equal(records[name].unit_min, per_unit.amin(1).numpy())


def test_a_relu_whose_input_was_written_after_it_was_measured_measures_itself():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU())

    def negate_in_place(module, args):
        args[0].mul_(-1)
    handle = model[1].register_forward_pre_hook(negate_in_place)
    try:
        x = torch.randn(8, 4)
        expected = torch.relu(-model[0](x)).detach()
        records, derived = _records(model, x)
    finally:
        handle.remove()
    assert derived == 0
    np.testing.assert_array_equal(records["1"].unit_max, expected.amax(0).numpy())


@pytest.mark.parametrize("between", [_Negate, torch.nn.Identity])
def test_a_relu_after_another_module_uses_that_module_s_measurement_or_its_own(between):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), between(), torch.nn.ReLU())
    x = torch.randn(8, 4)
    expected = torch.relu(model[1](model[0](x))).detach()
    records, derived = _records(model, x)
    np.testing.assert_array_equal(records["2"].unit_max, expected.amax(0).numpy())
    np.testing.assert_array_equal(records["2"].unit_min, expected.amin(0).numpy())
    # Identity is not watched (it passes values through): the ReLU follows the Linear's
    assert derived == 1
