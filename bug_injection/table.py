"""The hunt's table: one row per run, bugs then healthy controls, and the score line."""

HEADERS = ("bug", "backend", "findings", "culprit found", "expected", "verdict")


def render(result):
    """The table of a ``HuntResult`` as text."""
    rows = [_row(o) for o in result.bugs]
    control_rows = [_row(o) for o in result.controls]
    widths = [max(len(str(r[i])) for r in [HEADERS, *rows, *control_rows])
              for i in range(len(HEADERS))]
    lines = [_line(HEADERS, widths), _line(["-" * w for w in widths], widths)]
    lines += [_line(r, widths) for r in rows]
    if control_rows:
        lines.append(_line(["-" * w for w in widths], widths))
        lines += [_line(r, widths) for r in control_rows]
    problems = [o for o in result.outcomes if not o.ok and o.message]
    if problems:
        lines.append("")
        lines += [f"{o.verdict.upper()}: {o.name} on {o.backend}: {o.message}" for o in problems]
    lines += ["", result.score()]
    return "\n".join(lines)


def _row(outcome):
    verdict = outcome.verdict.upper() if not outcome.ok else outcome.verdict
    return (outcome.name, outcome.backend, _findings(outcome), outcome.found, outcome.expected,
            verdict)


def _findings(outcome):
    """The deciding code first, then how many other warning/error codes came with it."""
    if not outcome.codes:
        return "-"
    first = outcome.code or outcome.codes[0]
    others = len([c for c in outcome.codes if c != first])
    return f"{first} +{others}" if others else first


def _line(cells, widths):
    return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
