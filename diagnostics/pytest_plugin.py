"""gradhunt's pytest plugin (entry point ``pytest11: gradhunt``): assertions for your own tests.

::

    from diagnostics.pytest_plugin import assert_can_overfit

    def test_model_can_memorise_a_batch():
        assert_can_overfit(make_model(), loss_fn, x[:16], y[:16])

    def test_gradients(gradhunt):             # or through the fixture
        gradhunt.assert_gradients_ok(make_model(), loss_fn, x[:4], y[:4])

A failing assertion's message carries the tool's whole report. Each helper returns the report
when it passes. Loading the plugin imports NumPy and the diagnostics, not torch.
"""
import pytest


def assert_gradients_ok(model, loss_fn, inputs, targets, **options):
    """Fail unless ``check_gradients`` finds the analytic gradients right (options pass through)."""
    __tracebackhide__ = True
    from .gradcheck import check_gradients

    report = check_gradients(model, loss_fn, inputs, targets, **options)
    if not report.passed:
        raise AssertionError(f"gradients disagree with finite differences\n{report}")
    return report


def assert_can_overfit(model, loss_fn, inputs, targets, **options):
    """Fail unless ``overfit_one_batch`` memorises the batch (options pass through)."""
    __tracebackhide__ = True
    from .tools import overfit_one_batch

    result = overfit_one_batch(model, loss_fn, inputs, targets, **options)
    if not result.passed:
        raise AssertionError(f"the model cannot overfit one batch\n{result}")
    return result


def assert_preflight_clean(model, loss_fn, inputs, targets, **options):
    """Fail if any ``preflight`` item FAILs (options pass through)."""
    __tracebackhide__ = True
    from .tools import preflight

    report = preflight(model, loss_fn, inputs, targets, **options)
    if not report.passed:
        raise AssertionError(f"preflight checklist failed\n{report}")
    return report


class Helpers:
    """The three assertions, as the ``gradhunt`` fixture hands them out."""

    assert_gradients_ok = staticmethod(assert_gradients_ok)
    assert_can_overfit = staticmethod(assert_can_overfit)
    assert_preflight_clean = staticmethod(assert_preflight_clean)


@pytest.fixture
def gradhunt():
    """gradhunt's assertion helpers: ``assert_gradients_ok``, ``assert_can_overfit``,
    ``assert_preflight_clean``."""
    return Helpers()
