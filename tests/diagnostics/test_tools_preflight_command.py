"""``gradhunt preflight FILE:factory`` finds the factory without running the file's training: a
missing factory is reported from the file's syntax before anything in it runs, and the file is
imported as a module, so its ``if __name__ == "__main__":`` block does not run."""
import textwrap

import pytest

from diagnostics.errors import DiagnosticsError
from diagnostics.tools.preflight.command import load_factory
from scenarios.cli import main

SCRIPT = """
from pathlib import Path
import numpy as np
import minigrad

HERE = Path(__file__).parent
(HERE / "imported.txt").write_text("module level ran")     # runs on import, by design

def factory():
    minigrad.manual_seed(0)
    model = minigrad.nn.Sequential(minigrad.nn.Linear(4, 8), minigrad.nn.ReLU(),
                                   minigrad.nn.Linear(8, 3))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    return model, minigrad.nn.CrossEntropyLoss(), (x, np.argmax(x[:, :3], 1))

if __name__ == "__main__":           # the file's own training: never run by gradhunt
    (HERE / "trained.txt").write_text("the training ran")
    raise SystemExit("a full training would run here")
"""


def _script(tmp_path, text=SCRIPT):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_missing_factory_is_reported_before_the_file_runs(tmp_path, capsys):
    path = _script(tmp_path)
    assert main(["preflight", f"{path}:make_model"]) == 2
    error = capsys.readouterr().err
    assert "FACTORY: expected a function named 'make_model' defined at module level" in error
    assert "it defines HERE, Path, factory, minigrad, np" in error
    assert not (tmp_path / "imported.txt").exists()     # nothing in the file ran
    assert not (tmp_path / "trained.txt").exists()


def test_the_main_block_does_not_run_and_the_factory_is_used(tmp_path):
    path = _script(tmp_path)
    arguments = load_factory(f"{path}:factory")
    assert set(arguments) == {"model", "loss_fn", "inputs", "targets"}
    assert (tmp_path / "imported.txt").exists()
    assert not (tmp_path / "trained.txt").exists()


def test_a_factory_defined_only_under_the_main_guard_is_missing(tmp_path):
    path = _script(tmp_path, SCRIPT.replace("def factory():", "def helper():").replace(
        'if __name__ == "__main__":', 'if __name__ == "__main__":\n    def factory(): pass\n'))
    with pytest.raises(DiagnosticsError, match="none by that name; it defines HERE, Path, "
                                               "helper, minigrad, np"):
        load_factory(str(path))
    assert not (tmp_path / "imported.txt").exists()


@pytest.mark.parametrize("definition", [
    "factory = lambda: None",
    "from os.path import join as factory",
    "try:\n    def factory(): pass\nexcept ImportError:\n    pass",
    "if True:\n    factory = print",
    "class factory: pass",
])
def test_module_level_bindings_of_every_kind_count_as_defined(tmp_path, definition):
    path = tmp_path / "made.py"
    path.write_text(definition + "\n")
    with pytest.raises(DiagnosticsError) as raised:     # found, then the call's result judged
        load_factory(str(path))
    assert "none by that name" not in str(raised.value)


def test_a_star_import_leaves_the_decision_to_the_import(tmp_path):
    path = tmp_path / "starred.py"
    path.write_text("from math import *\n")
    with pytest.raises(DiagnosticsError, match="nothing callable by that name"):
        load_factory(f"{path}:factory")


def test_a_file_that_does_not_parse_or_raises_on_import_is_a_diagnostics_error(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def factory(:\n")
    with pytest.raises(DiagnosticsError, match="SyntaxError at line 1"):
        load_factory(str(broken))
    raising = tmp_path / "raising.py"
    raising.write_text("def factory(): pass\nraise RuntimeError('no data here')\n")
    with pytest.raises(DiagnosticsError, match="raised RuntimeError: no data here"):
        load_factory(str(raising))
