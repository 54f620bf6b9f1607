"""A model that computes its loss inside forward from ``labels=`` (the Hugging Face convention)
is judged by every tool, or an item is skipped with the reason: the logits rule (a 0-d entry is
never the logits), preflight's next-token item through the model's own loss (GPT-2 shifts
internally: quiet; a forward that does not shift, or labels shifted before a shifting model:
TARGETS_MISALIGNED), check_batch_independence on a ``(loss, logits)`` tuple, overfit_one_batch's
accuracy against the classes the model's loss scores, and the Monitor (and ``gradhunt watch``)
naming TARGETS_MISALIGNED and CAUSALITY_LEAK from the training loop."""
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradhunt
from diagnostics import outputs
from diagnostics.backends import get_backend

ROOT = Path(__file__).resolve().parents[2]
VOCAB, LENGTH, BATCH = 12, 10, 16


@dataclass
class LMOutput:
    loss: torch.Tensor | None
    logits: torch.Tensor


def _tokens(rows=BATCH, seed=0):
    """A Markov chain whose next token is a fixed successor (with probability 0.9)."""
    g = torch.Generator().manual_seed(seed)
    successor = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(3))
    tokens = torch.empty(rows, LENGTH, dtype=torch.long)
    tokens[:, 0] = torch.randint(0, VOCAB, (rows,), generator=g)
    for t in range(1, LENGTH):
        follow = torch.rand(rows, generator=g) < 0.9
        tokens[:, t] = torch.where(follow, successor[tokens[:, t - 1]],
                                   torch.randint(0, VOCAB, (rows,), generator=g))
    return tokens


class GRULM(nn.Module):
    """Loss inside forward; ``offset`` is what logits[t] is scored against: labels[t + offset]
    (1 is right); ``bidirectional`` reads the whole sequence (not causal)."""

    def __init__(self, *, offset=1, bidirectional=False, returns="dataclass"):
        super().__init__()
        torch.manual_seed(0)
        self.offset, self.returns = offset, returns
        self.embed = nn.Embedding(VOCAB, 16)
        self.gru = nn.GRU(16, 16, batch_first=True, bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, VOCAB)

    def forward(self, input_ids, labels=None):
        logits = self.head(self.gru(self.embed(input_ids))[0])
        loss = None
        if labels is not None:
            k = self.offset
            scored, targets = (logits[:, :-k], labels[:, k:]) if k else (logits, labels)
            loss = F.cross_entropy(scored.reshape(-1, VOCAB), targets.reshape(-1))
        if self.returns == "tuple":
            return loss, logits
        if self.returns == "dict":
            return {"loss": loss, "logits": logits}
        return LMOutput(loss, logits)


class AttentionLM(nn.Module):
    """One self-attention layer, loss inside forward, a ``(loss, logits)`` tuple."""

    def __init__(self, *, masked):
        super().__init__()
        torch.manual_seed(0)
        self.masked = masked
        self.embed = nn.Embedding(VOCAB, 16)
        self.pos = nn.Embedding(LENGTH, 16)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, VOCAB)

    def forward(self, input_ids, labels=None):
        steps = input_ids.shape[1]
        x = self.embed(input_ids) + self.pos(torch.arange(steps))
        mask = torch.ones(steps, steps, dtype=torch.bool).triu(1) if self.masked else None
        logits = self.head(x + self.attn(x, x, x, attn_mask=mask, need_weights=False)[0])
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), labels[:, 1:].reshape(-1))
        return loss, logits


def _gpt2():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=VOCAB,
                                     n_positions=LENGTH, bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config)


def read_loss(output, labels):
    """The user's loss_fn for a model that computes its loss: read it out."""
    return output[0] if isinstance(output, tuple) else output["loss"] if isinstance(
        output, dict) else output.loss


def _item(report, name):
    [item] = [i for i in report.to_dict()["items"] if i["name"] == name]
    return item


# ------------------------------------------------------------------ the logits rule
def test_a_0d_entry_is_never_the_logits_even_when_the_loss_reads_it():
    model = GRULM(returns="tuple")
    backend = get_backend(model)
    ids = _tokens()
    output = model(ids, labels=ids)
    key = outputs.select_key(backend, output, reads=lambda: [0])   # loss_fn reads [0]
    assert key == 1 and outputs.pick(output, key).shape == (BATCH, LENGTH, VOCAB)


