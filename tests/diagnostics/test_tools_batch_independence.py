"""``check_batch_independence``: mixing across the batch, leaks from the future, and quiet on
healthy models (batch norm, dropout, a causal transformer); the model is left as it was."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
nn = torch.nn

from diagnostics import DiagnosticsError  # noqa: E402
from diagnostics.tools.batch_independence import check_batch_independence  # noqa: E402


class SoftmaxOverBatch(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim
        self.fc = nn.Linear(6, 3)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=self.dim)


class Recurrent(nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.rnn = nn.GRU(4, 8, batch_first=batch_first)
        self.head = nn.Linear(8, 2)

    def forward(self, x):                      # x: (batch, seq, features)
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class TinyLM(nn.Module):
    def __init__(self, causal, diagonal=1):
        super().__init__()
        self.causal, self.diagonal = causal, diagonal
        self.embed = nn.Embedding(11, 16)
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.2, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 11)

    def forward(self, ids):
        steps = ids.shape[1]
        mask = None
        if self.causal:
            mask = torch.triu(torch.full((steps, steps), float("-inf")), diagonal=self.diagonal)
        return self.head(self.blocks(self.embed(ids), mask=mask))


def _tokens():
    return torch.from_numpy(np.random.default_rng(0).integers(0, 11, (3, 7)))


def test_healthy_batchnorm_dropout_mlp_in_train_mode_is_quiet_and_left_untouched():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.5),
                          nn.Linear(16, 3))
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(8, 6)
    rng_before = torch.random.get_rng_state()
    assert check_batch_independence(model, x) == []
    assert model.training and all(m.training for m in model.modules())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.grad is None for p in model.parameters()) and x.grad is None
    assert torch.equal(rng_before, torch.random.get_rng_state())
    assert all(not m._forward_hooks for m in model.modules())


def test_softmax_over_the_batch_is_batch_mixing():
    findings = check_batch_independence(SoftmaxOverBatch(0), torch.randn(5, 6))
    assert [f.code for f in findings] == ["BATCH_MIXING"]
    assert findings[0].severity == "error" and findings[0].evidence["leak"] > 1e-3
    assert check_batch_independence(SoftmaxOverBatch(1), torch.randn(5, 6)) == []


def test_rnn_fed_batch_first_without_the_flag_names_the_rnn():
    torch.manual_seed(0)
    x = torch.randn(4, 5, 4)
    findings = check_batch_independence(Recurrent(batch_first=False), x)
    assert [f.code for f in findings] == ["BATCH_MIXING"] and findings[0].location == "rnn"
    assert check_batch_independence(Recurrent(batch_first=True), x) == []


def test_causal_transformer_is_quiet_and_a_missing_or_shifted_mask_leaks():
    torch.manual_seed(0)
    assert check_batch_independence(TinyLM(causal=True), _tokens(), causal=True) == []
    for model in (TinyLM(causal=False), TinyLM(causal=True, diagonal=2)):
        findings = check_batch_independence(model, _tokens(), causal=True)
        assert [f.code for f in findings] == ["CAUSALITY_LEAK"]
        assert findings[0].location.endswith("self_attn")
        assert findings[0].evidence["future_position"] > findings[0].evidence["position"]


def test_a_non_causal_model_is_not_judged_for_causality_unless_declared():
    torch.manual_seed(0)
    assert check_batch_independence(TinyLM(causal=False), _tokens()) == []


def test_tuple_and_dict_outputs_pick_the_prediction():
    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return {"logits": torch.softmax(self.fc(x), dim=0), "aux": x.sum()}

    findings = check_batch_independence(Pair(), torch.randn(4, 6))
    assert [f.code for f in findings] == ["BATCH_MIXING"]


def test_bad_arguments_raise_diagnostics_errors():
    model = nn.Linear(6, 3)
    with pytest.raises(DiagnosticsError, match="inputs"):
        check_batch_independence(model, torch.randn(1, 6))
    with pytest.raises(DiagnosticsError, match="inputs"):
        check_batch_independence(model, np.zeros((4, 6)))
    with pytest.raises(DiagnosticsError, match="inputs"):
        check_batch_independence(model, torch.randn(4), causal=True)
    with pytest.raises(DiagnosticsError, match="model"):
        check_batch_independence(object(), torch.randn(4, 6))


def test_an_exception_in_the_users_forward_is_quoted():
    class Broken(nn.Module):
        def forward(self, x):
            raise RuntimeError("shape mismatch in my layer")

    with pytest.raises(DiagnosticsError, match="shape mismatch in my layer"):
        check_batch_independence(Broken(), torch.randn(3, 2))


def test_a_forward_that_only_works_in_float32_is_checked_in_float32():
    class Float32Only(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.dim = dim
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            h = self.fc(x) @ torch.eye(3)              # a float32 constant made in forward
            return torch.softmax(h, dim=self.dim)

    x = torch.randn(4, 6)
    assert check_batch_independence(Float32Only(1), x) == []
    assert [f.code for f in check_batch_independence(Float32Only(0), x)] == ["BATCH_MIXING"]


@given(rows=st.integers(2, 9), width=st.integers(1, 12), norm=st.sampled_from(
    ["batch", "layer", "none"]), seed=st.integers(0, 1000))
def test_healthy_per_example_models_are_never_flagged(rows, width, norm, seed):
    torch.manual_seed(seed)
    layers = [nn.Linear(5, width)]
    layers += {"batch": [nn.BatchNorm1d(width)], "layer": [nn.LayerNorm(width)],
               "none": []}[norm]
    layers += [nn.GELU(), nn.Dropout(0.3), nn.Linear(width, 3)]
    model = nn.Sequential(*layers)
    assert check_batch_independence(model, torch.randn(rows, 5)) == []


@given(rows=st.integers(2, 9), seed=st.integers(0, 1000))
def test_normalising_over_the_batch_is_always_flagged(rows, seed):
    torch.manual_seed(seed)

    class BatchStandardise(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(5, 3)

        def forward(self, x):
            h = self.fc(x)
            return (h - h.mean(0)) / (h.std(0, unbiased=False) + 1e-3)

    findings = check_batch_independence(BatchStandardise(), torch.randn(rows, 5))
    assert [f.code for f in findings] == ["BATCH_MIXING"]


def test_inplace_activations_do_not_break_the_check():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(inplace=True), nn.Linear(8, 3))
    assert check_batch_independence(model, torch.randn(4, 6)) == []
    mixing = nn.Sequential(nn.Linear(6, 8), nn.ReLU(inplace=True), SoftmaxOverBatch(0))
    mixing[2].fc = nn.Linear(8, 3)
    assert [f.code for f in check_batch_independence(mixing, torch.randn(4, 6))] == [
        "BATCH_MIXING"]


class KeywordEncoder(nn.Module):
    """A Hugging Face-style signature: ``forward(input_ids, attention_mask)``, a dict out; the
    pads are masked in attention and in the mean. ``mix``: the batch and positions swapped
    with a view before attention (the batch mixes)."""

    def __init__(self, mix=False, causal=True):
        super().__init__()
        self.mix, self.causal = mix, causal
        self.embed = nn.Embedding(11, 16, padding_idx=0)
        self.attn = nn.MultiheadAttention(16, 2, batch_first=True)
        self.head = nn.Linear(16, 11)

    def forward(self, input_ids, attention_mask):
        h = self.embed(input_ids)
        if self.mix:
            h = h.view(h.shape[1], h.shape[0], -1).transpose(0, 1).contiguous().view_as(h)
        steps = h.shape[1]
        future = torch.triu(torch.ones(steps, steps, dtype=torch.bool), 1) if self.causal \
            else None
        out, _ = self.attn(h, h, h, key_padding_mask=attention_mask == 0, attn_mask=future,
                           need_weights=False)
        return {"logits": self.head(out)}


def _keyword_batch():
    ids = torch.from_numpy(np.random.default_rng(1).integers(1, 11, (3, 6)))
    mask = torch.ones_like(ids)
    ids[:, 5:], mask[:, 5:] = 0, 0
    return {"input_ids": ids, "attention_mask": mask}


def test_keyword_inputs_are_probed_on_input_ids_with_the_rest_passed_along():
    """A dict of keyword inputs (input_ids, attention_mask): the examples of input_ids are
    probed, the mask rides along; a healthy causal encoder is quiet, a batch-mixing view is
    named, and preflight no longer skips the item for keyword inputs."""
    from diagnostics import preflight

    torch.manual_seed(0)
    batch = _keyword_batch()
    assert check_batch_independence(KeywordEncoder(), batch, causal=True) == []
    (finding,) = check_batch_independence(KeywordEncoder(mix=True), batch)
    assert finding.code == "BATCH_MIXING"
    (leak,) = check_batch_independence(KeywordEncoder(causal=False), batch, causal=True)
    assert leak.code == "CAUSALITY_LEAK"
    labels = batch["input_ids"]
    report = preflight(KeywordEncoder(mix=True), lambda out, y: nn.functional.cross_entropy(
        out["logits"].reshape(-1, 11), y.reshape(-1)), batch, labels)
    item = next(i for i in report.items if i.name == "batch independence")
    assert item.status == "FAIL" and [f.code for f in item.findings] == ["BATCH_MIXING"]
    with pytest.raises(DiagnosticsError, match="inputs: expected a torch.Tensor batch, or a dict"):
        check_batch_independence(KeywordEncoder(), {"input_ids": [1, 2]})
