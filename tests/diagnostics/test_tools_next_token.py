"""preflight's next-token targets (``causal=True``): the token each position is scored against
is read from the user's loss, and an offset other than t + 1 is TARGETS_MISALIGNED."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad
from diagnostics import preflight
from diagnostics.backends import get_backend
from diagnostics.batch import Batch
from diagnostics.tools.next_token import misaligned_targets


def _lm(framework, vocab, seed=0):
    """Each position's logits from its own token: causal by construction."""
    fw = torch if framework == "torch" else minigrad
    fw.manual_seed(seed)
    return fw.nn.Sequential(fw.nn.Embedding(vocab, 8), fw.nn.Linear(8, vocab))


def _loss(framework, vocab, *, shifts, smoothing=0.0):
    F = torch.nn.functional if framework == "torch" else minigrad.nn.functional

    def loss(logits, labels):
        if shifts:   # as GPT-2's head: logits[:, :-1] against labels[:, 1:]
            logits, labels = logits[:, :-1], labels[:, 1:]
        extra = {"label_smoothing": smoothing} if smoothing else {}
        return F.cross_entropy(logits.reshape(-1, vocab), labels.reshape(-1), **extra)
    return loss


def _tensor(framework, array):
    return torch.from_numpy(array) if framework == "torch" else minigrad.tensor(array)


def _read(framework, vocab, ids, labels, *, shifts, smoothing=0.0):
    model = _lm(framework, vocab)
    loss = _loss(framework, vocab, shifts=shifts, smoothing=smoothing)
    backend = get_backend(model)
    batch = Batch.prepare(backend, loss, _tensor(framework, ids), _tensor(framework, labels))
    with backend.no_grad():
        output = batch.forward(model)
    return misaligned_targets(backend, batch, output, None)


@settings(max_examples=30, deadline=None)
@given(vocab=st.integers(8, 40), steps=st.integers(6, 20), rows=st.integers(2, 6),
       offset=st.sampled_from([-1, 0, 1, 2]), shifts=st.booleans(),
       seed=st.integers(0, 2**16))
def test_the_offset_read_from_the_loss_is_the_one_planted(vocab, steps, rows, offset, shifts,
                                                          seed):
    """Labels built so that position t is scored against input token t + offset (through a
    loss that shifts by itself or not): flagged exactly when offset is not 1."""
    rng = np.random.default_rng(seed)
    sequence = rng.integers(0, vocab, (rows, steps + 4))
    ids = sequence[:, 2:steps + 2]
    begin = 2 + offset + (-1 if shifts else 0)     # a shifting loss moves labels one further
    labels = sequence[:, begin:begin + steps]
    judged, summary, findings = _read("torch", vocab, ids, labels, shifts=shifts)
    scored = steps - shifts                      # positions the loss scores, per row

    def compared(k):
        return rows * sum(1 for t in range(scored) if 0 <= t + k < steps)
    if offset == 1 or min(compared(1), compared(offset)) < 16:
        assert all(f.evidence["offset"] != 1 for f in findings)
        if offset == 1:
            assert findings == []
        return
    (finding,) = findings
    assert (finding.code, finding.severity, finding.evidence["offset"]) == (
        "TARGETS_MISALIGNED", "error", offset)
    assert finding.evidence["matched"] == 1.0


@pytest.mark.parametrize("framework", ["torch", "minigrad"])
def test_labels_equal_to_the_inputs_pass_only_through_a_loss_that_shifts(framework):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, 12, (4, 10))
    judged, summary, findings = _read(framework, 12, ids, ids, shifts=True)
    assert judged and findings == [] and summary.startswith("100% of 36 scored positions")
    judged, summary, findings = _read(framework, 12, ids, ids, shifts=False)
    assert [f.evidence["offset"] for f in findings] == [0]
    assert "copy its input" in findings[0].message
    assert summary.startswith("position t is scored against input token t itself")


def test_ignored_positions_and_label_smoothing_do_not_blur_the_reading():
    rng = np.random.default_rng(2)
    ids = rng.integers(0, 10, (4, 12))
    labels = ids.copy()
    labels[:, -4:] = -100                     # padding the loss ignores
    judged, summary, findings = _read("torch", 10, ids, labels, shifts=False, smoothing=0.1)
    (finding,) = findings
    assert finding.evidence["offset"] == 0 and finding.evidence["positions"] == 4 * 8


def test_no_token_ids_no_reading():
    backend_model = torch.nn.Linear(6, 5)
    backend = get_backend(backend_model)
    loss = torch.nn.functional.cross_entropy
    batch = Batch.prepare(backend, loss, torch.randn(8, 6), torch.randint(0, 5, (8,)))
    with backend.no_grad():
        output = batch.forward(backend_model)
    judged, summary, findings = misaligned_targets(backend, batch, output, None)
    assert not judged and findings == [] and summary.startswith("needs integer token inputs")


@pytest.mark.parametrize("framework", ["torch", "minigrad"])
def test_preflight_lists_the_item_only_for_a_language_model(framework):
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 12, (4, 10))
    x = _tensor(framework, ids)
    model, loss = _lm(framework, 12), _loss(framework, 12, shifts=False)
    names = [item.name for item in preflight(model, loss, x, x).items]
    assert "next-token targets" not in names
    report = preflight(model, loss, x, x, causal=True)
    item = next(item for item in report.items if item.name == "next-token targets")
    assert item.status == "FAIL" and [f.code for f in item.findings] == ["TARGETS_MISALIGNED"]
    healthy = preflight(_lm(framework, 12), _loss(framework, 12, shifts=True), x, x, causal=True)
    item = next(item for item in healthy.items if item.name == "next-token targets")
    assert item.status == "PASS" and item.findings == []


def test_logits_with_the_classes_on_axis_one_are_read_where_the_loss_puts_them():
    """torch's cross-entropy also takes (B, V, T): the gradient's zero sums tell the class axis,
    also when V equals T."""
    rng = np.random.default_rng(4)
    ids = torch.from_numpy(rng.integers(0, 10, (4, 10)))
    torch.manual_seed(0)
    embed, head = torch.nn.Embedding(10, 8), torch.nn.Linear(8, 10)
    model = torch.nn.Sequential(embed, head)

    class Transposed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = model

        def forward(self, x):
            return self.inner(x).transpose(1, 2)        # (B, V, T)

    wrapped = Transposed()
    backend = get_backend(wrapped)
    batch = Batch.prepare(backend, torch.nn.functional.cross_entropy, ids, ids)
    with backend.no_grad():
        output = batch.forward(wrapped)
    judged, summary, findings = misaligned_targets(backend, batch, output, None)
    assert [f.evidence["offset"] for f in findings] == [0]


def test_targets_that_are_not_the_inputs_at_any_offset_are_not_judged():
    """A causal tagger scoring each position against a tag, not a token: no verdict."""
    rng = np.random.default_rng(5)
    ids = rng.integers(0, 12, (4, 10))
    tags = rng.integers(0, 12, (4, 10))
    judged, summary, findings = _read("torch", 12, ids, tags, shifts=False)
    assert not judged and findings == [] and "not a next-token loss" in summary
