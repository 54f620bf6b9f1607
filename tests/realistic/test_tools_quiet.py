"""preflight, overfit_one_batch, find_lr and check_gradients on the healthy realistic setups:
no crash, no failed verdict, no warning or error finding."""
import pytest

from .runs import cases, first_line, run_tool
from .setups import active_alarms, build


def _assert_quiet(name, tool):
    findings, failed = run_tool(build(name), tool)
    alarms = [first_line(f) for f in active_alarms(findings)]
    assert not alarms and not failed, "\n".join(alarms + failed)


@pytest.mark.parametrize("name", cases("preflight"))
def test_preflight_passes(name):
    _assert_quiet(name, "preflight")


@pytest.mark.parametrize("name", cases("overfit"))
def test_overfit_one_batch_passes(name):
    _assert_quiet(name, "overfit")


@pytest.mark.parametrize("name", cases("find_lr"))
def test_find_lr_suggests(name):
    _assert_quiet(name, "find_lr")


@pytest.mark.parametrize("name", cases("check_gradients"))
def test_check_gradients_passes(name):
    _assert_quiet(name, "check_gradients")
