"""The docs cover every finding code."""
import re
from pathlib import Path

import pytest

from diagnostics.findings import CODES

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def findings_doc():
    return (DOCS / "findings.md").read_text()


def test_every_code_has_a_row_in_the_table(findings_doc):
    rows = re.findall(r"^\| `([A-Z_]+)` \|(.*)\|\s*$", findings_doc, flags=re.MULTILINE)
    assert sorted(code for code, _ in rows) == sorted(CODES)
    for code, rest in rows:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", rest)]
        assert len(cells) == 4 and all(cells), f"{code}: expected symptom, cause, fix, detection"


def test_every_code_has_a_section_with_a_real_example(findings_doc):
    sections = re.split(r"^### ", findings_doc, flags=re.MULTILINE)[1:]
    assert [s.split("\n", 1)[0] for s in sections] == list(CODES)
    for code, section in zip(CODES, sections):
        example = re.search(r"```\n(\[(?:info|warning|error)\] ([A-Z_]+).*?)```", section, re.S)
        assert example and example.group(2) == code, f"{code}: no example report"


def test_the_checklist_and_the_prompt_name_only_known_codes():
    for name in ("skill-debug-checklist.md", "prompt-nn-debugger.md"):
        text = (DOCS / name).read_text()
        named = set(re.findall(r"\b[A-Z]+(?:_[A-Z]+)+\b", text))
        assert named <= set(CODES), f"{name}: unknown codes {sorted(named - set(CODES))}"
