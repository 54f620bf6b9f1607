"""The Monitor's statistics kernels on both frameworks agree with NumPy."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics.backends import get_backend
from diagnostics.monitor.kernels import kernels_for
from tests.support.backend_models import MODELS


@pytest.fixture(params=sorted(MODELS))
def backend(request):
    """The kernels of one framework (``from_numpy`` is the backend's)."""
    return _kernels(MODELS[request.param]())


def _kernels(model):
    kernels = kernels_for(get_backend(model))
    kernels.from_numpy = kernels.backend.from_numpy
    return kernels


@pytest.mark.parametrize("shape", [(6, 5), (2, 3, 5)])
@pytest.mark.parametrize("scale", [0.0, 1.0, 300.0])
def test_prediction_entropy_is_the_mean_softmax_entropy(backend, scale, shape):
    logits = (scale * np.random.default_rng(2).standard_normal(shape)).astype(np.float32)
    p = torch.softmax(torch.tensor(logits, dtype=torch.float64), dim=-1)
    expected = float(-(p * torch.log(p.clamp_min(1e-300))).sum(-1).mean())
    result = backend.gather([backend.prediction_entropy(backend.from_numpy(logits))])[0]
    assert result == pytest.approx(expected, rel=1e-5, abs=1e-6)
    if scale == 0.0:
        assert result == pytest.approx(np.log(5))


def test_prediction_entropy_needs_floating_scores_of_two_columns(backend):
    assert backend.prediction_entropy(backend.from_numpy(np.ones((4, 1), np.float32))) is None
    assert backend.prediction_entropy(backend.from_numpy(np.zeros((0, 3), np.float32))) is None
    assert backend.prediction_entropy(backend.from_numpy(np.ones((4, 3), np.int64))) is None


@given(shape=st.lists(st.integers(1, 6), min_size=0, max_size=4), per_unit=st.booleans(),
       seed=st.integers(0, 2**16))
@settings(max_examples=40)
def test_activation_and_gradient_statistics_match_numpy(shape, per_unit, seed):
    values = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    values[values < -0.5] = 0.0                       # some exact zeros to count
    for name in sorted(MODELS):
        backend = _kernels(MODELS[name]())
        tensor = backend.from_numpy(values)
        squares, abs_total, largest = backend.gather(
            list(backend.gradient_statistics(tensor, per_unit=per_unit)))
        flat = values.astype(np.float64).reshape(-1)
        assert squares == pytest.approx(flat @ flat, rel=1e-5)
        assert abs_total == pytest.approx(np.abs(flat).sum(), rel=1e-5)
        if per_unit and values.ndim >= 1:
            expected = np.abs(values).reshape(shape[0], -1).max(axis=1)
            np.testing.assert_allclose(largest, expected, rtol=1e-6)
        else:
            assert largest == pytest.approx(np.abs(flat).max())
        if values.ndim >= 1:
            stats = backend.gather(list(backend.activation_statistics(tensor)))
            assert stats[2] == np.count_nonzero(values), name     # nonzero count
            lean = backend.gather(list(backend.input_statistics(tensor)))
            assert len(lean) == 4 and lean[:2] == stats[:2], name    # the input's: no count
            np.testing.assert_array_equal(lean[2], [values.max()])  # extremes of the whole
            np.testing.assert_array_equal(lean[3], [values.min()])


@given(size=st.integers(1, 70_000), zeros=st.floats(0.0, 1.0), seed=st.integers(0, 2**16),
       dtype=st.sampled_from([np.float16, np.float32, np.float64]))
@settings(max_examples=25, deadline=None)
def test_the_nonzero_count_is_exact_and_counts_nan_and_inf(size, zeros, seed, dtype):
    """The count behind the zero fraction and dead units: NaN and inf are not zeros."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(size).astype(dtype)
    values[rng.random(size) < zeros] = 0.0
    values[rng.integers(0, size, 3)] = [np.nan, np.inf, -np.inf]
    for name in sorted(MODELS):
        kernels = _kernels(MODELS[name]())
        stats = kernels.gather(list(kernels.activation_statistics(kernels.from_numpy(values))))
        assert stats[2] == np.count_nonzero(values), name


@pytest.mark.parametrize("name", sorted(MODELS))
def test_weight_samples_at_once_match_one_by_one_and_follow_replaced_storage(name):
    """The fused copies equal ``weight_sample`` of each; the update measured after a
    parameter's storage was replaced (``param.data = ...``) reads the new values, not the
    sample view kept of the old ones."""
    kernels = _kernels(MODELS[name]())
    rng = np.random.default_rng(0)
    big = kernels.UPDATE_SAMPLE * 3 + 5                      # sampled in strided runs
    arrays = [rng.standard_normal(n).astype(np.float32) for n in (7, big)]
    params = [kernels.from_numpy(a) for a in arrays]
    copies = kernels.weight_samples(params)
    again = kernels.weight_samples(params, into=copies)
    for param, copy, repeat in zip(params, copies, again):
        expected = kernels.gather([kernels.weight_sample(param)])[0]
        np.testing.assert_array_equal(kernels.gather([copy])[0], expected)
        np.testing.assert_array_equal(kernels.gather([repeat])[0], expected)
    moved = [a + 1.0 for a in arrays]
    for param, values in zip(params, moved):
        replacement = kernels.from_numpy(values)
        if hasattr(param, "set_"):
            param.data = replacement          # torch: a new storage behind the same tensor
        else:
            param.data = replacement.data     # minigrad: a new array behind the same tensor
    deltas_and_norms = kernels.gather(kernels.update_statistics_many(params, copies))
    for i, values in enumerate(moved):
        now = kernels.gather([kernels.weight_sample(params[i])])[0]
        assert deltas_and_norms[i] == pytest.approx(np.sqrt(now.size), rel=1e-5)   # |Δ| = 1
        assert deltas_and_norms[2 + i] == pytest.approx(np.linalg.norm(now), rel=1e-5)


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 300), cols=st.integers(1, 300), offset=st.integers(0, 40),
       transposed=st.booleans(), limit=st.sampled_from([64, 256, 4096]))
def test_a_torch_sample_takes_every_strided_run_of_the_flattened_tensor(rows, cols, offset,
                                                                         transposed, limit):
    """Whatever the layout (contiguous, a view at an offset into a larger buffer, a transposed
    one), the sample is every ``stride``-th run of ``SAMPLE_BLOCK`` neighbours of the tensor
    flattened in its logical order: the entries the update sizes are measured on."""
    kernels = _kernels(MODELS["torch"]())
    buffer = torch.arange(offset + rows * cols, dtype=torch.float32)
    tensor = buffer[offset:].view(rows, cols)
    tensor = tensor.t() if transposed else tensor
    flat = tensor.reshape(-1)
    plan = kernels._sample_stride(flat.numel(), limit)
    sample = kernels._sampled(tensor, limit=limit)
    if plan is None:
        expected = flat
    else:
        blocks, stride = plan
        block = kernels.SAMPLE_BLOCK
        expected = flat[:blocks * block].view(blocks, block)[::stride]
    assert torch.equal(sample, expected)


@settings(max_examples=40, deadline=None)
@given(shapes=st.lists(st.lists(st.integers(0, 40), min_size=0, max_size=3), min_size=1,
                       max_size=14),
       dtype=st.sampled_from([torch.float32, torch.float64, torch.bfloat16]),
       scale=st.sampled_from([1e-3, 1.0, 1e6]), seed=st.integers(0, 2**16),
       strided=st.booleans())
def test_gradient_norms_match_numpy(shapes, dtype, scale, seed, strided):
    """The per-step tier's norms (a dot per CPU gradient for a few, the fused norm for many
    and for half types) are the 2-norms, for empty and non-contiguous gradients too."""
    generator = torch.Generator().manual_seed(seed)
    grads = [torch.randn(tuple(shape), generator=generator, dtype=torch.float64) * scale
             for shape in shapes]
    grads = [(g.t() if strided and g.dim() == 2 else g).to(dtype) for g in grads]
    kernels = kernels_for(get_backend(torch.nn.Linear(1, 1)))
    norms = kernels.gradient_norms(grads).double().numpy()
    exact = [np.linalg.norm(g.double().numpy()) for g in grads]
    np.testing.assert_allclose(norms, exact, rtol=1e-5 if dtype != torch.float64 else 1e-12)


@pytest.mark.parametrize("clean_tensors", [0, 12])   # the dot path, and the fused one
def test_gradient_norms_are_nan_or_inf_with_a_nan_or_inf_entry(clean_tensors):
    kernels = kernels_for(get_backend(torch.nn.Linear(1, 1)))
    grads = [torch.tensor([1.0, float("nan")]), torch.tensor([float("-inf"), 0.0]),
             torch.tensor([3.0, 4.0])] + [torch.ones(4)] * clean_tensors
    norms = kernels.gradient_norms(grads).tolist()
    assert np.isnan(norms[0]) and norms[1] == np.inf and norms[2] == 5.0
    assert norms[3:] == [2.0] * clean_tensors
