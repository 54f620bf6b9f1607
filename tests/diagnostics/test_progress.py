"""Progress bars: drawn where someone watches a terminal, quiet in pipes, tests and CI."""
import io

import pytest

from diagnostics.progress import progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("stream, show, drawn", [
    (Terminal(), "auto", True), (io.StringIO(), "auto", False),
    (io.StringIO(), True, True), (Terminal(), False, False)])
def test_the_bar_is_drawn_only_where_asked(monkeypatch, stream, show, drawn):
    monkeypatch.setattr("sys.stderr", stream)
    with progress_bar(3, desc="work", show=show, delay=0, mininterval=0) as bar:
        for _ in range(3):
            bar.update()
    assert ("work:" in stream.getvalue() and "3/3" in stream.getvalue()) is drawn


def test_auto_waits_for_long_work_before_drawing(monkeypatch):
    stream = Terminal()
    monkeypatch.setattr("sys.stderr", stream)
    with progress_bar(3, desc="work") as bar:       # default delay: two seconds
        bar.update(3)
    assert stream.getvalue() == ""
