"""conv2d, max_pool2d, dropout, batch_norm, layer_norm and their modules beyond the op registry:
running statistics, ties, random masks, default initialisation, float32 and clear errors."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
from hypothesis import given
from hypothesis import strategies as st

import minigrad
import minigrad.functional as F
from minigrad.function import ShapeError
from minigrad.ops import conv
from tests.strategies import generators


def to_torch(module, twin):
    """Copy ``module``'s state (float64) into the torch module ``twin``."""
    twin.load_state_dict({k: torch.from_numpy(v.data.copy())
                          for k, v in module.state_dict().items()})
    return twin


# ------------------------------------------------------------------------------ batch norm
@given(generators(), st.sampled_from([(6, 3), (4, 3, 5), (3, 2, 4, 3)]),
       st.sampled_from([0.1, 0.5, None]), st.integers(1, 3))
def test_batch_norm_running_statistics_follow_torch(rng, shape, momentum, batches):
    """Training updates running_mean/var (unbiased) and num_batches_tracked like torch."""
    layers = {3: "BatchNorm1d", 4: "BatchNorm2d"}
    name = layers.get(len(shape), "BatchNorm1d")
    layer = getattr(minigrad.nn, name)(shape[1], momentum=momentum).double()
    twin = getattr(torch.nn, name)(shape[1], momentum=momentum).double()
    for _ in range(batches):
        x = rng.standard_normal(shape) * 3 + 1
        out, expected = layer(minigrad.tensor(x)), twin(torch.from_numpy(x))
        np.testing.assert_allclose(out.data, expected.detach().numpy(), atol=1e-12)
    for key, value in twin.state_dict().items():
        np.testing.assert_allclose(layer.state_dict()[key].data, value.numpy(), rtol=1e-12,
                                   err_msg=key)
    layer.eval()
    twin.eval()
    x = rng.standard_normal(shape)
    np.testing.assert_allclose(layer(minigrad.tensor(x)).data,
                               twin(torch.from_numpy(x)).detach().numpy(), atol=1e-12)


def test_batch_norm_without_running_statistics_or_affine():
    layer = minigrad.nn.BatchNorm2d(3, affine=False, track_running_stats=False).double()
    twin = torch.nn.BatchNorm2d(3, affine=False, track_running_stats=False).double()
    assert list(layer.state_dict()) == list(twin.state_dict()) == []
    layer.eval()
    twin.eval()  # still batch statistics: there are no running ones
    x = np.random.default_rng(0).standard_normal((4, 3, 2, 2))
    np.testing.assert_allclose(layer(minigrad.tensor(x)).data,
                               twin(torch.from_numpy(x)).numpy(), atol=1e-12)


def test_functional_batch_norm_updates_buffers_in_place():
    running_mean = minigrad.zeros(2, dtype=np.float64)
    running_var = minigrad.ones(2, dtype=np.float64)
    arrays = running_mean.data, running_var.data
    x = minigrad.tensor(np.array([[1.0, 2.0], [3.0, 6.0]]))
    F.batch_norm(x, running_mean, running_var, training=True, momentum=0.5)
    assert running_mean.data is arrays[0] and running_var.data is arrays[1]
    np.testing.assert_allclose(running_mean.data, [1.0, 2.0])
    np.testing.assert_allclose(running_var.data, [0.5 + 0.5 * 2.0, 0.5 + 0.5 * 8.0])
    F.batch_norm(x, running_mean, running_var, training=False)
    np.testing.assert_allclose(running_mean.data, [1.0, 2.0])


# -------------------------------------------------------------------------------- max pool
TIES = np.array([[[[1.0, 1.0, 0.0, 2.0], [1.0, 1.0, 2.0, 2.0],
                   [3.0, 0.0, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0]]]])


@pytest.mark.parametrize("kernel, stride, padding",
                         [(2, None, 0), (3, 1, 1), (2, 1, 0), ((1, 2), (2, 1), 0)])
