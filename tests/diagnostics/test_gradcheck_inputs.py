"""Bad input gets a clear DiagnosticsError before any work starts, naming the argument."""
import numpy as np
import pytest
import torch

import minigrad
from diagnostics import DiagnosticsError, check_gradients

from .gradcheck_models import FRAMEWORKS, build, one_torch_thread


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


@pytest.fixture(params=FRAMEWORKS)
def setup(request):
    return request.param, build(request.param, "mlp")


def _counting(loss_fn):
    calls = []

    def loss(output, targets):
        calls.append(1)
        return loss_fn(output, targets)

    return loss, calls


def test_not_a_module():
    with pytest.raises(DiagnosticsError, match="model: expected a torch.nn.Module or a minigrad"):
        check_gradients(lambda x: x, torch.nn.MSELoss(), np.ones((2, 3)), np.ones((2, 3)))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_model_without_parameters(framework):
    nn = torch.nn if framework == "torch" else minigrad.nn
    with pytest.raises(DiagnosticsError, match="model: expected a module with parameters"):
        check_gradients(nn.Sequential(nn.ReLU()), nn.MSELoss(), np.ones((2, 3)), np.ones((2, 3)))


def test_frozen_parameters_count_as_none():
    model = torch.nn.Linear(3, 2).requires_grad_(False)
    with pytest.raises(DiagnosticsError, match="parameters that require grad"):
        check_gradients(model, torch.nn.MSELoss(), np.ones((2, 3)), np.ones((2, 2)))


@pytest.mark.parametrize("options, message", [
    ({"mode": "fast"}, "mode: expected one of"),
    ({"eps": 0.0}, "eps: expected a number in"),
    ({"rtol": -1.0}, "rtol: expected a number >= 0"),
    ({"probes": 0}, "probes: expected an int >= 1"),
    ({"max_elements": 2.5}, "max_elements: expected an int >= 1"),
    ({"seed": -3}, "seed: expected an int >= 0"),
])
def test_bad_options(setup, options, message):
    _, (model, loss_fn, inputs, targets) = setup
    loss, calls = _counting(loss_fn)
    with pytest.raises(DiagnosticsError, match=message):
        check_gradients(model, loss, inputs, targets, **options)
    assert calls == []


def test_empty_batch(setup):
    _, (model, loss_fn, inputs, targets) = setup
    loss, calls = _counting(loss_fn)
    with pytest.raises(DiagnosticsError, match=r"inputs: expected a non-empty batch.*\(0, 6\)"):
        check_gradients(model, loss, inputs[:0], targets[:0])
    assert calls == []


def test_inputs_of_the_wrong_framework(setup):
    framework, (model, loss_fn, inputs, targets) = setup
    other = minigrad.tensor(inputs) if framework == "torch" else torch.tensor(inputs)
    with pytest.raises(DiagnosticsError, match=f"inputs: expected a {framework} tensor, a NumPy "
                                               f"array, or a tuple of them, got"):
        check_gradients(model, loss_fn, other, targets)
    with pytest.raises(DiagnosticsError, match="inputs: expected"):
        check_gradients(model, loss_fn, inputs.tolist(), targets)


def test_targets_of_the_wrong_shape(setup):
    """The loss is the authority: the layout is named when loss_fn raises on the targets."""
    _, (model, loss_fn, inputs, targets) = setup
    with pytest.raises(DiagnosticsError, match=r"targets: expected class indices of shape "
                                               r"\(5,\) for a model output of shape "
                                               r"\(5, 3\).*loss_fn raised"):
        check_gradients(model, loss_fn, inputs, targets.reshape(5, 1))
    with pytest.raises(DiagnosticsError, match=r"targets: expected shape \(5, 3\)"):
        check_gradients(model, loss_fn, inputs, np.zeros(5, dtype=np.float32))


def test_loss_not_scalar(setup):
    framework, (model, _, inputs, targets) = setup
    with pytest.raises(DiagnosticsError, match=r"loss_fn: expected a scalar loss.*\(5, 3\)"):
        check_gradients(model, lambda output, t: output * 2, inputs, None)


def test_loss_not_a_tensor_or_detached(setup):
    framework, (model, loss_fn, inputs, targets) = setup
    with pytest.raises(DiagnosticsError, match="loss_fn: expected to return a"):
        check_gradients(model, lambda output, t: float(loss_fn(output, t).item()), inputs,
                        targets)
    with pytest.raises(DiagnosticsError, match="requires_grad"):
        check_gradients(model, lambda output, t: loss_fn(output.detach(), t), inputs, targets)


def test_loss_fn_not_callable_or_of_another_framework(setup):
    framework, (model, _, inputs, targets) = setup
    with pytest.raises(DiagnosticsError, match="loss_fn: expected a callable"):
        check_gradients(model, "cross_entropy", inputs, targets)
    other = minigrad.nn.CrossEntropyLoss() if framework == "torch" else torch.nn.CrossEntropyLoss()
    with pytest.raises(DiagnosticsError, match="loss_fn: expected a loss of the model's framework"):
        check_gradients(model, other, inputs, targets)


