"""PROBABILITIES_AS_LOGITS from the values a loss receives: a clamped sigmoid into
BCE-with-logits, a softmax into KL-divergence or NLL; logits and log-probabilities are quiet,
and the loss functions are torch's own again after close()."""
import pytest
import torch
import torch.nn.functional as F

from tests.support.squashed_outputs import train_squashed


def _multilabel(out, x):
    return F.binary_cross_entropy_with_logits(out, (x[:, :5] > 0).float())


def _teacher(out, x):
    return F.kl_div(out, torch.softmax(x[:, :5], dim=1), reduction="batchmean")


def _nll(out, x):
    return F.nll_loss(out, x[:, :5].argmax(1))


CASES = [
    (lambda s: torch.sigmoid(s).clamp(1e-6, 1 - 1e-6), _multilabel, "BCEWithLogitsLoss"),
    (lambda s: torch.softmax(s, dim=1), _teacher, "KLDivLoss"),
    (lambda s: torch.softmax(s, dim=1), _nll, "NLLLoss"),
]


@pytest.mark.parametrize("squash, loss_of, name", CASES)
def test_probabilities_into_a_loss_that_expects_logits_or_log_probabilities(squash, loss_of,
                                                                             name):
    found = [f for f in train_squashed(squash, loss_of).findings
             if f.code == "PROBABILITIES_AS_LOGITS" and f.location == "loss"]
    assert len(found) == 1 and found[0].message.startswith(name)


@pytest.mark.parametrize("squash, loss_of", [
    (lambda s: s, _multilabel),
    (lambda s: torch.log_softmax(s, dim=1), _teacher),
    (lambda s: torch.log_softmax(s, dim=1), _nll),
])
def test_logits_and_log_probabilities_are_quiet(squash, loss_of):
    report = train_squashed(squash, loss_of)
    assert "PROBABILITIES_AS_LOGITS" not in {f.code for f in report.findings}


def test_values_in_zero_one_at_the_first_steps_alone_say_nothing():
    """BCE's logits at init may all lie in [0, 1]; the evidence is a model that trained."""
    report = train_squashed(lambda s: torch.sigmoid(s), _multilabel, steps=3)
    assert not [f for f in report.findings if f.location == "loss"
                and f.code == "PROBABILITIES_AS_LOGITS"]


def test_the_loss_functions_are_torchs_own_after_close():
    originals = (F.binary_cross_entropy_with_logits, F.kl_div, F.nll_loss)
    train_squashed(lambda s: s, _multilabel, steps=2)
    assert (F.binary_cross_entropy_with_logits, F.kl_div, F.nll_loss) == originals