def test_max_pool_sends_the_gradient_to_torchs_choice_among_ties(kernel, stride, padding):
    x, tx = minigrad.tensor(TIES, requires_grad=True), torch.tensor(TIES, requires_grad=True)
    out = F.max_pool2d(x, kernel, stride, padding)
    expected = TF.max_pool2d(tx, kernel, stride, padding)
    upstream = np.arange(1.0, out.data.size + 1).reshape(out.shape)
    out.backward(upstream)
    expected.backward(torch.from_numpy(upstream))
    np.testing.assert_array_equal(out.data, expected.detach().numpy())
    np.testing.assert_array_equal(x.grad, tx.grad.numpy())


def test_max_pool_module_defaults_stride_to_kernel():
    layer = minigrad.nn.MaxPool2d(2)
    assert layer.stride == 2
    assert layer(minigrad.zeros((1, 1, 5, 4))).shape == (1, 1, 2, 2)


# --------------------------------------------------------------------------------- dropout
def test_dropout_masks_scale_and_gradient():
    x = minigrad.tensor(np.ones((200, 100)), requires_grad=True)
    minigrad.manual_seed(0)
    out = F.dropout(x, p=0.3)
    dropped = np.mean(out.data == 0)
    assert abs(dropped - 0.3) < 0.01
    np.testing.assert_allclose(np.unique(out.data), [0.0, 1 / 0.7])
    out.backward(np.full(out.shape, 2.0))
    np.testing.assert_allclose(x.grad, 2.0 * out.data)


def test_dropout_edge_probabilities_and_modes():
    x = minigrad.tensor(np.arange(1.0, 7.0))
    assert not F.dropout(x, p=1.0).data.any()
    np.testing.assert_array_equal(F.dropout(x, p=0.0).data, x.data)
    np.testing.assert_array_equal(F.dropout(x, p=0.9, training=False).data, x.data)
    layer = minigrad.nn.Dropout(0.9).eval()
    np.testing.assert_array_equal(layer(x).data, x.data)
    for p in (-0.1, 1.5):
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            F.dropout(x, p=p)
        with pytest.raises(ValueError, match="dropout probability"):
            minigrad.nn.Dropout(p)


# --------------------------------------------------------------------------------- modules
def test_module_parameters_buffers_and_defaults_match_torch():
    layers = [("Conv2d", (3, 8, 3), {"stride": 2, "padding": 1}),
              ("Conv2d", (2, 4, (3, 1)), {"bias": False}), ("BatchNorm1d", (5,), {}),
              ("BatchNorm2d", (4,), {}), ("LayerNorm", ((3, 4),), {}),
              ("LayerNorm", (6,), {"elementwise_affine": False})]
    for name, args, options in layers:
        module = getattr(minigrad.nn, name)(*args, **options)
        twin_state = getattr(torch.nn, name)(*args, **options).state_dict()
        state = module.state_dict()
        assert [(k, v.shape) for k, v in state.items()] == [
            (k, tuple(v.shape)) for k, v in twin_state.items()]
        for key, value in state.items():
            expected_dtype = np.int64 if key == "num_batches_tracked" else np.float32
            assert value.dtype == expected_dtype, key
            if name != "Conv2d":  # deterministic defaults: ones, zeros, counters
                np.testing.assert_array_equal(value.data, twin_state[key].numpy(), err_msg=key)


def test_conv_default_init_has_torchs_bounds():
    minigrad.manual_seed(0)
    layer = minigrad.nn.Conv2d(16, 32, 3)
    bound = 1 / math.sqrt(16 * 3 * 3)  # kaiming_uniform(a=sqrt(5)) and the bias rule agree
    for values in (layer.weight.data, layer.bias.data):
        assert np.abs(values).max() <= bound
    assert abs(layer.weight.data.std() - bound / math.sqrt(3)) < 0.05 * bound


def test_flatten_matches_torch():
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5))
    for start, end in [(1, -1), (0, -1), (1, 2), (2, 3)]:
        out = minigrad.nn.Flatten(start, end)(minigrad.tensor(x))
        assert out.shape == tuple(torch.nn.Flatten(start, end)(torch.from_numpy(x)).shape)


def test_float32_stays_float32():
    minigrad.manual_seed(0)
    model = minigrad.nn.Sequential(
        minigrad.nn.Conv2d(1, 2, 3, padding=1), minigrad.nn.BatchNorm2d(2), minigrad.nn.ReLU(),
        minigrad.nn.MaxPool2d(2), minigrad.nn.Flatten(), minigrad.nn.LayerNorm(8),
        minigrad.nn.Dropout(0.5))
    out = model(minigrad.randn(3, 1, 4, 4))
    out.sum().backward()
    assert out.dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in model.parameters())
    assert model[1].running_var.dtype == np.float32


