"""Losses and softmax beyond the op registry: modules, stability, and the errors for bad targets."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import minigrad as mg
import minigrad.functional as F
from minigrad import nn

LOGITS = np.array([[2.0, -1.0, 0.5], [0.1, 0.2, 3.0], [-2.0, 1.0, 1.0], [0.0, 0.0, -4.0]])
LABELS = np.array([0, 2, 1, 1])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("module, torch_module, target", [
    (nn.CrossEntropyLoss, torch.nn.CrossEntropyLoss, LABELS),
    (nn.MSELoss, torch.nn.MSELoss, LOGITS[::-1].copy()),
    (nn.BCEWithLogitsLoss, torch.nn.BCEWithLogitsLoss, (LOGITS > 0.3).astype(np.float64)),
])
def test_loss_modules_match_torch(module, torch_module, target, reduction):
    x = mg.tensor(LOGITS, requires_grad=True)
    tx = torch.tensor(LOGITS, requires_grad=True)
    loss = module(reduction=reduction)(x, mg.tensor(target))
    expected = torch_module(reduction=reduction)(tx, torch.from_numpy(target))
    loss.sum().backward()
    expected.sum().backward()
    np.testing.assert_allclose(loss.data, expected.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_cross_entropy_mean_gradient_is_softmax_minus_onehot_over_batch():
    x = mg.tensor(LOGITS, requires_grad=True)
    F.cross_entropy(x, mg.tensor(LABELS)).backward()
    softmax = np.exp(LOGITS) / np.exp(LOGITS).sum(axis=1, keepdims=True)
    onehot = np.eye(3)[LABELS]
    np.testing.assert_allclose(x.grad, (softmax - onehot) / len(LABELS), rtol=1e-12)


def test_softmax_family_is_stable_for_huge_logits():
    logits = np.array([[1000.0, 0.0, -1000.0], [-1e4, -1e4 + 1.0, -1e4]])
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        probabilities = F.softmax(mg.tensor(logits), 1).data
        log_probabilities = F.log_softmax(mg.tensor(logits), 1).data
        loss = F.cross_entropy(mg.tensor(logits), mg.tensor(np.array([2, 1]))).item()
        bce = F.binary_cross_entropy_with_logits(mg.tensor(logits), mg.tensor(np.ones((2, 3))))
    expected = TF.log_softmax(torch.tensor(logits), 1).numpy()
    np.testing.assert_allclose(log_probabilities, expected, rtol=1e-12)
    np.testing.assert_allclose(probabilities, np.exp(expected), rtol=1e-12, atol=1e-300)
    assert loss == pytest.approx(TF.cross_entropy(torch.tensor(logits),
                                                  torch.tensor([2, 1])).item(), rel=1e-12)
    assert np.isfinite(bce.item())


def test_cross_entropy_rejects_column_of_labels_naming_expected_shape():
    with pytest.raises(mg.ShapeError, match=r"cross_entropy.*\(4,\).*\(4, 1\)"):
        F.cross_entropy(mg.tensor(LOGITS), mg.tensor(LABELS[:, None]))


def test_cross_entropy_rejects_float_class_labels_and_says_to_use_int64():
    with pytest.raises(mg.ShapeError, match=r"cross_entropy.*int64.*\(4,\)"):
        F.cross_entropy(mg.tensor(LOGITS), mg.tensor(LABELS.astype(np.float32)))


def test_cross_entropy_rejects_out_of_range_classes():
    with pytest.raises(IndexError, match=r"^cross_entropy: .*\[0, 3\).*3$"):
        F.cross_entropy(mg.tensor(LOGITS), mg.tensor(np.array([0, 1, 2, 3])))


def test_cross_entropy_rejects_boolean_targets():
    with pytest.raises(TypeError, match="cross_entropy.*bool"):
        F.cross_entropy(mg.tensor(LOGITS), mg.tensor(LABELS > 0))


def test_bce_with_logits_requires_matching_shapes():
    with pytest.raises(mg.ShapeError, match=r"binary_cross_entropy_with_logits.*\(4,\).*\(4, 1\)"):
        F.binary_cross_entropy_with_logits(mg.tensor(LOGITS[:, :1]), mg.tensor(np.ones(4)))


def test_mse_broadcasting_target_warns_like_torch():
    x = mg.tensor(LOGITS[:, :1], requires_grad=True)
    with pytest.warns(UserWarning, match=r"mse_loss.*\(4,\).*\(4, 1\)"):
        loss = F.mse_loss(x, mg.tensor(np.arange(4.0)))
    tx = torch.tensor(LOGITS[:, :1], requires_grad=True)
    with pytest.warns(UserWarning):
        expected = TF.mse_loss(tx, torch.arange(4.0, dtype=torch.float64))
    loss.backward()
    expected.backward()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-12)
    np.testing.assert_allclose(x.grad, tx.grad.numpy(), rtol=1e-12)


def test_mse_rejects_shapes_that_do_not_broadcast():
    with pytest.raises(mg.ShapeError, match=r"mse_loss.*\(2,\).*\(4, 3\)"):
        F.mse_loss(mg.tensor(LOGITS), mg.tensor(np.ones(2)))


@pytest.mark.parametrize("make", [
    lambda: nn.CrossEntropyLoss(reduction="avg"),
    lambda: F.mse_loss(mg.tensor(LOGITS), mg.tensor(LOGITS), reduction="avg"),
])
def test_unknown_reduction_is_rejected(make):
    with pytest.raises(ValueError, match="reduction must be 'mean', 'sum' or 'none', got 'avg'"):
        make()
