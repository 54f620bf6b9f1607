"""Batches no model can memorise by design: positions the model cannot tell apart (identical
input rows; for a causal model the same preceding tokens, as when every sequence starts with
the same token; for a bigram model the same token) carrying different class targets. The loss
there cannot go below the entropy of the targets given that context; the target is measured
from that floor, and the result says so. A model that cannot learn still fails on such a
batch, and a batch without such positions gets no floor.

And a class-index loss below zero (NLLLoss fed scores or probabilities) fails, saying so,
instead of passing in 0 steps."""
import math

import numpy as np
import pytest
import torch

import minigrad
from diagnostics import overfit_one_batch, preflight
from diagnostics.backends import get_backend
from diagnostics.batch import Batch
from diagnostics.tools import contexts

from .tools_helpers import FRAMEWORKS, NN, OPTIM, assert_same, capture, mlp, tensor

SEEDS = (0, 1, 2)
VOCAB, LENGTH, ROWS = 12, 8, 16


def duplicated_rows(seed, rows=16):
    """Every input row twice, with two different labels: ln 2 is the lowest loss."""
    rng = np.random.default_rng(seed)
    x = np.repeat(rng.standard_normal((rows, 8)).astype(np.float32), 2, axis=0)
    first = rng.integers(0, 3, rows)
    second = (first + rng.integers(1, 3, rows)) % 3
    return x, np.stack([first, second], axis=1).reshape(-1).astype(np.int64)


def sequences(seed):
    """Token ids ``(ROWS, LENGTH)`` all starting with token 0, and the next tokens."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(1, VOCAB, (ROWS, LENGTH + 1))
    tokens[:, 0] = 0
    return tokens[:, :-1].astype(np.int64), tokens[:, 1:].astype(np.int64)


def conditional_entropy(keys, targets):
    """The mean over positions of -log p(target | key), p the batch's own shares."""
    keys, targets = np.asarray(keys).reshape(-1), np.asarray(targets).reshape(-1)
    total = 0.0
    for key in np.unique(keys):
        labels = targets[keys == key]
        _, counts = np.unique(labels, return_counts=True)
        total -= float(np.sum(counts * np.log(counts / counts.sum())))
    return total / targets.size


def lm_loss(framework):
    cross_entropy = NN[framework].CrossEntropyLoss()

    def loss(logits, targets):
        return cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    return loss


def bigram(framework, seed):
    (torch.manual_seed if framework == "torch" else minigrad.manual_seed)(seed)
    nn = NN[framework]
    return nn.Sequential(nn.Embedding(VOCAB, 16), nn.Linear(16, VOCAB))


class CausalLM(torch.nn.Module):
    """One masked self-attention block: position t sees tokens 0..t."""

    def __init__(self, seed, causal=True, width=32):
        super().__init__()
        torch.manual_seed(seed)
        self.causal = causal
        self.token = torch.nn.Embedding(VOCAB, width)
        self.position = torch.nn.Embedding(LENGTH, width)
        self.block = torch.nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0,
                                                      batch_first=True)
        self.head = torch.nn.Linear(width, VOCAB)

    def forward(self, ids):
        h = self.token(ids) + self.position(torch.arange(ids.shape[1]))
        if not self.causal:
            return self.head(self.block(h))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        return self.head(self.block(h, src_mask=mask, is_causal=True))


def kill(framework, layer):
    """Every unit after ``layer`` off: a bias of -50 before a ReLU."""
    if framework == "torch":
        with torch.no_grad():
            layer.bias.fill_(-50.0)
    else:
        layer.bias.data[...] = -50.0


