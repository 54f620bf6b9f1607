"""``check_batch_independence``'s probes beyond the first input: mixing through any batched
input, the permutation probe (BATCH_POSITION_DEPENDENT) and the padding probe
(PADDING_CHANGES_OUTPUT), quiet on their healthy twins; bad arguments name the argument."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
nn = torch.nn

from diagnostics import DiagnosticsError  # noqa: E402
from diagnostics.tools.batch_independence import check_batch_independence  # noqa: E402
from diagnostics.tools.batch_permutation import derangement  # noqa: E402


def _codes(result):
    return [f.code for f in result]


class TwoInputs(nn.Module):
    """Image-like features and metadata; ``mix``: the metadata standardised over the batch."""

    def __init__(self, mix):
        super().__init__()
        self.mix = mix
        self.a, self.b = nn.Linear(5, 4), nn.Linear(3, 4)
        self.head = nn.Linear(8, 2)

    def forward(self, features, meta):
        if self.mix:
            meta = (meta - meta.mean(0)) / (meta.std(0) + 1e-5)
        return self.head(torch.cat([self.a(features), self.b(meta)], dim=1))


@pytest.mark.parametrize("as_tuple", [False, True])
def test_mixing_through_a_second_input_is_named_at_that_input(as_tuple):
    torch.manual_seed(0)
    x, m = torch.randn(6, 5), torch.randn(6, 3)
    inputs = (x, m) if as_tuple else {"features": x, "meta": m}
    (finding,) = check_batch_independence(TwoInputs(mix=True), inputs)
    assert finding.code == "BATCH_MIXING"
    assert finding.evidence["input"] == (1 if as_tuple else "meta")
    assert ("positional input 1" if as_tuple else "'meta'") in finding.message
    assert check_batch_independence(TwoInputs(mix=False), inputs) == []


class TwoTowers(nn.Module):
    """Two token inputs, each through its own embedding; ``mix``: softmax over the batch in
    the second tower."""

    def __init__(self, mix):
        super().__init__()
        self.mix = mix
        self.q, self.d = nn.Embedding(20, 6), nn.Embedding(20, 6)

    def forward(self, query_ids, doc_ids):
        d = self.d(doc_ids)
        w = d.sum(-1).softmax(dim=0 if self.mix else 1)
        return (self.q(query_ids).mean(1) * (w.unsqueeze(-1) * d).sum(1)).sum(-1)


def test_token_inputs_are_probed_at_the_embeddings_they_feed():
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 20, (5, 4)))
    inputs = {"query_ids": ids, "doc_ids": ids.flip(0)}
    torch.manual_seed(0)
    (finding,) = check_batch_independence(TwoTowers(mix=True), inputs)
    assert finding.code == "BATCH_MIXING" and finding.evidence["input"] == "doc_ids"
    assert check_batch_independence(TwoTowers(mix=False), inputs) == []


class RowBias(nn.Module):
    """A bias per batch row (``zeros(rows, width)``) where one per unit was meant."""

    def __init__(self, per_row, rows=16):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.bias = nn.Parameter(torch.randn(rows, 3) if per_row else torch.randn(3))
        self.per_row = per_row

    def forward(self, x):
        return self.fc(x) + (self.bias[: x.shape[0]] if self.per_row else self.bias)


class ArangePositions(nn.Module):
    """Positions looked up with ``arange(x.size(0))`` (the batch) on a batch-first input."""

    def __init__(self, seq_first_bug):
        super().__init__()
        self.bug = seq_first_bug
        self.tok, self.pos = nn.Embedding(10, 8), nn.Embedding(32, 8)
        self.head = nn.Linear(8, 2)

    def forward(self, ids):
        if self.bug:
            pos = self.pos(torch.arange(ids.size(0))).unsqueeze(1)
        else:
            pos = self.pos(torch.arange(ids.size(1))).unsqueeze(0)
        return self.head((self.tok(ids) + pos).mean(1))


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(3, 16), seed=st.integers(0, 10_000))
def test_a_per_row_bias_is_position_dependent_for_any_permutation(rows, seed):
    torch.manual_seed(seed)
    x = torch.randn(rows, 4)
    found = check_batch_independence(RowBias(per_row=True), x, seed=seed)
    assert _codes(found) == ["BATCH_POSITION_DEPENDENT"], found
    assert found[0].severity == "error" and found[0].evidence["from_row"] != \
        found[0].evidence["to_row"]
    assert check_batch_independence(RowBias(per_row=False), x, seed=seed) == []


@settings(max_examples=10, deadline=None)
@given(rows=st.integers(3, 12), seed=st.integers(0, 10_000))
def test_positions_indexed_by_the_batch_are_named_and_the_fix_is_quiet(rows, seed):
    torch.manual_seed(seed)
    ids = torch.randint(0, 10, (rows, 5))
    assert _codes(check_batch_independence(ArangePositions(True), ids, seed=seed)) == [
        "BATCH_POSITION_DEPENDENT"]
    assert check_batch_independence(ArangePositions(False), ids, seed=seed) == []


@given(size=st.integers(2, 40), seed=st.integers(0, 10_000))
def test_derangements_move_every_item(size, seed):
    order = derangement(np.random.default_rng(seed), size)
    assert sorted(order) == list(range(size)) and all(order != np.arange(size))


def test_mixing_without_a_gradient_path_is_batch_mixing_not_position():
    torch.manual_seed(0)
    mask = torch.ones(6, 5, dtype=torch.long)
    for i, length in enumerate([5, 4, 3, 2, 5, 1]):
        mask[i, length:] = 0
    x = torch.randn(6, 5, 4)

    class RunningShare(nn.Module):
        """Each example scaled by the real positions of the rows before it (a cumsum over
        the batch of an integer mask: no gradient path)."""

        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 2)

        def forward(self, x, mask):
            before = mask.float().sum(1).cumsum(0) / 10
            return self.fc(x.mean(1)) * (1 + before).unsqueeze(1)

    found = check_batch_independence(RunningShare(), {"x": x, "mask": mask})
    assert _codes(found) == ["BATCH_MIXING"] and "no input gradient" in found[0].message


def test_a_forward_that_samples_in_eval_mode_is_not_judged_by_comparing_outputs():
    class Noisy(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            return self.fc(x) + torch.randn(x.shape[0], 3)

    model, x = Noisy(), torch.randn(5, 4)
    rng = torch.random.get_rng_state()
    result = check_batch_independence(model, x)
    assert result == [] and "not judged" in result.note
    assert torch.equal(rng, torch.random.get_rng_state())


class Pooler(nn.Module):
    """Token ids + attention mask -> one prediction per example; ``masked`` pools over the
    real positions only; ``kind``: 'mean', 'gru' (last step at -1), 'attention'."""

    def __init__(self, masked, kind="mean"):
        super().__init__()
        self.masked, self.kind = masked, kind
        self.emb = nn.Embedding(12, 8, padding_idx=0)
        self.gru = nn.GRU(8, 8, batch_first=True)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, input_ids, attention_mask):
        h = self.emb(input_ids)
        m = attention_mask.unsqueeze(-1).to(h.dtype)
        if self.kind == "gru":
            out, _ = self.gru(h)
            last = attention_mask.sum(1) - 1
            pooled = out[torch.arange(len(out)), last] if self.masked else out[:, -1]
        elif self.kind == "attention":
            pad = (attention_mask == 0) if self.masked else None
            out, _ = self.attn(h, h, h, key_padding_mask=pad, need_weights=False)
            pooled = (out * m).sum(1) / m.sum(1)
        else:
            pooled = (h * m).sum(1) / m.sum(1) if self.masked else h.mean(1)
        return self.head(pooled)


def _padded_batch(lengths, seed):
    gen = np.random.default_rng(seed)
    ids = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, length in enumerate(lengths):
        ids[i, :length] = torch.from_numpy(gen.integers(1, 12, length))
        mask[i, :length] = 1
    return {"input_ids": ids, "attention_mask": mask}


@settings(max_examples=15, deadline=None)
@given(lengths=st.lists(st.integers(1, 9), min_size=2, max_size=6),
       kind=st.sampled_from(["mean", "gru", "attention"]), seed=st.integers(0, 1000))
def test_padding_changes_an_unmasked_pooling_and_not_a_masked_one(lengths, kind, seed):
    torch.manual_seed(seed)
    batch = _padded_batch(lengths, seed)
    found = check_batch_independence(Pooler(False, kind), batch, pad_value=0)
    assert _codes(found) == ["PADDING_CHANGES_OUTPUT"], (kind, found)
    assert found[0].severity == "warning" and found[0].evidence["change"] > \
        found[0].evidence["tolerance"]
    assert check_batch_independence(Pooler(True, kind), batch, pad_value=0) == []


class Tagger(nn.Module):
    """One output per position, a key padding mask in torch's convention (True = padding);
    ``norm_over_time``: the features standardised over every position, pads included."""

    def __init__(self, norm_over_time):
        super().__init__()
        self.norm = norm_over_time
        self.inp = nn.Linear(3, 8)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.out = nn.Linear(8, 2)

    def forward(self, frames, padding_mask):
        if self.norm:
            frames = (frames - frames.mean(1, keepdim=True)) / (frames.std(1, keepdim=True)
                                                                + 1e-5)
        h = self.inp(frames)
        h, _ = self.attn(h, h, h, key_padding_mask=padding_mask, need_weights=False)
        return self.out(h)


def test_per_position_outputs_are_compared_at_the_examples_own_positions():
    torch.manual_seed(0)
    lengths = [6, 4, 2, 5]
    frames = torch.zeros(4, 6, 3)
    padding = torch.ones(4, 6, dtype=torch.bool)
    for i, length in enumerate(lengths):
        frames[i, :length] = torch.randn(length, 3)
        padding[i, :length] = False
    inputs = {"frames": frames, "padding_mask": padding}
    assert check_batch_independence(Tagger(False), inputs, pad_value=0.0) == []
    (finding,) = check_batch_independence(Tagger(True), inputs, pad_value=0.0)
    assert finding.code == "PADDING_CHANGES_OUTPUT" and finding.evidence["per_position"]
    assert finding.evidence["padded_inputs"]["padding_mask"] is True   # True = padding


def test_padding_leaves_the_model_and_the_rng_as_they_were():
    torch.manual_seed(0)
    model = Pooler(False).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batch = _padded_batch([3, 5, 2], 0)
    saved = {k: v.clone() for k, v in batch.items()}
    rng = torch.random.get_rng_state()
    assert _codes(check_batch_independence(model, batch, pad_value=0)) == [
        "PADDING_CHANGES_OUTPUT"]
    assert model.training and all(torch.equal(before[k], v)
                                  for k, v in model.state_dict().items())
    assert all(torch.equal(saved[k], v) for k, v in batch.items())
    assert torch.equal(rng, torch.random.get_rng_state())


def test_a_model_that_cannot_take_longer_sequences_is_noted_not_judged():
    class Fixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(5, 2)

        def forward(self, x):
            return self.fc(x.view(x.shape[0], 5))          # exactly 5 positions

    result = check_batch_independence(Fixed(), torch.randn(3, 5), pad_value=0.0)
    assert result == [] and "padding not judged" in result.note and "RuntimeError" in \
        result.note


def test_bad_arguments_name_the_argument():
    model = nn.Linear(4, 2)
    with pytest.raises(DiagnosticsError, match="pad_value"):
        check_batch_independence(model, torch.randn(3, 4), pad_value="0")
    with pytest.raises(DiagnosticsError, match="pad_value"):
        check_batch_independence(model, torch.randn(3), pad_value=0)   # no positions axis
    with pytest.raises(DiagnosticsError, match="causal"):
        check_batch_independence(model, torch.randn(3, 4), causal="yes")
    with pytest.raises(DiagnosticsError, match="seed"):
        check_batch_independence(model, torch.randn(3, 4), seed=0.5)
    with pytest.raises(DiagnosticsError, match="inputs"):
        check_batch_independence(model, (1, 2))
    with pytest.raises(DiagnosticsError, match="inputs"):
        check_batch_independence(model, {"x": torch.randn(1, 4)})


def test_preflight_passes_pad_value_to_its_batch_independence_item():
    from diagnostics import preflight

    torch.manual_seed(0)
    batch = _padded_batch([3, 6, 2, 5], 1)
    labels = torch.tensor([0, 1, 2, 1])

    def loss(out, y):
        return nn.functional.cross_entropy(out, y)

    def item(model, **options):
        report = preflight(model, loss, batch, labels, **options)
        return next(i for i in report.items if i.name == "batch independence")

    buggy = item(Pooler(False), pad_value=0)
    assert [f.code for f in buggy.findings] == ["PADDING_CHANGES_OUTPUT"], buggy
    assert not item(Pooler(False)).findings                   # no padding test without it
    assert item(Pooler(True), pad_value=0).status == "PASS"
    with pytest.raises(DiagnosticsError, match="pad_value"):
        preflight(Pooler(True), loss, batch, labels, pad_value="pad")
