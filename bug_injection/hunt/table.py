"""The hunt's table, one renderer for both corpora: the header, each section of rows under a
rule, a line per run that needs a look, and the score line.

A result renders when it has ``headers``, ``sections()`` (lists of rows), ``notes()`` and
``score()``: ``planted.HuntResult`` and ``real_world.hunt.RealWorldResult`` do.
"""
from typing import Protocol


class Table(Protocol):
    headers: tuple[str, ...]

    def sections(self) -> list[list[tuple]]: ...

    def notes(self) -> list[str]: ...

    def score(self) -> str: ...


def render(result: Table) -> str:
    """The table of ``result`` as text."""
    sections = result.sections()
    rows = [row for section in sections for row in section]
    widths = [max(len(str(r[i])) for r in [result.headers, *rows])
              for i in range(len(result.headers))]

    def line(cells):
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    rule = line(["-" * w for w in widths])
    lines = [line(result.headers)]
    for section in sections:
        lines += [rule, *(line(r) for r in section)]
    notes = result.notes()
    if notes:
        lines += ["", *notes]
    lines += ["", result.score()]
    return "\n".join(lines)