# ------------------------------------------------------------------ identical input rows
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_identical_rows_with_different_labels_are_judged_from_their_entropy(framework, seed):
    x, y = duplicated_rows(seed)
    model = mlp(framework, (8, 32, 3), seed=seed)
    before = capture(model)
    result = overfit_one_batch(model, NN[framework].CrossEntropyLoss(), x, y)
    assert_same(before, capture(model))
    assert result.passed and not result.findings
    assert result.floor == pytest.approx(math.log(2), rel=1e-3)
    assert result.floor_reason == ("32 of 32 target positions share identical input rows with "
                                   "a different target")
    assert result.target_loss > result.floor
    assert "above the floor 0.6931 of targets the model cannot tell apart" in result.headline
    assert "floor: 0.6931, as 32 of 32 target positions share identical input rows" in str(result)
    assert result.to_dict()["floor_reason"] == result.floor_reason


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("how", ["dead", "zero_lr"])
def test_a_model_that_cannot_learn_still_fails_on_identical_rows(framework, how):
    x, y = duplicated_rows(0)
    model = mlp(framework, (8, 32, 3))
    optimizer = None
    if how == "dead":
        kill(framework, model[0])
    else:
        optimizer = OPTIM[framework].SGD(model.parameters(), lr=0.0)
    result = overfit_one_batch(model, NN[framework].CrossEntropyLoss(), x, y,
                               optimizer=optimizer, steps=60)
    assert not result.passed
    (finding,) = result.findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "error"
    assert "the target is measured from this batch's floor 0.6931" in finding.message


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_batch_without_shared_contexts_has_no_floor_and_a_dead_model_fails(framework):
    x, y = duplicated_rows(0)
    x = x + np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)
    model = mlp(framework, (8, 32, 3))
    kill(framework, model[0])
    result = overfit_one_batch(model, NN[framework].CrossEntropyLoss(), x, y, steps=60)
    assert not result.passed and result.floor == 0.0 and result.floor_reason is None
    assert [(f.code, f.severity) for f in result.findings] == [("OVERFIT_FAILED", "error")]


# ------------------------------------------------------------------ a bigram model
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_bigram_model_is_judged_from_the_entropy_of_the_next_token(framework, seed):
    ids, targets = sequences(seed)
    model = bigram(framework, seed)
    result = overfit_one_batch(model, lm_loss(framework), ids, targets)
    assert result.passed and not result.findings
    assert "share the same token with a different target" in result.floor_reason
    assert result.floor == pytest.approx(conditional_entropy(ids, targets), rel=1e-3)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_bigram_model_that_does_not_learn_still_fails(framework):
    ids, targets = sequences(0)
    model = bigram(framework, 0)
    result = overfit_one_batch(model, lm_loss(framework), ids, targets, steps=60,
                               optimizer=OPTIM[framework].SGD(model.parameters(), lr=0.0))
    assert not result.passed and result.floor > 0
    assert [(f.code, f.severity) for f in result.findings] == [("OVERFIT_FAILED", "error")]


# ------------------------------------------------------------------ a causal model
@pytest.mark.parametrize("seed", SEEDS)
def test_a_causal_model_on_sequences_that_start_alike_is_judged_from_its_floor(seed):
    ids, targets = sequences(seed)
    prefixes = [hash(tuple(row[:t + 1])) for row in ids for t in range(LENGTH)]
    result = overfit_one_batch(CausalLM(seed), lm_loss("torch"), torch.from_numpy(ids),
                               torch.from_numpy(targets))
    assert result.passed and not result.findings
    assert "share the same preceding tokens with a different target" in result.floor_reason
    assert result.floor == pytest.approx(conditional_entropy(prefixes, targets), rel=1e-3)


def test_preflight_passes_the_causal_model_and_says_why_its_target_is_not_zero():
    ids, targets = sequences(0)
    report = preflight(CausalLM(0), lm_loss("torch"), torch.from_numpy(ids),
                       torch.from_numpy(targets), causal=True)
    item = report.item("overfit one batch")
    assert item.status == "PASS" and "of targets the model cannot tell apart" in item.summary


def test_a_causal_model_that_does_not_learn_still_fails():
    ids, targets = sequences(0)
    model = CausalLM(0)
    result = overfit_one_batch(model, lm_loss("torch"), torch.from_numpy(ids),
                               torch.from_numpy(targets), steps=60,
                               optimizer=torch.optim.SGD(model.parameters(), lr=0.0))
    assert not result.passed and result.floor > 0
    assert [(f.code, f.severity) for f in result.findings] == [("OVERFIT_FAILED", "error")]


def _shared(model, ids, targets, framework="torch"):
    backend = get_backend(model)
    batch = Batch.prepare(backend, lm_loss(framework), tensor(framework, ids),
                          tensor(framework, targets))
    return contexts.shared_contexts(backend, batch, targets, targets >= 0)


