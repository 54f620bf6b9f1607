"""The real-world corpus: on every backend an entry is reproduced on, its buggy version gets
exactly the status recorded for that backend (diagnosed / symptom / missed), its fixed twin
its recorded fixed status (clean unless a false alarm is recorded), and ``gradhunt hunt`` /
``inject`` show them."""
import json

import pytest

pytest.importorskip("torch")

import bug_injection.real_world.hunt as real_world_hunt  # noqa: E402
from bug_injection.real_world import (CATEGORIES, DIAGNOSED, corpus, get_entry,  # noqa: E402
                                      missed, run_entry)
from scenarios import cli  # noqa: E402

ENTRIES = corpus()
PAIRS = [(entry, backend) for entry in ENTRIES for backend in entry.backends]


def test_the_corpus_spans_every_category_with_thirty_sourced_entries():
    assert len(ENTRIES) >= 30
    assert {e.category for e in ENTRIES} == set(CATEGORIES)
    assert len({e.name for e in ENTRIES}) == len(ENTRIES)
    for entry in ENTRIES:
        assert entry.source and entry.root_cause and entry.expected
        assert ("#" in entry.source or "http" in entry.source), entry.name


@pytest.mark.parametrize(("entry", "backend"), PAIRS,
                         ids=[f"{e.name}-{backend}" for e, backend in PAIRS])
def test_recorded_status_is_the_true_one(entry, backend):
    buggy = run_entry(entry, "buggy", backend)
    assert buggy.verdict == entry.verdict(backend), (entry.status_on(backend), buggy.codes,
                                                     buggy.message)
    assert set(entry.symptom_codes(backend)) <= set(buggy.codes)
    fixed = run_entry(entry, "fixed", backend)
    assert fixed.verdict == entry.fixed_verdict(backend), (entry.fixed_status_on(backend),
                                                           fixed.codes, fixed.message)
    assert set(entry.false_alarm_codes(backend)) <= set(fixed.codes)


def test_entries_with_minigrad_layers_are_reproduced_on_minigrad_too():
    """The minigrad twins build minigrad objects, not torch ones: the framework really
    changes."""
    import minigrad

    twins = [e for e in ENTRIES if "minigrad" in e.backends]
    assert len(twins) >= 20
    for entry in twins:
        case = entry.build("buggy", "minigrad")
        built = [case.model, case.optimizer, case.loss_fn, case.inputs, case.targets,
                 *case.data.values(), *(case.label_batches or ())]
        assert not any(type(obj).__module__.startswith("torch") for obj in built), entry.name
        assert case.model is None or isinstance(case.model, minigrad.nn.Module), entry.name


def test_status_can_differ_per_backend_and_is_checked_per_backend():
    entry = get_entry("zero_grad_missing")
    split = type(entry)(**{**entry.__dict__, "status": {
        "torch": DIAGNOSED, "minigrad": missed("no check on minigrad")}})
    assert split.verdict("torch") == "diagnosed" and split.verdict("minigrad") == "missed"
    assert split.status_on("minigrad") == "missed: no check on minigrad"
    with pytest.raises(ValueError, match="one status per backend"):
        type(entry)(**{**entry.__dict__, "status": {"torch": DIAGNOSED}})
    with pytest.raises(ValueError, match="backend"):
        run_entry(get_entry("causal_mask_missing"), "buggy", "minigrad")


def test_a_backend_that_differs_from_its_recorded_status_fails_the_hunt(monkeypatch):
    entry = get_entry("zero_grad_missing")
    split = type(entry)(**{**entry.__dict__, "status": {
        "torch": DIAGNOSED, "minigrad": missed("no check on minigrad")}})
    monkeypatch.setattr(real_world_hunt, "corpus", lambda: [split])
    result = real_world_hunt.hunt_real_world()
    assert [(o.backend, o.ok) for o in result.outcomes] == [("torch", True),
                                                             ("minigrad", False)]
    assert "CHANGED: zero_grad_missing on minigrad" in real_world_hunt.render(result)
    only_torch = real_world_hunt.hunt_real_world(backends=("torch",))
    assert only_torch.passed and [o.backend for o in only_torch.outcomes] == ["torch"]


def test_an_entry_marked_diagnosed_that_is_missed_fails_the_hunt(monkeypatch):
    entry = get_entry("zero_grad_every_microbatch")     # missed today
    wrong = type(entry)(**{**entry.__dict__, "codes": ("STALE_GRADIENTS",),
                           "status": DIAGNOSED})
    monkeypatch.setattr(real_world_hunt, "corpus", lambda: [wrong])
    result = real_world_hunt.hunt_real_world()
    assert not result.passed
    assert "CHANGED: zero_grad_every_microbatch on torch" in real_world_hunt.render(result)


def test_hunt_prints_the_real_world_score_separately(capsys, monkeypatch):
    picked = [get_entry("labels_start_at_one_extra_unit"), get_entry("causal_mask_missing")]
    monkeypatch.setattr(real_world_hunt, "corpus", lambda: picked)
    assert cli.main(["hunt", "--kind", "real_world"]) == 0
    out = capsys.readouterr().out
    assert "real-world: 3/3 diagnosed at root cause" in out and "3/3 fixed twins clean" in out
    assert "(2 entries, 2 on torch, 1 on minigrad)" in out
    rows = [line.split()[:2] for line in out.splitlines() if line.startswith(("labels", "causal"))]
    assert rows == [["labels_start_at_one_extra_unit", "torch"],
                    ["labels_start_at_one_extra_unit", "minigrad"],
                    ["causal_mask_missing", "torch"]]
    assert cli.main(["hunt", "--kind", "real_world", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["real_world"]
    assert data["diagnosed"] == 3 and data["entries"] == 2 and data["runs"] == 3
    assert [(o["backend"], o["ok"]) for o in data["outcomes"]] == [
        ("torch", True), ("minigrad", True), ("torch", True)]
    assert cli.main(["hunt", "--kind", "real_world", "--backend", "minigrad", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["real_world"]
    assert [(o["name"], o["backend"]) for o in data["outcomes"]] == [
        ("labels_start_at_one_extra_unit", "minigrad")]


def test_inject_runs_a_real_world_entry_on_each_of_its_backends(capsys):
    assert cli.main(["inject", "labels_start_at_one_extra_unit"]) == 0
    out = capsys.readouterr().out
    assert "community.deeplearning.ai" in out and "LABEL_RANGE" in out
    assert "(real-world, data pipeline, on torch)" in out
    assert "(real-world, data pipeline, on minigrad)" in out
    assert out.count("Now:       diagnosed  |  fixed twin: clean") == 2
    assert cli.main(["inject", "labels_start_at_one_extra_unit", "--backend", "minigrad"]) == 0
    out = capsys.readouterr().out
    assert "on minigrad)" in out and "on torch)" not in out
    assert cli.main(["inject", "causal_mask_missing", "--backend", "minigrad"]) == 2
    assert "reproduced on torch only" in capsys.readouterr().err


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
                                  "functional_dropout_ignores_eval", "lm_labels_not_shifted",
                                  "zero_grad_every_microbatch"])
def test_the_findings_doc_examples_are_real_output(name):
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "findings.md").read_text()
    entry = get_entry(name)
    finding = next(f for f in run_entry(entry).findings if f.code in entry.codes)
    assert str(finding) in doc
