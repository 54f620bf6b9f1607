"""SCORES_AS_LOG_PROBABILITIES from the rows a loss receives: raw scores into NLL, CTC and
KL-divergence's input are named (whatever the model does with them later), and so is a
log_softmax over the wrong axis; log-probabilities (also clamped ones, also through a
temperature) stay quiet, and probabilities are left to PROBABILITIES_AS_LOGITS."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from tests.support.squashed_outputs import train_squashed
from diagnostics.monitor.probes.loss_inputs import LSE_TOLERANCE, _unnormalised_share

CLASSES = 5


def _nll(out, x):
    return nn.NLLLoss()(out, x[:, :CLASSES].argmax(1))


def _kl(out, x):
    return nn.KLDivLoss(reduction="batchmean")(out, torch.softmax(x[:, :CLASSES], dim=1))


def _ctc(out, x):
    """Each example's scores as a sequence of 8 frames over CLASSES symbols (0: blank)."""
    frames = out.repeat(1, 8).reshape(out.shape[0], 8, CLASSES).transpose(0, 1)
    targets = (x[:, :3].abs() * 10).long() % (CLASSES - 1) + 1
    lengths = torch.full((out.shape[0],), 8, dtype=torch.long)
    return nn.CTCLoss(zero_infinity=True)(frames, targets, lengths,
                                          torch.full_like(lengths, 3))


def _found(report):
    return [f for f in report.findings if f.code == "SCORES_AS_LOG_PROBABILITIES"]


@pytest.mark.parametrize("loss_of, name", [(_nll, "nll_loss"), (_kl, "kl_div"),
                                           (_ctc, "ctc_loss")])
def test_raw_scores_into_a_loss_of_log_probabilities_are_named(loss_of, name):
    report = train_squashed(lambda s: s, loss_of)
    (finding,) = _found(report)
    assert finding.message.startswith(name) and finding.severity == "error"
    assert finding.location == "loss" and "log_softmax" in finding.suggestion
    assert report.findings[0].code == "SCORES_AS_LOG_PROBABILITIES"     # the root, first


def test_nll_of_raw_scores_says_the_loss_went_below_zero():
    (finding,) = _found(train_squashed(lambda s: s, _nll))
    assert finding.evidence["negative_losses"] > 0 and "below zero" in finding.message


def test_a_log_softmax_over_the_batch_axis_is_named():
    (finding,) = _found(train_squashed(lambda s: torch.log_softmax(s, dim=0), _nll))
    assert "another dim" in finding.message


@pytest.mark.parametrize("squash", [
    lambda s: torch.log_softmax(s, dim=1),
    lambda s: torch.log(torch.softmax(s, dim=1).clamp(min=1e-7)),
    lambda s: torch.log_softmax(s / 4.0, dim=-1),
])
@pytest.mark.parametrize("loss_of", [_nll, _kl, _ctc])
def test_log_probabilities_are_quiet(squash, loss_of):
    assert not _found(train_squashed(squash, loss_of, steps=60))


def test_probabilities_are_left_to_probabilities_as_logits():
    codes = {f.code for f in train_squashed(lambda s: torch.softmax(s, dim=1), _nll).findings}
    assert "PROBABILITIES_AS_LOGITS" in codes and "SCORES_AS_LOG_PROBABILITIES" not in codes


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 40), classes=st.integers(1, 30), scale=st.floats(0.01, 30.0),
       seed=st.integers(0, 2**16), shift=st.floats(-50.0, 50.0))
def test_the_share_of_unnormalised_rows_is_zero_for_log_softmax_and_one_when_shifted(
        rows, classes, scale, seed, shift):
    scores = torch.randn(rows, classes, generator=torch.Generator().manual_seed(seed)) * scale
    log_probs = torch.log_softmax(scores, dim=1)
    assert float(_unnormalised_share(log_probs, (1,))) == 0.0
    expected = 1.0 if abs(shift) > LSE_TOLERANCE * 1.01 else None
    if expected is not None:
        assert float(_unnormalised_share(log_probs + shift, (1,))) == expected


def test_ctc_is_watched_and_torchs_own_again_after_close():
    original = F.ctc_loss
    train_squashed(lambda s: torch.log_softmax(s, dim=1), _ctc, steps=2)
    assert F.ctc_loss is original
