"""A gradient bug is the same bug on both backends: the minigrad op patch and the buggy torch
Function give the same (wrong) gradients on twin models, and differ from the right ones."""
import numpy as np
import pytest

from bug_injection import catalog, make_bench

GRADIENT_BUGS = [bug for bug in catalog() if bug.kind == "gradient"]
ROWS = 8


def _gradients(bench):
    bench.model.zero_grad()
    loss = bench.loss_fn(bench.model(bench.train_x[:ROWS]), bench.train_y[:ROWS])
    loss.backward()
    return {name: bench.array(p.grad) for name, p in bench.model.named_parameters()}


@pytest.mark.parametrize("bug", GRADIENT_BUGS, ids=lambda b: b.name)
def test_same_wrong_gradients_on_both_backends(bug):
    grads = {}
    for backend in ("minigrad", "torch"):
        bench = make_bench(bug.setup, backend)
        right = _gradients(bench)
        with bug.planted(bench):
            grads[backend] = _gradients(bench)
        assert any(not np.allclose(grads[backend][n], right[n], rtol=1e-3, atol=1e-6)
                   for n in right), "the bug changes no gradient"
    for name, minigrad_grad in grads["minigrad"].items():
        np.testing.assert_allclose(minigrad_grad, grads["torch"][name], rtol=1e-4, atol=1e-6,
                                   err_msg=name)
