"""The preflight runner: it stamps each row's name on its check's outcome, SKIPs a row whose
fact is unknown with the reason recorded when it went missing, quotes whose code raised, and
passes the facts an item returns on to the next; the table's names are unique."""
import dataclasses

import pytest

from diagnostics import preflight
from diagnostics.tools.preflight import table
from diagnostics.tools.preflight.facts import Fact, Facts
from diagnostics.tools.preflight.report import failed, passed
from diagnostics.tools.preflight.runner import Item

from .tools_helpers import classification_data, cross_entropy, mlp


def _run(monkeypatch, rows, **options):
    monkeypatch.setattr(table, "ITEMS", tuple(rows))
    x, y = classification_data(rows=8)
    return preflight(mlp("minigrad"), cross_entropy("minigrad"), x, y, **options)


def test_the_table_names_each_item_once():
    names = [item.name for item in table.ITEMS]
    assert len(names) == len(set(names)) and all(names)


def test_facts_are_frozen_and_remember_why_one_is_missing():
    facts = Facts().lacking({Fact.LOSS: "the loss at init is not finite"})
    assert not facts.known(Fact.LOSS) and facts.why_unknown(Fact.LOSS).endswith("not finite")
    assert facts.why_unknown(Fact.WATCHED) == "no watched"
    assert facts.found(loss=1.5).known(Fact.LOSS) and not Facts().known(Fact.LOSS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        facts.loss = 2.0


def test_the_runner_names_outcomes_and_passes_facts_on(monkeypatch):
    def learns(run):
        return passed("found the loss", facts=run.facts.found(loss=0.5))

    def reads(run):
        return passed(f"loss was {run.facts.loss}")

    report = _run(monkeypatch, [Item("first", learns), Item("second", reads, needs=(Fact.LOSS,)),
                                Item("third", reads, needs=(Fact.WATCHED,))])
    assert [(item.name, item.status) for item in report.items] == [
        ("first", "PASS"), ("second", "PASS"), ("third", "SKIP")]
    assert report.item("second").summary == "loss was 0.5"
    assert report.item("third").summary == "no watched"


def test_a_raising_check_fails_its_row_quoting_whose_code_and_its_facts_stay_unknown(
        monkeypatch):
    def raises(run):
        raise RuntimeError("boom\nsecond line")

    report = _run(monkeypatch, [
        Item("broken", raises, raiser="forward",
             unknown_if_it_raises={Fact.OUTPUT: "the forward pass failed"}),
        Item("after", lambda run: failed("should not run"), needs=(Fact.OUTPUT,)),
        Item("default raiser", raises)])
    assert report.item("broken").status == "FAIL"
    assert report.item("broken").summary == "forward raised RuntimeError: boom"
    assert (report.item("after").status, report.item("after").summary) == (
        "SKIP", "the forward pass failed")
    assert report.item("default raiser").summary.startswith(
        "the model's forward or backward, or loss_fn, raised RuntimeError")


def test_rows_that_do_not_apply_are_left_out(monkeypatch):
    report = _run(monkeypatch, [Item("always", lambda run: passed("ok")),
                                Item("causal only", lambda run: passed("ok"),
                                     applies=lambda run: run.causal)])
    assert [item.name for item in report.items] == ["always"]