def test_what_the_model_sees_is_read_from_its_outputs_not_assumed():
    ids, targets = sequences(0)
    assert _shared(CausalLM(0), ids, targets).kind == "the same preceding tokens"
    assert _shared(bigram("torch", 0), ids, targets).kind == "the same token"
    assert _shared(bigram("minigrad", 0), ids, targets, "minigrad").kind == "the same token"
    # a model that sees the whole sequence: every row differs, nothing is shared
    assert _shared(CausalLM(0, causal=False), ids, targets) is None
    # a zero head gives one output for everything: no evidence of what the model sees
    model = CausalLM(0)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
    before = capture(model)
    assert _shared(model, ids, targets) is None
    assert_same(before, capture(model))


def test_ignored_positions_do_not_count_and_the_best_accuracy_is_each_groups_majority():
    groups = np.array([0, 0, 0, 1, 1, 2])
    targets = np.array([1, 1, 2, 0, 2, 5])
    valid = np.array([True, True, True, True, True, False])
    assert contexts.best_accuracy(groups, targets, valid) == pytest.approx(3 / 5)
    logits = contexts.group_logits(groups, targets, valid, 6, 40.0)
    assert logits.shape == (6, 6) and np.array_equal(logits[0], logits[2])
    assert logits[0, 1] == pytest.approx(40 + math.log(2 / 3))


# ------------------------------------------------------------------ a loss below zero
def minigrad_nll(log_probs, targets):
    hot = np.eye(log_probs.shape[-1], dtype=np.float32)[targets.data.astype(np.int64)]
    return -(log_probs * minigrad.tensor(hot)).sum(dim=1).mean()


def nll(framework):
    return torch.nn.NLLLoss() if framework == "torch" else minigrad_nll


class MinigradLogSoftmax(minigrad.nn.Module):
    def forward(self, x):
        return minigrad.functional.log_softmax(x, dim=1)


class MinigradSoftmax(minigrad.nn.Module):
    def forward(self, x):
        return minigrad.functional.softmax(x, dim=1)


def classifier(framework, last=None):
    model = mlp(framework, (8, 32, 3))
    if last is None:
        return model
    layers = {"torch": {"log_softmax": torch.nn.LogSoftmax(1), "softmax": torch.nn.Softmax(1)},
              "minigrad": {"log_softmax": MinigradLogSoftmax(), "softmax": MinigradSoftmax()}}
    return NN[framework].Sequential(model, layers[framework][last])


def labelled(rows=32, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 8)).astype(np.float32)
    return x, np.argmax(x[:, :3], axis=1).astype(np.int64)


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("last", [None, "softmax"])
def test_nll_on_scores_or_probabilities_fails_as_a_negative_loss(framework, last):
    x, y = labelled()
    model = classifier(framework, last)
    before = capture(model)
    result = overfit_one_batch(model, nll(framework), x, y)
    assert_same(before, capture(model))
    assert not result.passed and result.negative_loss and result.steps is None
    (finding,) = result.findings
    assert finding.code == "OVERFIT_FAILED" and finding.severity == "error"
    assert "which no correct cross-entropy or negative log-likelihood" in finding.message
    assert "nn.NLLLoss (F.nll_loss) given raw scores or probabilities instead of " \
           "log_softmax output" in finding.message
    assert finding.evidence["ideal_logit_losses"][40.0] == pytest.approx(-40.0)
    assert result.headline.startswith("FAILED at step 0, a loss that goes below zero")

    item = preflight(model, nll(framework), x, y).item("overfit one batch")
    assert item.status == "FAIL" and "below zero" in item.summary


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_nll_on_scores_that_start_above_zero_fails_before_it_can_pass(framework):
    """Scores biased low make the first loss positive; training would take it through the
    target towards minus infinity. The loss at confident logits shows it at once."""
    x, y = labelled()
    model = classifier(framework)
    if framework == "torch":
        with torch.no_grad():
            model[2].bias.fill_(-2.0)
    else:
        model[2].bias.data[...] = -2.0
    result = overfit_one_batch(model, nll(framework), x, y)
    assert result.initial_loss > 0
    assert not result.passed and result.negative_loss
    (finding,) = result.findings
    assert "goes below zero for confident outputs" in finding.message
    assert "it keeps falling as the target class's score grows" in finding.message


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_log_softmax_before_nll_passes(framework):
    x, y = labelled()
    result = overfit_one_batch(classifier(framework, "log_softmax"), nll(framework), x, y)
    assert result.passed and not result.negative_loss and not result.findings
    item = preflight(classifier(framework, "log_softmax"), nll(framework), x,
                     y).item("overfit one batch")
    assert item.status == "PASS"
