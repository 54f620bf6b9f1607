"""``FindingLog``: the findings a Monitor holds, each from the step it was first seen to the
step it stopped holding.

A finding is resolved only on evidence: a check that produced it ran again, on its own
look-back, and did not find it, at ``quiet_runs`` distinct steps in a row (one quiet run is
not enough: a loss level or a gradient norm near a threshold would make findings flap). A
condition that comes back after it was resolved is a new finding; the resolved one stays in
the history.
"""
from dataclasses import replace

from ..causes import order_by_cause
from ..findings import SEVERITIES

QUIET_RUNS = 3   # distinct steps at which the finding's checks ran without finding it


class FindingLog:

    def __init__(self, *, quiet_runs=QUIET_RUNS):
        self.quiet_runs = quiet_runs
        self._active = {}     # (code, location) -> Finding
        self._sources = {}    # (code, location) -> the checks that found it
        self._quiet = {}      # (code, location) -> steps its checks ran without finding it
        self._resolved = []   # resolved findings, in the order they were resolved

    @property
    def active(self):
        """The findings that hold, errors first, then in the order they were found; each
        root cause before its consequences (``diagnostics.causes``)."""
        rank = {severity: i for i, severity in enumerate(reversed(SEVERITIES))}
        return order_by_cause(sorted(self._active.values(), key=lambda f: rank[f.severity]))

    @property
    def resolved(self):
        return list(self._resolved)

    def record(self, finding, *, key, step):
        """Hold ``finding`` under ``key`` from ``step`` on, with no check behind it (it is
        never resolved); False if one is held under ``key`` already."""
        if key in self._active:
            return False
        self._active[key] = replace(finding, first_step=step, last_step=step)
        self._sources[key] = set()
        return True

    def update(self, step, results):
        """Fold in ``[(check, findings)]`` from the checks that ran at ``step``; returns the
        transitions: new findings (or ones whose severity rose) and resolved ones, in order."""
        rank = {severity: i for i, severity in enumerate(SEVERITIES)}
        transitions, found_now = [], set()
        for check, findings in results:
            for finding in findings:
                key = (finding.code, finding.location)
                found_now.add(key)
                self._sources.setdefault(key, set()).add(check)
                self._quiet.pop(key, None)
                known = self._active.get(key)
                if known is None:
                    self._active[key] = replace(finding, first_step=step, last_step=step)
                    transitions.append(self._active[key])
                elif rank[finding.severity] > rank[known.severity]:
                    self._active[key] = replace(finding, first_step=known.first_step,
                                                last_step=step)
                    transitions.append(self._active[key])
                elif known.last_step < step:   # (a report made inside a step, by
                    self._active[key] = replace(known, last_step=step)   # the guard, is later)
        ran = {check for check, _ in results}
        for key in list(self._active):
            if key in found_now or not self._sources[key] & ran:
                continue
            quiet = self._quiet.setdefault(key, [])
            if step not in quiet:
                quiet.append(step)
            if len(quiet) >= self.quiet_runs:
                finding = replace(self._active.pop(key), resolved_at=quiet[0])
                del self._quiet[key], self._sources[key]
                self._resolved.append(finding)
                transitions.append(finding)
        return transitions