def test_conv_input_without_gradient():
    layer = minigrad.nn.Conv2d(2, 3, 2).double()
    twin = to_torch(layer, torch.nn.Conv2d(2, 3, 2).double())
    x = np.random.default_rng(0).standard_normal((2, 2, 4, 3))
    layer(minigrad.tensor(x)).sum().backward()
    twin(torch.from_numpy(x)).sum().backward()
    np.testing.assert_allclose(layer.weight.grad, twin.weight.grad.numpy(), atol=1e-12)
    np.testing.assert_allclose(layer.bias.grad, twin.bias.grad.numpy(), atol=1e-12)



@given(generators(), st.integers(2, 5), st.sampled_from([1, 2]), st.sampled_from([0, 1]),
       st.sampled_from([1, 3000, 7000]))
def test_conv_in_blocks_of_images_matches_torch(rng, n, stride, padding, block_bytes):
    """Columns built a few images at a time (one image per block at 1 byte) still give torch's
    output and gradients, with blocks of uneven size too."""
    arrays = [rng.standard_normal((n, 2, 5, 4)), rng.standard_normal((3, 2, 3, 3)),
              rng.standard_normal(3)]
    upstream = rng.standard_normal((n, 3, (5 + 2 * padding - 3) // stride + 1,
                                    (4 + 2 * padding - 3) // stride + 1))
    ours = [minigrad.tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(conv, "BLOCK_BYTES", block_bytes)
        out = F.conv2d(*ours, stride=stride, padding=padding)
        out.backward(upstream)
    expected = TF.conv2d(*theirs, stride=stride, padding=padding)
    expected.backward(torch.from_numpy(upstream))
    np.testing.assert_allclose(out.data, expected.detach().numpy(), atol=1e-12)
    for mine, twin in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad, twin.grad.numpy(), atol=1e-12)

# ---------------------------------------------------------------------------------- errors
@pytest.mark.parametrize("call, message", [
    (lambda: F.conv2d(minigrad.zeros((1, 3, 5, 5)), minigrad.zeros((4, 2, 3, 3))),
     r"conv2d: input \(1, 3, 5, 5\) has 3 channels but weight \(4, 2, 3, 3\) expects 2"),
    (lambda: F.conv2d(minigrad.zeros((3, 5, 5)), minigrad.zeros((4, 3, 3, 3))),
     r"conv2d: expected a 4-d input"),
    (lambda: F.conv2d(minigrad.zeros((1, 1, 2, 2)), minigrad.zeros((1, 1, 3, 3))),
     r"conv2d: kernel \(3, 3\) is larger than the padded input height 2"),
    (lambda: F.conv2d(minigrad.zeros((1, 1, 4, 4)), minigrad.zeros((1, 1, 3, 3)), stride=0),
     r"stride must be an int >= 1"),
    (lambda: F.max_pool2d(minigrad.zeros((1, 1, 4, 4)), 2, padding=2),
     r"padding \(2, 2\) must be at most half of kernel_size"),
    (lambda: minigrad.nn.BatchNorm2d(3)(minigrad.zeros((4, 3))),
     r"BatchNorm2d: expected 4D input \(got 2D input"),
    (lambda: minigrad.nn.BatchNorm1d(3)(minigrad.zeros((1, 3))),
     r"expected more than 1 value per channel when training"),
    (lambda: F.batch_norm(minigrad.zeros((4, 3)), minigrad.zeros(2), minigrad.ones(2)),
     r"batch_norm: running_mean has shape \(2,\) but the input \(4, 3\) has 3 channels"),
    (lambda: F.layer_norm(minigrad.zeros((2, 3)), (4,)),
     r"layer_norm: normalized_shape \(4,\) does not match the trailing dimensions of the input"),
])
def test_bad_shapes_raise_errors_naming_op_and_shapes(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_shape_errors_are_shape_errors():
    with pytest.raises(ShapeError):
        F.conv2d(minigrad.zeros((1, 3, 5, 5)), minigrad.zeros((4, 2, 3, 3)))
