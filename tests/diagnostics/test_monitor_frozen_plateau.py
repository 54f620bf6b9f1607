"""A loss that does not move while most of the model is frozen: the plateau says so."""
import numpy as np
import pytest

from diagnostics import Monitor
from tests.diagnostics.monitor_nets import FEATURES, batches, frameworks, mlp, teacher_data
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("fw", frameworks(), ids=lambda fw: fw.name)
@pytest.mark.parametrize("frozen", [True, False])
def test_a_plateau_with_the_model_frozen_names_the_freeze(fw, frozen):
    """Shuffled labels with all but the last layer frozen by mistake (the optimizer built over
    the trainable rest, as a Trainer does): the loss sits at chance, and the findings add the
    frozen share and the unfreeze first. The whole model training: no word of a freeze."""
    fw.seed(0)
    x, y = teacher_data(0)
    y = np.random.default_rng(1).permutation(y)
    model = mlp(fw, [FEATURES, 64, 64, 4])
    if frozen:
        for param in list(model.parameters())[:-2]:
            param.requires_grad_(False)
    optimizer = fw.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.05)
    with Monitor(model, optimizer, every=1, window=10) as monitor:
        for xb, yb in batches(x, y, steps=260):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
        report = monitor.report()
    if not frozen:   # the whole model learns (or memorises): nothing said of a freeze
        assert all("frozen" not in f.message for f in report.findings)
        return
    stuck = [f for f in report.findings if f.code in ("LOSS_PLATEAU", "LOSS_AT_CHANCE")]
    assert stuck
    for finding in stuck:
        assert ("parameter values are frozen (requires_grad=False: 0.weight, 0.bias, 2.weight"
                in finding.message)
        assert finding.suggestion.startswith("if the freeze is not on purpose")
