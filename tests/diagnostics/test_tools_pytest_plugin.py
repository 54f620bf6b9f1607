"""The pytest plugin, run on a user's test file through pytester: passing helpers pass, failing
ones fail with the tool's report in the message; the entry point names the plugin module."""
import importlib
import tomllib
from pathlib import Path

import numpy as np

import minigrad
from diagnostics import pytest_plugin

pytest_plugins = ["pytester"]

# pytester's in-process run drops modules first imported during it; NumPy cannot be loaded
# twice, so everything the user file imports is imported here first
PRELOADED = (np, minigrad, pytest_plugin)

USER_TESTS = """
import numpy as np
import minigrad
from diagnostics.pytest_plugin import assert_can_overfit

nn = minigrad.nn


def batch():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 8)).astype(np.float32)
    return x, np.argmax(x @ rng.standard_normal((8, 3)), axis=1)


def model(outputs=3):
    minigrad.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, outputs))


def test_overfit_passes():
    x, y = batch()
    result = assert_can_overfit(model(), nn.CrossEntropyLoss(), x, y)
    assert result.passed


def test_overfit_fails_on_broadcasting_targets():
    x, y = batch()
    assert_can_overfit(model(outputs=1), nn.MSELoss(), x, y.astype(np.float32), steps=50)


def test_gradients_pass_through_the_fixture(gradhunt):
    x, y = batch()
    gradhunt.assert_gradients_ok(model(), nn.CrossEntropyLoss(), x[:4], y[:4])


class WrongTanh(minigrad.Function):
    @staticmethod
    def forward(ctx, x):
        out = np.tanh(x)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1 - out)  # should be 1 - out**2


class WrongTanhModule(nn.Module):
    def forward(self, x):
        return WrongTanh.apply(x)


def test_gradients_fail_on_a_wrong_backward(gradhunt):
    x, y = batch()
    minigrad.manual_seed(0)
    broken = nn.Sequential(nn.Linear(8, 16), WrongTanhModule(), nn.Linear(16, 3))
    gradhunt.assert_gradients_ok(broken, nn.CrossEntropyLoss(), x[:4], y[:4])


def test_preflight_fails_on_float_labels(gradhunt):
    x, y = batch()
    gradhunt.assert_preflight_clean(model(), nn.CrossEntropyLoss(), x, y.astype(np.float32))
"""


def test_helpers_pass_and_fail_with_the_report_in_the_message(pytester):
    pytester.makepyfile(test_user=USER_TESTS)
    # the plugin comes in by name; "no:gradhunt" keeps the installed entry point from loading
    # it a second time
    result = pytester.runpytest("-p", "no:gradhunt", "-p", "diagnostics.pytest_plugin")
    result.assert_outcomes(passed=2, failed=3)
    result.stdout.fnmatch_lines([
        "*test_overfit_fails_on_broadcasting_targets*",
        "E * AssertionError: the model cannot overfit one batch",
        "E * overfit one batch: FAILED after 50 steps*",
        "*OVERFIT_FAILED*output shape (16, 1) and target shape (16,) differ*",
    ])
    result.stdout.fnmatch_lines(["E * AssertionError: gradients disagree with finite differences",
                                 "*Gradient check FAILED*WrongTanhModule*"])
    result.stdout.fnmatch_lines(["E * AssertionError: preflight checklist failed",
                                 "*FAIL  label dtype*", "*LABEL_DTYPE*"])
    # the failures point at the user's line, not at the plugin's internals
    assert "pytest_plugin.py" not in result.stdout.str()


def test_pyproject_registers_the_plugin_module_as_a_pytest11_entry_point():
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    entry_points = tomllib.loads(pyproject.read_text())["project"]["entry-points"]["pytest11"]
    module = importlib.import_module(entry_points["gradhunt"])
    assert module is pytest_plugin
    for name in ("assert_gradients_ok", "assert_can_overfit", "assert_preflight_clean",
                 "gradhunt"):
        assert callable(getattr(module, name))
