"""After ``Monitor.close()`` nothing of the Monitor remains: no module, tensor, optimizer or
global hook, no patched function."""
import pytest

from .runs import cases, monitored_run


@pytest.mark.parametrize("name", cases("hooks"))
def test_no_hook_left_after_close(name):
    run = monitored_run(name)
    left = {k: v for k, v in run.hooks_after.items() if run.hooks_before.get(k) != v}
    gone = {k: v for k, v in run.hooks_before.items() if k not in run.hooks_after}
    assert not left and not gone, f"left behind: {left}; removed: {gone}"
    assert not run.output_hooks, f"tensor hooks on the outputs after close: {run.output_hooks}"
