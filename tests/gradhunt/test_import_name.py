"""``import gradhunt`` gives the public API of diagnostics: the same names, the same objects."""
from pathlib import Path

import pytest

import diagnostics
import gradhunt
import gradhunt.integrations


def test_gradhunt_exports_exactly_the_public_api_of_diagnostics():
    assert sorted(gradhunt.__all__) == sorted(diagnostics.__all__)


def test_every_exported_name_is_the_same_object():
    for name in diagnostics.__all__:
        assert getattr(gradhunt, name) is getattr(diagnostics, name), name


def test_the_integrations_are_the_same_objects_and_their_frameworks_load_lazily():
    import subprocess
    import sys

    code = ("import sys, gradhunt.integrations as gi, diagnostics.integrations as di; "
            "assert gi.TrainingWatch is di.TrainingWatch; "
            "assert 'lightning' not in sys.modules and 'transformers' not in sys.modules; "
            "print(sorted(gi.__all__))")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[2], timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["['GradhuntCallback',", "'GradhuntTrainerCallback',",
                                  "'TrainingWatch']"]


def test_a_callback_is_the_same_object_through_either_name():
    pytest.importorskip("lightning")
    from diagnostics.integrations import lightning

    assert gradhunt.integrations.GradhuntCallback is lightning.GradhuntCallback
