"""The text of a ``GradientReport``: a headline, each culprit, then a table of parameters."""

MAX_ROWS = 12   # parameter rows shown; faulty ones always are
NEAR_ZERO_REL = 1e-2   # an "ok" this far off in relative terms passed on the absolute error

_PATHS = {"input": "input path", "internal": "own code between its sub-modules"}


def render(report):
    lines = [headline(report), _subline(report)]
    for cause in report.causes:
        lines += [""] + _cause_lines(cause, report.points)
    lines += [""] + _table(report)
    lines += [f"note: {note}" for note in report.notes + _near_zero_notes(report)]
    return "\n".join(lines)


def _near_zero(check):
    return check.status == "ok" and check.max_rel_error > NEAR_ZERO_REL


def _near_zero_notes(report):
    """Why an "ok" sits next to a large relative error: both gradients are about zero."""
    near = [c for c in report.parameters.values() if _near_zero(c)]
    if not near:
        return []
    shown = ", ".join(f"{c.name} (|numerical - analytical| {_absolute(c)})" for c in near)
    return [f"gradient ~0 at {shown}: a relative error means nothing there, the absolute "
            f"error is within atol (a bias before a normalisation has a true gradient of 0)"]


def _absolute(check):
    if check.numerical is None or check.analytical is None:
        return "n/a"
    return f"{abs(check.numerical - check.analytical):.1e}"


def headline(report):
    if report.passed:
        skipped = sum(c.status == "not differentiated" for c in report.parameters.values())
        aside = (f" ({skipped} parameter(s) not differentiated by design: no_grad/detach in "
                 f"forward)" if skipped else "")
        return (f"Gradient check passed: {len(report.parameters) - skipped} parameter gradients "
                f"and {len(report.points)} gradients at module boundaries agree with finite "
                f"differences{aside}.")
    if not report.causes:
        return (f"Gradient check FAILED: {len(report.faulty)} parameter gradient(s) disagree "
                f"with finite differences; where they go wrong could not be pinned down.")
    if len(report.causes) == 1:
        return f"Gradient check FAILED: the gradient goes wrong in {_place(report.causes[0])}."
    places = "; ".join(_place(c) for c in report.causes)
    return f"Gradient check FAILED in {len(report.causes)} places: {places}."


def _subline(report):
    passes = "pass" if report.backward_passes == 1 else "passes"
    return (f"{report.backend} model, checked on a float64 copy in mode {report.mode!r}: "
            f"{report.forward_evaluations} forward evaluations, {report.backward_passes} "
            f"backward {passes}.")


def _place(cause):
    if cause.module == "loss":
        return "the loss (its backward)"
    return f"{cause.where}, {_PATHS.get(cause.path, cause.path + ' path')}"


def _cause_lines(cause, points):
    check = cause.check
    rows = [("culprit", _place(cause))]
    if cause.pattern is not None:
        rows.append(("pattern", str(cause.pattern)))
    trail = _trail(check, points)
    if trail:
        rows.append(("backward", trail))
    evidence = f"wrong at {check.name}"
    if cause.module == "loss":
        evidence += ", the first gradient of the backward pass"
    if cause.right:
        evidence += f", right at {cause.right}"
    rows.append(("evidence", evidence))
    if check.worst_index is not None:
        rows.append(("", f"worst element {list(check.worst_index)} of {check.name} "
                         f"{check.shape}: numerical {_sci(check.numerical)}, analytical "
                         f"{_sci(check.analytical)}"))
        rows.append(("", f"{check.elements_mismatched} of {check.elements_checked} elements "
                         f"checked disagree; max relative error {check.max_rel_error:.3g}"))
    if cause.affected:
        rows.append(("affects", f"{', '.join(cause.affected)} (wrong only as a consequence)"))
    if cause.pattern is not None:
        rows.append(("look for", cause.pattern.hint))
    width = max(len(label) for label, _ in rows) + 2
    return [f"{label:<{width}}{text}" for label, text in rows]


def _trail(check, points, *, before=3, after=2):
    """The gradients at module boundaries around a wrong point, in backward order."""
    names = [p.name for p in points]
    if check.name not in names:
        return ""
    at = names.index(check.name)
    shown = points[max(at - after, 0):at + before + 1][::-1]
    steps = [f"{p.name} {'WRONG' if p.status == 'mismatch' else p.status}" for p in shown]
    head = "... > " if at + before + 1 < len(points) else ""
    tail = " > ..." if at - after > 0 else ""
    return head + " > ".join(steps) + tail


def _table(report):
    checks = list(report.parameters.values())
    faulty = [c for c in checks if c.status == "mismatch"]
    others = [c for c in checks if c.status != "mismatch"]
    shown_others = others[:max(MAX_ROWS - len(faulty), 0)]
    shown = [c for c in checks if c in faulty or c in shown_others]
    header = ("parameter", "shape", "gradient", "max rel err", "checked", "worst element",
              "numerical", "analytical")
    rows = [header] + [_row(c) for c in shown]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    right = {3, 6, 7}
    lines = []
    for row in rows:
        cells = [cell.rjust(w) if i in right else cell.ljust(w)
                 for i, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
    hidden = len(others) - len(shown_others)
    if hidden:
        lines.append(f"... and {hidden} more parameters, "
                     f"{'all ok' if all(c.status == 'ok' for c in others) else 'see .parameters'}")
    return lines


def _row(check):
    status = {"ok": "ok", "mismatch": "WRONG", "unchecked": "unchecked",
              "not differentiated": "no graph path"}[check.status]
    if check.status == "not differentiated":
        checked = "none (no_grad/detach)"
    elif check.elements_checked and check.elements_checked == check.size:
        checked = f"all {check.size} elements"
    elif check.elements_checked:
        checked = f"{check.elements_checked} of {check.size} elements"
    elif check.directions:
        checked = f"{check.directions} direction{'' if check.directions == 1 else 's'}"
    else:
        checked = "none (kinks)"
    worst = numerical = analytical = ""
    if _near_zero(check):
        status = "ok (gradient ~0)"
        numerical, analytical = _sci(check.numerical), _sci(check.analytical)
    if check.status == "mismatch":
        if check.worst_index is not None:
            worst = str(list(check.worst_index))
        numerical, analytical = _sci(check.numerical), _sci(check.analytical)
    error = "-" if check.status == "not differentiated" else f"{check.max_rel_error:.1e}"
    return (check.name, str(check.shape), status, error, checked, worst,
            numerical, analytical)


def _sci(value):
    return "n/a" if value is None else f"{value:.4e}"
