"""LABEL_RANGE per element: segmentation masks and tag sequences whose values never use the
classes at an end of the output (binarised masks, ids divided or offset), judged over the
sampled steps by the rule of ``tools.label_checks`` with the examples as draws. Quiet when all
classes occur, for an ignore_index class of its own, for a token vocabulary (an output as wide
as the model's embedding), and before enough examples were seen."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from diagnostics import Monitor
from diagnostics.tools.label_checks import LabelTally, judge_label_range

from .monitor_nets import one_torch_thread  # noqa: F401 (a fixture)
from .target_nets import TAGS, alarms, codes, sentences, train_segmenter, train_tagger

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_binarised_masks_are_named():
    report = train_segmenter(nn.CrossEntropyLoss(), classes=4, masks_of=lambda m: (m > 0).long())
    assert alarms(report)[0] == "LABEL_RANGE"
    finding = report.findings[0]
    assert finding.location == "loss" and finding.evidence["unused_units"] == [2, 3]
    assert "mask > 0" in finding.suggestion


def test_true_masks_are_quiet():
    assert not alarms(train_segmenter(nn.CrossEntropyLoss(), classes=4))


def test_flattened_tags_that_stop_short_are_named():
    """Tags (N, T) flattened for (N*T, C) logits: their rows come back from the view."""
    report = train_tagger(lambda out, tags, n: F.cross_entropy(
        out.reshape(-1, TAGS + 2), tags.clamp(max=TAGS - 1).reshape(-1), ignore_index=-1),
        tags=TAGS + 2)
    assert alarms(report) == ["LABEL_RANGE"]
    assert report.findings[0].evidence["unused_units"] == [TAGS, TAGS + 1]


def test_an_ignored_pad_class_is_not_an_unused_unit():
    report = train_tagger(lambda out, tags, n: F.cross_entropy(
        out.reshape(-1, TAGS + 1), tags.masked_fill(tags < 0, TAGS).reshape(-1),
        ignore_index=TAGS), tags=TAGS + 1)
    assert not alarms(report)


def test_a_language_models_vocabulary_is_not_judged():
    """A tiny LM: token 0 is padding and never a target, the top tokens rare; its output is
    as wide as its embedding, a vocabulary whose tokens need not all occur."""
    torch.manual_seed(0)
    vocab = 30
    model = nn.Sequential(nn.Embedding(vocab, 16), nn.Linear(16, vocab))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    with Monitor(model, optimizer, every=5) as monitor:
        for _ in range(40):
            ids = torch.randint(1, vocab - 6, (16, 12))
            optimizer.zero_grad()
            loss = F.cross_entropy(model(ids[:, :-1]).reshape(-1, vocab), ids[:, 1:].reshape(-1))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    assert "LABEL_RANGE" not in codes(monitor.report())


def test_too_few_examples_are_not_judged():
    """Two sampled steps of 4 sentences for 8 classes: fewer than 5 examples a class."""
    generator = torch.Generator().manual_seed(0)
    report = train_tagger(lambda out, tags, n: F.cross_entropy(
        out.reshape(-1, 8), tags.reshape(-1), ignore_index=-1), tags=8, steps=3,
        batches=lambda: sentences(4, generator=generator))
    assert "LABEL_RANGE" not in codes(report)


def test_the_rule_is_the_one_of_label_checks():
    """The per-element tally and check_label_range's labels meet in one rule."""
    tally = LabelTally(np.array([30, 40, 0, 0]), draws=40)
    found = judge_label_range(tally, seen="over 40 examples", location="loss")
    assert [f.code for f in found] == ["LABEL_RANGE"] and found[0].evidence["unused_units"] == [
        2, 3]
    assert not judge_label_range(LabelTally(np.array([30, 40, 0, 0]), draws=40,
                                            exempt=frozenset({2, 3})), seen="")
    assert not judge_label_range(LabelTally(np.array([30, 40, 0, 0]), draws=19), seen="")
    outside = judge_label_range(LabelTally(np.array([3, 4]), draws=40, outside=2), seen="")
    assert outside[0].severity == "error"
