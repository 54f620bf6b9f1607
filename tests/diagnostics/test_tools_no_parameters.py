"""A model without parameters is a mistake the training tools name before any work starts
(``model``: no parameters), instead of quoting the framework's empty-optimizer error; a model
whose parameters are all frozen still gets preflight's NO_GRADIENT item."""
import numpy as np
import pytest

from diagnostics import find_lr, overfit_one_batch, preflight
from diagnostics.errors import DiagnosticsError

from .tools_helpers import FRAMEWORKS, NN, assert_same, capture, classification_data, mlp

TOOLS = {
    "preflight": lambda model, loss, x, y: preflight(model, loss, x, y),
    "overfit_one_batch": lambda model, loss, x, y: overfit_one_batch(model, loss, x, y),
    "find_lr": lambda model, loss, x, y: find_lr(model, loss, (x, y), progress=False),
}


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_model_without_parameters_is_named_before_any_work(framework, tool):
    x, y = classification_data(rows=8, features=3)
    model = NN[framework].Sequential(NN[framework].ReLU())
    before = capture(model)
    with pytest.raises(DiagnosticsError, match=r"^model: expected a model with parameters to "
                                               r"train, got Sequential with no parameters"):
        TOOLS[tool](model, NN[framework].CrossEntropyLoss(), x, y)
    assert_same(before, capture(model))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_frozen_model_still_gets_its_checklist_item(framework):
    x, y = classification_data(rows=16)
    model = mlp(framework)
    for param in model.parameters():
        param.requires_grad = False
    report = preflight(model, NN[framework].CrossEntropyLoss(), x, y.astype(np.int64))
    item = report.item("parameters")
    assert item.status == "FAIL" and [f.code for f in item.findings] == ["NO_GRADIENT"]