def test_an_object_with_a_logits_attribute_gives_it():
    class Plain:     # neither a dict nor a dataclass: an attribute named logits
        def __init__(self, logits):
            self.loss, self.logits = logits.sum(), logits
    logits = torch.randn(4, 3)
    backend = get_backend(nn.Linear(1, 1))
    assert outputs.pick(Plain(logits), outputs.select_key(backend, Plain(logits))) is logits


def test_an_output_with_only_a_0d_tensor_has_no_logits():
    backend = get_backend(nn.Linear(1, 1))
    with pytest.raises(LookupError):
        outputs.select_key(backend, (torch.tensor(1.0, requires_grad=True),))


@pytest.mark.parametrize("masked", [False, True])
def test_batch_independence_reads_the_logits_of_a_loss_logits_tuple(masked):
    ids = _tokens()
    found = gradhunt.check_batch_independence(AttentionLM(masked=masked),
                                              {"input_ids": ids, "labels": ids}, causal=True)
    assert {f.code for f in found} == (set() if masked else {"CAUSALITY_LEAK"})


# ------------------------------------------------------------------ preflight
@pytest.mark.parametrize("returns", ["dataclass", "tuple", "dict"])
@pytest.mark.parametrize("offset,expected", [(1, None), (0, 0), (2, 2)])
def test_preflight_reads_the_model_own_loss_for_next_token_targets(returns, offset, expected):
    model = GRULM(offset=offset, returns=returns)
    ids = _tokens()
    report = gradhunt.preflight(model, read_loss, {"input_ids": ids, "labels": ids}, ids,
                                causal=True)
    item = _item(report, "next-token targets")
    found = [f for f in report.findings if f.code == "TARGETS_MISALIGNED"]
    if expected is None:
        assert item["status"] == "PASS" and "t + 1 (the model's own loss)" in item["summary"]
        assert not found
    else:
        assert item["status"] == "FAIL" and "own loss" in item["summary"], item
        [finding] = found
        assert finding.evidence["offset"] == expected and finding.location == "model"
        assert "forward" in finding.message
    assert not [i for i in report.to_dict()["items"]
                if i["status"] == "FAIL" and " raised " in i["summary"]]


def test_preflight_on_gpt2_shifting_internally_passes_and_labels_shifted_twice_fail():
    model = _gpt2()
    ids = _tokens()
    right = gradhunt.preflight(model, read_loss, {"input_ids": ids, "labels": ids}, ids,
                               causal=True)
    assert _item(right, "next-token targets")["status"] == "PASS", right
    assert _item(right, "batch independence")["status"] == "PASS", right
    shifted = torch.cat([ids[:, 1:], ids[:, :1]], dim=1)    # shifted before a shifting model
    twice = gradhunt.preflight(model, read_loss, {"input_ids": ids, "labels": shifted},
                               shifted, causal=True)
    [finding] = [f for f in twice.findings if f.code == "TARGETS_MISALIGNED"]
    assert finding.evidence["offset"] == 2


def test_preflight_skips_next_token_with_the_reason_when_the_loss_ignores_the_logits():
    class HiddenLoss(GRULM):
        def forward(self, input_ids, labels=None):
            hidden = self.gru(self.embed(input_ids))[0]
            return LMOutput(hidden.pow(2).mean(), self.head(hidden))
    ids = _tokens()
    report = gradhunt.preflight(HiddenLoss(), read_loss, {"input_ids": ids, "labels": ids},
                                ids, causal=True)
    item = _item(report, "next-token targets")
    assert item["status"] == "SKIP" and "does not depend on its logits" in item["summary"]


# ------------------------------------------------------------------ overfit_one_batch
def test_overfit_accuracy_is_read_against_what_the_model_loss_scores():
    """A shifting model's labels[t] is not what logits[t] is scored against: accuracy against
    the labels' layout would stay near chance on a memorised batch."""
    ids = _tokens()
    result = gradhunt.overfit_one_batch(AttentionLM(masked=True), read_loss,
                                        {"input_ids": ids, "labels": ids}, ids)
    assert result.passed and result.accuracies[-1] > 0.8, result
    logits = AttentionLM(masked=True)(ids)[1]
    assert (logits.argmax(-1) == ids).float().mean() < 0.5   # the labels' layout says otherwise


