"""preflight's printed checklist: each finding reads in full under its row, its message and its
fix wrapped and indented as the Monitor's report prints them, so that a user who only prints
the report (``gradhunt preflight``) sees what is wrong and what to try."""
import re

import torch
import torch.nn.functional as F

from diagnostics import preflight
from diagnostics.tools.preflight.report import WIDTH, CheckItem, PreflightReport
from diagnostics.findings import Finding


def _report(*, zero_grad, init_scale=8.0):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with torch.no_grad():
        model[2].weight.mul_(init_scale)             # 8: a confidently wrong output layer
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))

    def step(model, batch, optimizer):
        inputs, targets = batch
        if zero_grad:
            optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss
    return preflight(model, F.cross_entropy, x, y, train_step=step)


def _words(text):
    return " ".join(text.split())


def _block(text, finding):
    """The lines printed for ``finding``: its header, then the lines indented deeper."""
    lines = text.splitlines()
    header = f"[{finding.severity}] {finding.code} at {finding.location}"
    start = next(i for i, line in enumerate(lines) if line.strip() == header)
    indent = len(lines[start]) - len(lines[start].lstrip())
    block = [lines[start]]
    for line in lines[start + 1:]:
        if len(line) - len(line.lstrip()) <= indent:
            break
        block.append(line)
    return block


def test_each_finding_prints_its_message_and_its_fix_under_its_row():
    report = _report(zero_grad=False)
    text = str(report)
    codes = [f.code for f in report.findings]
    assert "STALE_GRADIENTS" in codes and "BAD_INIT_LOSS" in codes, text
    for finding in report.findings:
        block = _block(text, finding)
        body = _words(" ".join(block[1:]))
        assert _words(finding.message) in body, text
        assert f"try: {_words(finding.suggestion)}" in body, text
    stale = _block(text, report.item("stale gradients").findings[0])
    assert "zero_grad() is missing" in stale[1]        # the message starts on its own line
    assert text.index("FAIL  stale gradients") < text.index(stale[0])


def test_the_text_is_wrapped_to_the_width_and_no_word_is_broken():
    for report in (_report(zero_grad=False), _report(zero_grad=True, init_scale=1.0)):
        text = str(report)
        for line in text.splitlines()[1:]:
            assert len(line) <= WIDTH or " " not in line.strip(), line
        words = set(re.findall(r"\S+", " ".join(item.summary for item in report.items)))
        printed = set(re.findall(r"\S+", text))
        assert words <= printed                          # wrapped between words only


def test_the_healthy_twin_prints_rows_only():
    report = _report(zero_grad=True, init_scale=1.0)
    assert not [f for f in report.findings if f.is_alarm], str(report)
    rows = [line for line in str(report).splitlines()[1:]
            if re.match(r"  (PASS|FAIL|SKIP)  ", line)]
    assert len(rows) == len(report.items)
    assert "try:" not in str(report) and "FAIL" not in str(report)


def test_a_finding_without_a_fix_or_a_location_prints_its_message():
    finding = Finding("LOSS_PLATEAU", "error", None, "the loss did not move from 2.3 " * 8)
    text = str(PreflightReport([CheckItem("training steps", "FAIL", "loss 2.3 -> 2.3",
                                          [finding])], model="torch Net, 10 parameters"))
    lines = text.splitlines()
    assert lines[2] == "        [error] LOSS_PLATEAU"
    assert _words(" ".join(lines[3:])) == _words(finding.message)
    assert all(line.startswith(" " * 12) and len(line) <= WIDTH for line in lines[3:])
