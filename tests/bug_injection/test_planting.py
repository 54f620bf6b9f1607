"""Planting is reversible: while planted something changed; afterwards the bench, the model,
the op classes and the functional namespaces are exactly as before, also when the body raises."""
import pytest
from hypothesis import given, strategies as st

from bug_injection import catalog, make_bench
from bug_injection.reference.models import BACKENDS
from bug_injection.planted.state import changes, snapshot

CASES = [(bug, backend) for bug in catalog() for backend in bug.backends]


def _ids(case):
    bug, backend = case
    return f"{bug.name}-{backend}"


class Boom(Exception):
    pass


@pytest.mark.parametrize("case", CASES, ids=map(_ids, CASES))
def test_plant_changes_something_and_reverts_everything(case):
    bug, backend = case
    bench = make_bench(bug.setup, backend)
    before = snapshot(bench)
    with bug.planted(bench):
        assert changes(before, snapshot(bench))
    assert changes(before, snapshot(bench)) == []
    with pytest.raises(Boom):
        with bug.planted(bench):
            raise Boom
    assert changes(before, snapshot(bench)) == []


@given(case=st.sampled_from(CASES), seed=st.integers(0, 2**16))
def test_reverted_at_any_seed_also_after_a_raise(case, seed):
    bug, backend = case
    bench = make_bench(bug.setup, backend, seed=seed)
    before = snapshot(bench)
    with pytest.raises(Boom):
        with bug.planted(bench):
            raise Boom
    assert changes(before, snapshot(bench)) == []


def test_snapshot_sees_a_leftover_patch():
    """The reversibility checks above can fail: a patch left in place is reported."""
    import minigrad.ops.linalg as linalg

    bench = make_bench("mixed_mlp", "minigrad")
    before = snapshot(bench)
    original = linalg.Linear.__dict__["backward"]
    linalg.Linear.backward = staticmethod(lambda ctx, grad: None)
    try:
        [line] = changes(before, snapshot(bench))
        assert line.startswith("minigrad.ops.linalg.Linear.backward: replaced")
    finally:
        linalg.Linear.backward = original
    bench.optimizer = bench.sgd(bench.model.parameters(), lr=1.0)
    bench.model[0].weight.data[0, 0] += 1
    assert changes(before, snapshot(bench)) == [
        "bench.optimizer: replaced (SGD)", "parameter 0.weight: values changed"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_models_twins_share_weights_and_outputs(backend):
    import numpy as np

    minigrad_bench, bench = make_bench("cnn", "minigrad"), make_bench("cnn", backend)
    for (name, a), (other, b) in zip(minigrad_bench.model.named_parameters(),
                                     bench.model.named_parameters()):
        assert name == other
        np.testing.assert_array_equal(minigrad_bench.array(a), bench.array(b))
    out_a = minigrad_bench.array(minigrad_bench.model(minigrad_bench.train_x))
    out_b = bench.array(bench.model(bench.train_x))
    np.testing.assert_allclose(out_a, out_b, rtol=1e-4, atol=1e-5)
