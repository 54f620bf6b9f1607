"""The inventory of false alarms: every diagnostic on every healthy realistic setup.

``python -m tests.realistic.inventory [SETUP ...]`` prints, per setup and tool, each warning or
error finding (code, severity, the message's first line), a tool's failed verdict, or the
exception it raised; info findings are listed with ``--info``. Every line is a false alarm or a
crash: the setups are healthy.
"""
import argparse
import time

from .runs import TOOLS, first_line, monitored_run, plain_run, run_tool
from .setups import SETUPS, active_alarms, build

try:
    import torch
except ImportError:
    torch = None


def inventory(name, *, info=False):
    """``[(tool, line)]`` for one setup; tool is "monitor", "identical", "hooks" or a tool."""
    rows = []
    try:
        run = monitored_run(name)
    except Exception as error:  # the Monitor crashed on the user's loop
        rows.append(("monitor", f"CRASH {type(error).__name__}: {error}"))
    else:
        rows += [("monitor", first_line(f)) for f in _shown(run.findings, info)]
        if run.unseen:
            rows.append(("sees", f"layers without statistics: {', '.join(run.unseen)}"))
        if run.classes != build(name).classes:
            rows.append(("sees", f"the loss checks read {run.classes} classes; the logits "
                                 f"have {build(name).classes}"))
        losses, state, _ = plain_run(name)
        if losses != run.losses or any((state[k] != run.state[k]).any() for k in state):
            rows.append(("identical", "training differs with the Monitor attached"))
        left = {k: v for k, v in run.hooks_after.items() if run.hooks_before.get(k) != v}
        rows += [("hooks", f"left behind: {k} = {v}") for k, v in left.items()]
        rows += [("hooks", f"left behind: {line}") for line in run.output_hooks]
    for tool in TOOLS:
        try:
            findings, failed = run_tool(build(name), tool)
        except Exception as error:
            rows.append((tool, f"CRASH {type(error).__name__}: {str(error).splitlines()[0]}"))
            continue
        rows += [(tool, first_line(f)) for f in _shown(findings, info)]
        rows += [(tool, line) for line in failed]
    return rows


def _shown(findings, info):
    return findings if info else active_alarms(findings)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("setups", nargs="*", help="setup names (default: all)")
    parser.add_argument("--info", action="store_true", help="list info findings too")
    parser.add_argument("--table", action="store_true",
                        help="print KNOWN_FALSE_ALARMS entries for setups.py instead")
    args = parser.parse_args(argv)
    if torch is not None:
        torch.set_num_threads(1)
    names = args.setups or list(SETUPS)
    if args.table:
        for name in names:
            for assertion, reason in known_false_alarms(inventory(name)).items():
                quoted = "\n         ".join(repr(part) for part in _chunks(reason, 80))
                print(f"    ({name!r}, {assertion!r}):\n        ({quoted}),")
        return
    pairs, lines, total, cpu_total = 0, 0, time.perf_counter(), time.process_time()
    print(f"{'setup':<28} | {'tool':<15} | current false alarm / crash")
    for name in names:
        start, cpu = time.perf_counter(), time.process_time()
        rows = inventory(name, info=args.info)
        pairs += len(known_false_alarms(rows))
        lines += len(rows)
        for tool, line in rows or [("-", "quiet")]:
            print(f"{name:<28} | {tool:<15} | {line}")
        print(f"{name:<28} | {'(time)':<15} | {time.perf_counter() - start:.2f} s wall, "
              f"{time.process_time() - cpu:.2f} s CPU", flush=True)
    print(f"{len(names)} setups: {pairs} (setup, check) pairs with a false alarm or crash, "
          f"{lines} lines, in {time.perf_counter() - total:.1f} s wall, "
          f"{time.process_time() - cpu_total:.1f} s CPU")


def _chunks(text, width):
    """``text`` cut after spaces into pieces of about ``width`` characters (joined, the same)."""
    pieces, current = [], ""
    for word in text.split(" "):
        if current and len(current) + len(word) > width:
            pieces.append(current)
            current = ""
        current += word + " "
    pieces.append(current[:-1])
    return pieces


def known_false_alarms(rows):
    """``{assertion: reason}``: the first line quoted, then the codes of the others."""
    grouped = {}
    for assertion, line in rows:
        if " [info] " not in line:
            grouped.setdefault(assertion, []).append(line)
    return {assertion: lines[0] + _also(lines[1:]) for assertion, lines in grouped.items()}


def _also(lines):
    """The codes of the other lines: `` (also: LOSS_AT_CHANCE x2)``."""
    counts = {}
    for line in lines:
        word = line.split(" ")[0]
        word = word if word.isupper() else "failed verdict"
        counts[word] = counts.get(word, 0) + 1
    named = [word + (f" x{n}" if n > 1 else "") for word, n in counts.items()]
    return f" (also: {', '.join(named)})" if named else ""


if __name__ == "__main__":
    main()