# ------------------------------------------------------------------ the Monitor
def _train(model, *, steps=12, every=5, outside=None):
    """A plain loop calling ``model(input_ids=, labels=)``, ``read_loss(out).backward()``;
    ``outside``: a loss on the logits computed by the loop instead (no labels= given)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    with gradhunt.Monitor(model, optimizer, every=every) as monitor:
        for step in range(steps):
            ids = _tokens(seed=step)
            if outside is None:
                loss = read_loss(model(input_ids=ids, labels=ids), ids)
            else:
                loss = outside(model(input_ids=ids).logits, ids)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return monitor.report()


def _alarms(report):
    return [(f.code, f.location) for f in report.findings if f.severity in ("warning", "error")]


@pytest.mark.parametrize("returns", ["dataclass", "tuple"])
def test_the_monitor_names_unshifted_labels_inside_forward(returns):
    report = _train(GRULM(offset=0, returns=returns))
    assert _alarms(report)[0] == ("TARGETS_MISALIGNED", "model"), report
    assert _train(GRULM(offset=1, returns=returns)).findings == []


def test_the_monitor_names_unshifted_labels_of_a_loss_outside_forward():
    def unshifted(logits, labels):
        return F.cross_entropy(logits.reshape(-1, VOCAB), labels.reshape(-1))
    report = _train(GRULM(), outside=unshifted)
    [finding] = [f for f in report.findings if f.code == "TARGETS_MISALIGNED"]
    assert finding.location == "loss" and finding.evidence["offset"] == 0


def test_a_model_that_sees_the_whole_sequence_and_reconstructs_it_is_no_language_model():
    """A bidirectional model scored against its own input tokens (an autoencoder): not
    causal, so its targets are not judged."""
    assert _train(GRULM(offset=0, bidirectional=True)).findings == []


def test_the_monitor_names_a_missing_causal_mask_and_leaves_a_masked_model_quiet():
    report = _train(AttentionLM(masked=False))
    assert _alarms(report)[0] == ("CAUSALITY_LEAK", "attn"), report
    assert _train(AttentionLM(masked=True)).findings == []


def test_the_monitor_leaves_gpt2_shifting_internally_quiet_and_its_weights_as_trained():
    model = _gpt2()
    report = _train(model, steps=6)
    assert _alarms(report) == [], report
    twin = _gpt2()
    optimizer = torch.optim.Adam(twin.parameters(), lr=1e-2)
    for step in range(6):      # the same loop without a Monitor: the same weights
        ids = _tokens(seed=step)
        loss = twin(input_ids=ids, labels=ids).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(),
                                                 twin.state_dict().values()))


# ------------------------------------------------------------------ gradhunt watch
SCRIPT = textwrap.dedent("""
    import sys
    from dataclasses import dataclass
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(0)
    shift = sys.argv[1] == "shift"

    @dataclass
    class Out:
        loss: torch.Tensor
        logits: torch.Tensor

    class LM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(12, 16)
            self.gru = torch.nn.GRU(16, 16, batch_first=True)
            self.head = torch.nn.Linear(16, 12)

        def forward(self, input_ids, labels):
            logits = self.head(self.gru(self.embed(input_ids))[0])
            scored, targets = (logits[:, :-1], labels[:, 1:]) if shift else (logits, labels)
            return Out(F.cross_entropy(scored.reshape(-1, 12), targets.reshape(-1)), logits)

    model = LM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(20):
        ids = torch.randint(0, 12, (16, 10))
        out = model(input_ids=ids, labels=ids)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    print("script done")
""")


@pytest.mark.parametrize("mode", ["shift", "no_shift"])
def test_gradhunt_watch_names_unshifted_labels_in_an_unchanged_script(tmp_path, mode):
    path = tmp_path / "train.py"
    path.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-m", "scenarios.cli", "watch", "--every", "5",
                          str(path), mode], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0 and "script done" in run.stdout, run.stderr
    named = "[error] TARGETS_MISALIGNED at model" in run.stderr
    assert named == (mode == "no_shift"), run.stderr
