"""call_sites: whether the caller's source writes an argument, read at the exact call."""
import importlib.util
import itertools
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics.monitor import call_sites
from diagnostics.monitor.call_sites import argument_written, caller

_modules = itertools.count()


def flag(*args, **kwargs):
    """Stands for ``F.dropout(input, p, training, inplace)``: what did the caller write?"""
    return argument_written(sys._getframe(1), "flag", "training", 2)


def by_line(*args, **kwargs):
    """``flag`` as read on Python 3.10, which has no column positions: by line and name."""
    frame = sys._getframe(1)
    return call_sites._written(frame.f_code, frame.f_lineno, "by_line", "training", 2)


def _run(source, tmp_path):
    """Run ``source`` (which sets ``result``) as a module in a file: its ``result``."""
    path = tmp_path / f"call_site_{next(_modules)}.py"
    path.write_text("from tests.diagnostics.test_call_sites import by_line, flag\n" + source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.result


@settings(max_examples=40, deadline=None)
@given(positional=st.integers(0, 4),
       keywords=st.lists(st.sampled_from(["p", "training", "inplace"]), unique=True),
       lines=st.booleans(), nested=st.booleans())
def test_a_written_argument_is_read_at_the_exact_call(tmp_path_factory, positional, keywords,
                                                      lines, nested):
    arguments = [str(i) for i in range(positional)] + [f"{k}=1" for k in keywords]
    separator = ",\n    " if lines else ", "
    call = f"flag({separator.join(arguments)})"
    if nested:     # another call on the same line, which does write training=
        call = f"[{call}, flag(0, training=1)][0]"
    found = _run(f"result = {call}\n", tmp_path_factory.mktemp("sites"))
    assert found == (positional > 2 or "training" in keywords)


def test_unpacked_arguments_and_missing_source_cannot_be_read(tmp_path):
    assert _run("result = flag(*[0, 1, 2])\n", tmp_path) is None
    assert _run("result = flag(0, **{'training': 1})\n", tmp_path) is None
    scope = {"flag": flag}
    exec("result = flag(0, 1, training=1)", scope)      # no file holds this source
    assert scope["result"] is None


def test_the_caller_is_the_first_frame_above_the_dispatch():
    def handler():        # as __torch_function__: asks who called
        return caller(skip_code=dispatch.__code__)

    def dispatch():       # as F.dropout, which hands its call to the handler
        return handler()

    def user():
        return dispatch()
    assert user().f_code is user.__code__


def test_without_column_positions_the_one_call_on_its_line_is_read(tmp_path):
    assert _run("result = by_line(0, 1)\n", tmp_path) is False
    assert _run("result = by_line(0,\n    1,\n    training=1)\n", tmp_path) is True
    assert _run("result = [by_line(0, 1, 2), flag(0)][0]\n", tmp_path) is True
    assert _run("result = by_line(0, 1) or by_line(0, training=1)\n", tmp_path) is None
