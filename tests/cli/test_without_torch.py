"""Without torch, gradhunt still hunts on minigrad.

And the torch-only commands say what to install.
"""
import pytest

from bug_injection import cli as bug_injection_cli
from diagnostics.gradcheck import cli as gradcheck_cli
from diagnostics.integrations import watch_command
from scenarios.cli import main


@pytest.fixture
def no_torch(monkeypatch):
    for module in (bug_injection_cli, gradcheck_cli, watch_command):
        monkeypatch.setattr(module, "torch_installed", lambda: False)


def test_hunt_falls_back_to_minigrad(no_torch, capsys):
    assert main(["hunt", "--bug", "linear_sign_flip"]) == 0
    captured = capsys.readouterr()
    assert "torch is not installed" in captured.err and "minigrad only" in captured.err
    assert "linear_sign_flip" in captured.out and " torch " not in captured.out


@pytest.mark.parametrize("argv", [["compare"], ["hunt", "--backend", "torch"],
                                  ["inject", "linear_sign_flip", "--backend", "torch"],
                                  ["watch", "train.py"]])
def test_torch_only_commands_exit_2_and_say_what_to_install(no_torch, capsys, argv):
    assert main(argv) == 2
    assert "pip install 'gradhunt[torch]'" in capsys.readouterr().err
