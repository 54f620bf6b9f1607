"""A watched model can be copied and saved whole: ``copy.deepcopy`` (a target network's
refresh), ``pickle`` and ``torch.save(model)`` work while a Monitor is open, the copy carries
only inert hooks (it is not watched as the model), and the model is still watched."""
import copy
import io
import pickle

import pytest
import torch
from torch import nn

from diagnostics import Monitor
from diagnostics.backends.hooks import INERT
from tests.diagnostics.monitor_nets import FEATURES, frameworks, mlp  # noqa: F401


def _hooks(module):
    return [hook for m in module.modules()
            for hook in (*m._forward_pre_hooks.values(), *m._forward_hooks.values())]


@pytest.mark.parametrize("every", [1, 50])      # inside a sampled iteration, and outside one
def test_deepcopy_pickle_and_torch_save_of_a_watched_model(every):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=every) as monitor:
        for _ in range(3):
            optimizer.zero_grad()
            loss = model(torch.randn(8, 4)).pow(2).mean()
            loss.backward()
            target = copy.deepcopy(model)                   # mid-iteration, hooks on
            optimizer.step()
            monitor.step(loss)
        buffer = io.BytesIO()
        torch.save(model, buffer)
        buffer.seek(0)
        for copied in (target, pickle.loads(pickle.dumps(model)),
                       torch.load(buffer, weights_only=False)):
            hooks = _hooks(copied)
            assert hooks and all(hook is INERT for hook in hooks)
            assert copied(torch.randn(2, 4)).shape == (2, 2)
        assert _hooks(model) and not any(hook is INERT for hook in _hooks(model))
    assert monitor.report().steps == 3
    assert _hooks(model) == []


def test_a_minigrad_model_is_copied_too():
    fw = next(fw for fw in frameworks() if fw.name == "minigrad")
    model = mlp(fw, [FEATURES, 8, 4])
    with Monitor(model, every=1):
        hooks = _hooks(copy.deepcopy(model))
        assert hooks and all(hook is INERT for hook in hooks)
