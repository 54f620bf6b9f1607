"""The character-level GPT (bug_injection/reference/gpt.py) in minigrad and torch: same names,
same gradients to 1e-10 in float64, the same training curve over 20 AdamW steps on the Zen of
Python."""
import numpy as np
import pytest
import torch

import minigrad
from bug_injection.reference import gpt, text

TOL = 1e-10
CONFIG = gpt.GPTConfig(vocab_size=len(text.vocabulary()), block_size=16, width=16, heads=2,
                       layers=2)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _batches(seed=0, batch=8):
    x, y = text.sequences(length=CONFIG.block_size)
    rng = np.random.default_rng(seed)
    while True:
        rows = rng.choice(len(x), size=batch, replace=False)
        yield x[rows], y[rows]


def _losses():
    return (gpt.gpt_classes(minigrad.nn).NextTokenLoss(),
            gpt.gpt_classes(torch.nn).NextTokenLoss())


def test_names_shapes_and_tied_head_match_torch():
    model, twin = gpt.build_twins(CONFIG)
    assert [(n, p.shape) for n, p in model.named_parameters()] == [
        (n, tuple(p.shape)) for n, p in twin.named_parameters()]
    assert [n for n, _ in model.named_modules()] == [n for n, _ in twin.named_modules()]
    assert list(model.state_dict()) == list(twin.state_dict())
    assert "lm_head.weight" in model.state_dict() and "lm_head.weight" not in dict(
        model.named_parameters())
    assert model.lm_head.weight is model.wte.weight and twin.lm_head.weight is twin.wte.weight


def test_gradients_agree_in_float64():
    model, twin = gpt.build_twins(CONFIG, seed=1)
    loss_fn, twin_loss_fn = _losses()
    x, y = next(_batches())
    assert (y == text.IGNORE_INDEX).any()     # padding is part of the batch
    loss = loss_fn(model(minigrad.tensor(x)), minigrad.tensor(y))
    twin_loss = twin_loss_fn(twin(torch.from_numpy(x)), torch.from_numpy(y))
    loss.backward()
    twin_loss.backward()
    assert loss.item() == pytest.approx(twin_loss.item(), rel=TOL)
    twin_params = dict(twin.named_parameters())
    for name, param in model.named_parameters():
        np.testing.assert_allclose(param.grad, twin_params[name].grad.numpy(), rtol=TOL,
                                   atol=TOL * 1e-3, err_msg=f"gradient of {name}")


def test_training_curves_agree_over_20_adamw_steps():
    model, twin = gpt.build_twins(CONFIG, seed=2)
    loss_fn, twin_loss_fn = _losses()
    optimizer = minigrad.optim.AdamW(model.parameters(), lr=1e-2)
    twin_optimizer = torch.optim.AdamW(twin.parameters(), lr=1e-2)
    curve, twin_curve = [], []
    for _, (x, y) in zip(range(20), _batches(seed=3)):
        optimizer.zero_grad()
        twin_optimizer.zero_grad()
        loss = loss_fn(model(minigrad.tensor(x)), minigrad.tensor(y))
        twin_loss = twin_loss_fn(twin(torch.from_numpy(x)), torch.from_numpy(y))
        loss.backward()
        twin_loss.backward()
        optimizer.step()
        twin_optimizer.step()
        curve.append(loss.item())
        twin_curve.append(twin_loss.item())
    np.testing.assert_allclose(curve, twin_curve, rtol=1e-9)
    assert np.mean(curve[-5:]) < curve[0] - 0.5        # it learns
    twin_params = dict(twin.named_parameters())
    for name, param in model.named_parameters():
        np.testing.assert_allclose(param.data, twin_params[name].detach().numpy(), rtol=1e-8,
                                   atol=1e-10, err_msg=name)


def test_dropout_is_active_in_training_and_off_in_eval():
    model, _ = gpt.build_twins(gpt.GPTConfig(vocab_size=CONFIG.vocab_size, width=16, heads=2,
                                             layers=1, dropout=0.2))
    x = minigrad.tensor(next(_batches())[0])
    first, second = model(x).data, model(x).data
    assert not np.array_equal(first, second)
    model.eval()
    assert np.array_equal(model(x).data, model(x).data)