def test_loss_that_raises_is_named(setup):
    _, (model, _, inputs, targets) = setup

    def broken(output, t):
        raise KeyError("no such loss")

    with pytest.raises(DiagnosticsError, match="loss_fn: .* raised KeyError"):
        check_gradients(model, broken, inputs, targets)


def test_inputs_the_model_cannot_take(setup):
    _, (model, loss_fn, inputs, targets) = setup
    with pytest.raises(DiagnosticsError, match="inputs: expected what the model's forward takes"):
        check_gradients(model, loss_fn, inputs[:, :4], targets)


def test_nondeterministic_model_is_refused():
    class Noisy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 2)
            self.noise = np.random.default_rng(0)   # a private generator the check cannot rewind

        def forward(self, x):
            return self.fc(x) + float(self.noise.standard_normal())

    with pytest.raises(DiagnosticsError, match="deterministic"):
        check_gradients(Noisy(), torch.nn.MSELoss(), np.ones((2, 3)), np.ones((2, 2)))


class _LayersInAList(torch.nn.Module):
    """A real bug: the hidden layers live in a plain list, unregistered (float32 in the copy)."""

    def __init__(self):
        super().__init__()
        self.inp, self.out = torch.nn.Linear(6, 8), torch.nn.Linear(8, 2)
        self.blocks = [torch.nn.Linear(8, 8)]

    def forward(self, x):
        h = torch.relu(self.inp(x))
        for block in self.blocks:
            h = torch.relu(block(h))
        return self.out(h)


def test_weights_outside_the_model_are_named_not_the_inputs_or_targets():
    """A layer in a plain list or a discriminator inside loss_fn stays float32 in the float64
    copy; the error used to blame the inputs ("expected what the model's forward takes") or
    the targets' shape."""
    torch.manual_seed(0)
    x, y = torch.randn(4, 6), torch.tensor([0, 1, 1, 0])
    with pytest.raises(DiagnosticsError, match="plain Python list") as raised:
        check_gradients(_LayersInAList(), torch.nn.functional.cross_entropy, x, y)
    assert "the model's forward" in str(raised.value) and "inputs:" not in str(raised.value)
    discriminator, generator = torch.nn.Linear(6, 1), torch.nn.Linear(3, 6)

    def generator_loss(fake, _):
        return torch.nn.functional.binary_cross_entropy_with_logits(
            discriminator(fake), torch.ones(len(fake), 1))
    with pytest.raises(DiagnosticsError, match="held by loss_fn") as raised:
        check_gradients(generator, generator_loss, torch.randn(4, 3), torch.zeros(4))
    assert "targets:" not in str(raised.value)


def test_a_dict_of_targets_reaches_the_loss_whole_in_every_tool():
    """A multi-task loss takes its targets by name: check_gradients, overfit_one_batch and
    preflight hand the dict to loss_fn as it is (arrays converted, other entries untouched)."""
    from diagnostics import overfit_one_batch, preflight

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 6)).astype(np.float32)
    targets = {"label": rng.integers(0, 3, 16), "aux": rng.standard_normal(16), "weight": 0.5}
    seen = []

    def loss_fn(out, tgt):
        seen.append(sorted(tgt))
        assert isinstance(tgt["label"], torch.Tensor) and tgt["weight"] == 0.5
        return (torch.nn.functional.cross_entropy(out[:, :3], tgt["label"])
                + tgt["weight"] * torch.nn.functional.mse_loss(out[:, 3], tgt["aux"]))

    assert check_gradients(model, loss_fn, x, targets).passed
    assert overfit_one_batch(model, loss_fn, x, targets, steps=60).losses
    report = preflight(model, loss_fn, x, targets)
    assert not any(item.status == "FAIL" and "raised" in item.summary for item in report.items)
    assert seen and all(keys == ["aux", "label", "weight"] for keys in seen)
    with pytest.raises(DiagnosticsError, match=r"targets: expected .* or a dict, got"):
        check_gradients(model, loss_fn, x, "labels")


@pytest.mark.parametrize("masked", [True, False])
def test_an_embedding_padding_row_read_by_the_output_is_named_not_blamed(masked):
    """nn.Embedding(padding_idx=0) gives row 0 no gradient by design. A model that reads the
    padding (a mean over all positions, as an attention mask that lets the pads in does) has a
    numerical gradient there: the check passes and says padding reaches the output, instead of
    blaming the Embedding's backward. Masked pooling: nothing to say."""

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(12, 8, padding_idx=0)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, ids):
            h = self.emb(ids)
            if masked:
                keep = (ids != 0).unsqueeze(-1).to(h.dtype)
                h = (h * keep).sum(1) / keep.sum(1)
            else:
                h = h.mean(1)
            return self.head(torch.tanh(h))

    torch.manual_seed(0)
    ids = torch.randint(1, 12, (6, 7))
    ids[:, 5:] = 0
    report = check_gradients(Pooled(), torch.nn.functional.cross_entropy, ids,
                             torch.randint(0, 3, (6,)))
    assert report.passed
    if masked:
        assert report.findings == []
        return
    (finding,) = report.findings
    assert (finding.code, finding.severity, finding.location) == ("GRADIENT_MISMATCH", "info",
                                                                  "emb")
    assert finding.evidence["padding_idx"] == 0 and "padding tokens reach the output" in \
        finding.message
