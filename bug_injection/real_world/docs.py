"""The "Seen in the wild" section of docs/findings.md, written from the corpus, so that the
docs cite exactly the sources and statuses the corpus records (a test compares them)."""
from .corpus import corpus

HEADING = "## Seen in the wild"


def seen_in_the_wild():
    """The section as Markdown: per finding code, the corpus entries it names, their sources
    and statuses; then the entries that no code names yet."""
    by_code, unnamed = {}, []
    for entry in corpus():
        for code in entry.codes:
            by_code.setdefault(code, []).append(entry)
        if not entry.codes:
            unnamed.append(entry)
    lines = [HEADING, "",
             "The real-world corpus (`bug_injection/real_world/`, run by `gradhunt hunt` and "
             "`gradhunt inject NAME`)",
             "holds silent training bugs taken from public issue trackers and forums, each "
             "reproduced on torch",
             "(and on minigrad where minigrad has the layers and the tool runs on it) with its "
             "fixed twin.",
             "The codes that name them, with the corpus entry, its source and its current "
             "status on each",
             "backend (what gradhunt says today about the buggy version):", "",
             "| Code | Corpus entries: source (status) |", "|---|---|"]
    for code in sorted(by_code):
        cell = "; ".join(f"`{e.name}`: {e.source} ({_verdicts(e)})" for e in by_code[code])
        lines.append(f"| **{code}** | {cell} |")
    lines += ["", "Entries no code names yet (the checks they need; see each entry's "
                  "`status`):", ""]
    lines += [f"- `{e.name}` ({e.category}): {e.source}. Today: {_statuses(e)}"
              for e in unnamed]
    return "\n".join(lines) + "\n"


def _verdicts(entry):
    """``diagnosed on torch and minigrad``, or per backend when they differ."""
    verdicts = {backend: entry.verdict(backend) for backend in entry.backends}
    if len(set(verdicts.values())) == 1:
        return f"{verdicts['torch']} on {' and '.join(entry.backends)}"
    return ", ".join(f"{backend}: {verdict}" for backend, verdict in verdicts.items())


def _statuses(entry):
    if not isinstance(entry.status, dict):
        return f"{entry.status} (on {' and '.join(entry.backends)})"
    return "; ".join(f"{backend}: {entry.status_on(backend)}" for backend in entry.backends)
