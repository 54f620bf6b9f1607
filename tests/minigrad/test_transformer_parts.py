"""The parts of a transformer beyond the op registry: attention dropout, weight tying,
Embedding and CrossEntropyLoss modules with torch's defaults and names."""
import numpy as np
import pytest
import torch

import minigrad as mg
import minigrad.functional as F

RNG = np.random.default_rng(0)


def _qkv(shape=(2, 5, 4)):
    return [mg.tensor(RNG.standard_normal(shape), requires_grad=True) for _ in range(3)]


def test_attention_dropout_reapplies_its_mask_in_backward():
    """With dropout, the output is ``(P * mask) @ v``: v's gradient must be ``(P * mask).T @ g``
    with the very mask of forward (finite differences with the generator reseeded agree)."""
    q, k, v = _qkv()
    mg.manual_seed(5)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4, is_causal=True)
    upstream = RNG.standard_normal(out.shape)
    out.backward(upstream)
    step = 1e-6
    for which, index in ((0, (1, 2, 3)), (1, (0, 1, 0)), (2, (1, 4, 2))):
        values = []
        for shift in (step, -step):
            data = [x.data.copy() for x in (q, k, v)]
            data[which][index] += shift
            mg.manual_seed(5)
            with mg.no_grad():
                shifted = F.scaled_dot_product_attention(*map(mg.tensor, data), dropout_p=0.4,
                                                         is_causal=True)
            values.append(np.sum(shifted.data * upstream))
        assert (q, k, v)[which].grad[index] == pytest.approx((values[0] - values[1]) / (2 * step),
                                                   rel=1e-6, abs=1e-9)


def test_attention_dropout_drops_weights_and_keeps_the_expectation():
    q, k, v = (mg.tensor(np.zeros((1, 200, 3))), mg.tensor(np.zeros((1, 200, 3))),
               mg.tensor(np.ones((1, 200, 1))))
    mg.manual_seed(0)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5).data.ravel()
    assert out.mean() == pytest.approx(1.0, abs=0.05)   # uniform weights, half kept, doubled
    assert out.std() > 0.05
    same = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0).data
    np.testing.assert_allclose(same, 1.0)


def test_attention_rejects_mask_and_causal_together_and_bad_dropout():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, k, v, attn_mask=mg.tensor(np.ones((5, 5), bool)),
                                       is_causal=True)
    with pytest.raises(ValueError, match="between 0 and 1"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=1.5)
    with pytest.raises(mg.ShapeError, match="scaled_dot_product_attention"):
        F.scaled_dot_product_attention(q, mg.tensor(np.zeros((2, 5, 3))), v)


class _Tied:
    """An embedding and an output layer sharing one weight, in either framework."""

    def __init__(self, nn):
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = nn.Embedding(6, 4)
                self.norm = nn.LayerNorm(4)
                self.head = nn.Linear(4, 6, bias=False)
                self.head.weight = self.wte.weight

            def forward(self, idx):
                return self.head(self.norm(self.wte(idx)))

        self.model = Model()


def test_tied_weight_is_one_parameter_whose_gradient_sums_both_uses():
    model, twin = _Tied(mg.nn).model.double(), _Tied(torch.nn).model.double()
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in twin.named_parameters()]
    assert list(model.state_dict()) == list(twin.state_dict())   # tied: listed under both names
    twin.load_state_dict({k: torch.from_numpy(v.data.copy()) for k, v in
                          model.state_dict().items()})
    model.load_state_dict(twin.state_dict())
    idx = np.array([[0, 3, 3, 5], [1, 1, 1, 2]])
    targets = np.array([[3, 3, 0, 1], [2, 5, 4, 1]])
    loss = F.cross_entropy(model(mg.tensor(idx)).reshape(-1, 6), mg.tensor(targets.ravel()))
    twin_loss = torch.nn.functional.cross_entropy(twin(torch.from_numpy(idx)).reshape(-1, 6),
                                                  torch.from_numpy(targets.ravel()))
    loss.backward()
    twin_loss.backward()
    assert model.head.weight is model.wte.weight
    np.testing.assert_allclose(model.wte.weight.grad, twin.wte.weight.grad.numpy(), rtol=1e-10,
                               atol=1e-13)
    # both uses contribute: the embedding alone would leave rows 4 (never looked up) at zero
    assert np.abs(model.wte.weight.grad[4]).sum() > 0
    optimizer = mg.optim.AdamW(model.parameters(), lr=0.1)
    assert sum(len(g["params"]) for g in optimizer.param_groups) == 3   # shared weight once


def test_embedding_module_matches_torchs_defaults_and_errors():
    mg.manual_seed(0)
    layer = mg.nn.Embedding(1000, 8)
    assert layer.weight.shape == (1000, 8) and repr(layer) == "Embedding(1000, 8)"
    assert layer.weight.data.std() == pytest.approx(1.0, abs=0.05)    # N(0, 1), as torch
    with pytest.raises(IndexError, match=r"\[0, 1000\)"):
        layer(mg.tensor(np.array([1000])))
    with pytest.raises(TypeError, match="integers"):
        layer(mg.tensor(np.array([1.0])))


@pytest.mark.parametrize("options", [{}, {"ignore_index": 2}, {"label_smoothing": 0.1},
                                     {"ignore_index": -100, "label_smoothing": 0.3,
                                      "reduction": "sum"}])
def test_cross_entropy_loss_module_takes_torchs_options(options):
    logits = RNG.standard_normal((6, 4))
    targets = np.array([0, 2, options.get("ignore_index", -100), 3, 2, 1])
    loss = mg.nn.CrossEntropyLoss(**options)(mg.tensor(logits), mg.tensor(targets))
    expected = torch.nn.CrossEntropyLoss(**options)(torch.from_numpy(logits),
                                                    torch.from_numpy(targets))
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
