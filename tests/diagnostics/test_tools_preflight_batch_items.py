"""preflight's batch items: batch independence (BATCH_MIXING, CAUSALITY_LEAK with causal=True),
label range (LABEL_RANGE) and label order (LABELS_SORTED) over the one batch it gets; healthy
batch-norm, transformer and causal language models stay quiet."""
import numpy as np
import pytest
import torch
from torch import nn

import minigrad

from diagnostics import preflight
from diagnostics.errors import DiagnosticsError

from .tools_helpers import assert_same, capture, classification_data, mlp

VOCAB, TOKENS, WIDTH = 11, 6, 16


def _item(report, name):
    item = report.item(name)
    return item.status, [f.code for f in item.findings]


def _cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4))


class _LM(nn.Module):
    """A one-block transformer language model; ``mask=False`` forgets the causal mask."""

    def __init__(self, *, mask=True):
        super().__init__()
        torch.manual_seed(0)
        self.mask = mask
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.block = nn.TransformerEncoderLayer(WIDTH, 2, 32, dropout=0.1, batch_first=True)
        self.head = nn.Linear(WIDTH, VOCAB)

    def forward(self, tokens):
        causal = nn.Transformer.generate_square_subsequent_mask(tokens.shape[1])
        return self.head(self.block(self.embed(tokens), src_mask=causal if self.mask else None))


def _lm_batch(rows=8):
    rng = np.random.default_rng(0)
    tokens = torch.tensor(rng.integers(0, VOCAB, (rows, TOKENS + 1)))
    return tokens[:, :-1], tokens[:, 1:]


def _lm_loss(logits, targets):
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def test_a_batchnorm_cnn_passes_the_batch_items():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3, 4, 4)).astype(np.float32)
    y = rng.permutation(np.arange(16) % 4)
    report = preflight(_cnn(), nn.CrossEntropyLoss(), x, y)
    assert _item(report, "batch independence") == ("PASS", [])
    assert _item(report, "label range") == ("PASS", [])
    assert _item(report, "label order") == ("PASS", [])
    assert "one batch is too few" in report.item("label range").summary
    assert "positions" not in report.item("batch independence").summary


def test_a_causal_language_model_passes():
    tokens, targets = _lm_batch()
    report = preflight(_LM(), _lm_loss, tokens, targets, causal=True)
    assert _item(report, "batch independence") == ("PASS", [])
    assert "position t's only on positions <= t" in report.item("batch independence").summary
    assert report.item("label order").status == "SKIP"     # labels per position


def test_a_missing_causal_mask_fails_when_declared_causal():
    tokens, targets = _lm_batch()
    status, codes = _item(preflight(_LM(mask=False), _lm_loss, tokens, targets, causal=True),
                          "batch independence")
    assert (status, codes) == ("FAIL", ["CAUSALITY_LEAK"])


def test_attention_across_the_batch_fails_batch_independence():
    class Pooled(nn.Module):
        def __init__(self, batch_first):
            super().__init__()
            torch.manual_seed(0)
            self.embed = nn.Linear(5, 8)
            self.attn = nn.MultiheadAttention(8, 2, batch_first=batch_first)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            h = self.embed(x)
            return self.head(self.attn(h, h, h)[0].mean(1))

    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 4, 5)).astype(np.float32)
    y = rng.integers(0, 2, 8)
    model = Pooled(batch_first=False)
    before = capture(model)
    report = preflight(model, nn.CrossEntropyLoss(), x, y)
    assert _item(report, "batch independence") == ("FAIL", ["BATCH_MIXING"])
    assert report.item("batch independence").findings[0].location == "attn"
    assert_same(before, capture(model))
    assert _item(preflight(Pooled(batch_first=True), nn.CrossEntropyLoss(), x, y),
                 "batch independence") == ("PASS", [])


def test_labels_starting_at_one_leave_output_unit_zero_unused():
    x, y = classification_data(rows=120, classes=4, seed=3)
    report = preflight(mlp("torch", (8, 16, 5)), nn.CrossEntropyLoss(), x, y + 1)
    status, codes = _item(report, "label range")
    assert (status, codes) == ("FAIL", ["LABEL_RANGE"])
    finding = report.item("label range").findings[0]
    assert finding.evidence["batches_seen"] == 1 and "one batch of 120 labels" in finding.message
    fixed = preflight(mlp("torch", (8, 16, 4)), nn.CrossEntropyLoss(), x, y)
    assert _item(fixed, "label range") == ("PASS", [])


def test_a_batch_sorted_by_class_is_labels_sorted():
    x, y = classification_data(rows=64, classes=4, seed=4)
    order = np.argsort(y, kind="stable")
    report = preflight(mlp("torch", (8, 16, 4)), nn.CrossEntropyLoss(), x[order], y[order])
    assert _item(report, "label order") == ("FAIL", ["LABELS_SORTED"])
    assert report.item("label order").findings[0].evidence["batches_seen"] == 1
    shuffled = np.random.default_rng(0).permutation(len(y))
    assert _item(preflight(mlp("torch", (8, 16, 4)), nn.CrossEntropyLoss(), x[shuffled],
                           y[shuffled]), "label order") == ("PASS", [])


def test_minigrad_skips_batch_independence_and_checks_labels():
    x, y = classification_data(rows=16)
    report = preflight(mlp("minigrad", (8, 16, 3)), minigrad.nn.CrossEntropyLoss(), x, y)
    assert report.item("batch independence").status == "SKIP"
    assert report.item("label range").status == "PASS"


def test_causal_must_be_a_bool():
    x, y = classification_data(rows=8)
    with pytest.raises(DiagnosticsError, match="causal"):
        preflight(mlp("torch"), nn.CrossEntropyLoss(), x, y, causal="yes")
