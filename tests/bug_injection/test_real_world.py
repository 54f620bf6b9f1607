"""The real-world corpus: every entry's buggy version runs and gets exactly its recorded
status (diagnosed / symptom / missed), every fixed twin gets its recorded fixed status
(clean unless a false alarm is recorded), and ``gradhunt hunt`` / ``inject`` show them."""
import json

import pytest

pytest.importorskip("torch")

import bug_injection.real_world.hunt as real_world_hunt  # noqa: E402
from bug_injection.real_world import CATEGORIES, corpus, get_entry, run_entry  # noqa: E402
from scenarios import cli  # noqa: E402

ENTRIES = corpus()


def test_the_corpus_spans_every_category_with_thirty_sourced_entries():
    assert len(ENTRIES) >= 30
    assert {e.category for e in ENTRIES} == set(CATEGORIES)
    assert len({e.name for e in ENTRIES}) == len(ENTRIES)
    for entry in ENTRIES:
        assert entry.source and entry.root_cause and entry.expected
        assert ("#" in entry.source or "http" in entry.source), entry.name


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_recorded_status_is_the_true_one(entry):
    buggy = run_entry(entry, "buggy")
    assert buggy.verdict == entry.verdict, (entry.status, buggy.codes, buggy.message)
    assert set(entry.symptom_codes) <= set(buggy.codes)
    fixed = run_entry(entry, "fixed")
    assert fixed.verdict == entry.fixed_verdict, (entry.fixed_status, fixed.codes, fixed.message)
    assert set(entry.false_alarm_codes) <= set(fixed.codes)


def test_an_entry_marked_diagnosed_that_is_missed_fails_the_hunt(monkeypatch):
    entry = get_entry("zero_grad_every_microbatch")     # missed today
    wrong = type(entry)(**{**entry.__dict__, "codes": ("STALE_GRADIENTS",),
                           "status": "diagnosed"})
    monkeypatch.setattr(real_world_hunt, "corpus", lambda: [wrong])
    result = real_world_hunt.hunt_real_world()
    assert not result.passed
    assert "CHANGED: zero_grad_every_microbatch" in real_world_hunt.render(result)


def test_hunt_prints_the_real_world_score_separately(capsys, monkeypatch):
    picked = [get_entry("labels_start_at_one_extra_unit"), get_entry("causal_mask_missing")]
    monkeypatch.setattr(real_world_hunt, "corpus", lambda: picked)
    assert cli.main(["hunt", "--kind", "real_world"]) == 0
    out = capsys.readouterr().out
    assert "real-world: 2/2 diagnosed at root cause" in out and "2/2 fixed twins clean" in out
    assert cli.main(["hunt", "--kind", "real_world", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["real_world"]
    assert data["diagnosed"] == 2 and [o["ok"] for o in data["outcomes"]] == [True, True]


def test_inject_runs_a_real_world_entry(capsys):
    assert cli.main(["inject", "labels_start_at_one_extra_unit"]) == 0
    out = capsys.readouterr().out
    assert "community.deeplearning.ai" in out and "LABEL_RANGE" in out
    assert "Now:       diagnosed  |  fixed twin: clean" in out


def test_the_findings_doc_cites_the_corpus_as_it_stands():
    from pathlib import Path

    from bug_injection.real_world.docs import seen_in_the_wild

    doc = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    assert seen_in_the_wild() in doc


@pytest.mark.parametrize("name", ["attention_without_batch_first", "causal_mask_missing",
                                  "labels_start_at_one_extra_unit", "unshuffled_sorted_classes",
                                  "train_mode_not_restored_after_validation",
                                  "softmax_before_cross_entropy", "clip_before_unscale",
                                  "adam_eps_underflows_in_half",
                                  "sigmoid_before_bce_with_logits",
                                  "view_instead_of_permute_features",
                                  "functional_dropout_ignores_eval"])
def test_the_findings_doc_examples_are_real_output(name):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    entry = get_entry(name)
    finding = next(f for f in run_entry(entry).findings if f.code in entry.codes)
    assert str(finding) in doc
