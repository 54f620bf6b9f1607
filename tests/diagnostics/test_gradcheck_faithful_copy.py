"""The float64 copy is the user's model: tensors its forward makes in float32 (a causal mask
without a dtype, with ``dtype=torch.float32``, from NumPy, kept as a plain attribute) follow
the copy's dtype, so torch's CPU attention, which misreads a float32 mask next to float64
queries, sees the mask the user's model sees. A model without the mask is still caught."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from diagnostics import check_gradients
from diagnostics.backends.torch_backend import _float64_casts
from diagnostics.tools.batch_independence import check_batch_independence

from .gradcheck_models import MASKS, MaskedDecoder, decoder_batch, one_torch_thread

HEALTHY = [(mask, "sdpa") for mask in MASKS if mask != "none"] + [
    ("numpy", "hand"), ("attribute", "hand"), ("bool", "hand")]


@pytest.fixture(autouse=True)
def _one_torch_thread():
    with one_torch_thread():
        yield


def _next_token_loss(out, ids):
    return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), ids.reshape(-1))


@pytest.mark.parametrize("mask, attention", HEALTHY, ids=[f"{m}-{a}" for m, a in HEALTHY])
def test_a_float32_mask_made_in_forward_is_no_leak_on_the_copy(mask, attention):
    """Used to be CAUSALITY_LEAK from check_batch_independence and GRADIENT_MISMATCH from
    check_gradients (the kernel's backward disagrees with its misread forward)."""
    torch.manual_seed(0)
    model, ids = MaskedDecoder(mask, attention), decoder_batch()
    assert check_batch_independence(model, ids, causal=True) == []
    report = check_gradients(model, _next_token_loss, ids, ids)
    assert report.passed, str(report)
    assert torch.get_default_dtype() == torch.float32


@pytest.mark.parametrize("attention", ["sdpa", "hand"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_decoder_without_its_mask_is_still_a_causality_leak(attention, seed):
    torch.manual_seed(seed)
    findings = check_batch_independence(MaskedDecoder("none", attention), decoder_batch(seed),
                                        causal=True)
    assert [f.code for f in findings] == ["CAUSALITY_LEAK"]


def test_a_leak_only_the_float64_copy_shows_is_not_reported():
    """A finding of the float64 copy is confirmed on the model in its own dtype: a forward
    that behaves differently in float64 (here on purpose) is not the user's model."""
    class MaskedInFloat32Only(MaskedDecoder):
        def _mask(self, steps):
            return None if self.qkv.weight.dtype == torch.float64 else super()._mask(steps)

    torch.manual_seed(0)
    ids = decoder_batch()
    assert check_batch_independence(MaskedInFloat32Only("full"), ids, causal=True) == []
    leaking = MaskedInFloat32Only("none")
    assert [f.code for f in check_batch_independence(leaking, ids, causal=True)] == [
        "CAUSALITY_LEAK"]


def test_float64_casts_widen_constants_and_leave_weights_and_in_place_targets():
    x = torch.ones(3, dtype=torch.float64)
    kept = torch.zeros(3)
    weight = torch.nn.Parameter(torch.ones(3))
    carried = torch.ones(3, requires_grad=True) * 2
    with _float64_casts(torch):
        assert (x + torch.from_numpy(np.ones(3, np.float32))).dtype == torch.float64
        assert torch.where(x > 0, x, kept).dtype == torch.float64
        kept.add_(x)                       # writes into the user's float32 tensor
        kept[0] = x[0] * 5
        with pytest.raises(RuntimeError):  # a float32 weight outside the model still clashes
            torch.nn.functional.linear(x.reshape(1, 3), weight.reshape(1, 3))
        assert torch.cat([x, carried]).dtype == torch.float64   # type promotion, as torch does
    assert carried.dtype == torch.float32
    assert kept.dtype == torch.float32 and kept.tolist() == [5.0, 1.0, 1.0]
    assert torch.get_default_dtype() == torch.float32
