"""What a new user ran into: the tools trust the user's callables, never crash on user code,
and say what they did not check."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from diagnostics import find_lr


class _TwoInputs(nn.Module):
    """forward(x, scale): a model taking two positional inputs."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x, scale):
        return self.fc(x) * scale


def _classification(rows=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 4, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0).long()


def test_find_lr_passes_a_tuple_of_positional_inputs():
    torch.manual_seed(0)
    x, y = _classification()
    result = find_lr(_TwoInputs(), F.cross_entropy, ((x, torch.ones(32, 1)), y), steps=20,
                     progress=False)
    assert result.error is None and result.passed and result.suggestion > 0


def test_find_lr_turns_an_exception_in_forward_into_a_failed_result():
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, x):
            raise RuntimeError("shape mismatch in my layer")

    x, y = _classification()
    result = find_lr(Broken(), F.cross_entropy, (x, y), steps=10, progress=False)
    assert not result.passed and result.suggestion is None
    assert "RuntimeError: shape mismatch in my layer" in result.error
    assert "FAILED" in str(result) and result.to_dict()["error"] == result.error


# ----------------------------------------------------------- no_grad inside forward (item 6)
class _FrozenInForward(nn.Module):
    def __init__(self, detach=False):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.head = nn.Linear(8, 3)
        self.detach = detach

    def forward(self, x):
        if self.detach:
            return self.head(self.backbone(x).detach())
        with torch.no_grad():
            features = self.backbone(x)
        return self.head(features)


@pytest.mark.parametrize("detach", [False, True], ids=["no_grad", "detach"])
def test_check_gradients_names_parameters_cut_off_by_design_as_info(detach):
    from diagnostics import check_gradients
    torch.manual_seed(0)
    x, y = _classification(rows=4)
    report = check_gradients(_FrozenInForward(detach), F.cross_entropy, x, y)
    assert report.passed, str(report)
    assert [f.severity for f in report.findings if f.code == "GRADIENT_MISMATCH"] == []
    info = next(f for f in report.findings if f.code == "NO_GRADIENT")
    assert info.severity == "info" and "not differentiated by design" in info.message
    assert info.evidence["parameters"] == ["backbone.0.weight", "backbone.0.bias"]
    assert report.parameters["backbone.0.weight"].status == "not differentiated"
    assert report.parameters["head.weight"].status == "ok"
    assert "no graph path" in str(report) and "2 parameter(s) not differentiated" in str(report)


def test_a_custom_backward_returning_none_for_a_used_weight_is_still_a_mismatch():
    """The parameter is in the graph (the Function got it): a missing gradient is a bug."""
    from diagnostics import check_gradients

    class DropWeightGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            ctx.save_for_backward(x, weight)
            return x @ weight.t()

        @staticmethod
        def backward(ctx, grad):
            x, weight = ctx.saved_tensors
            return grad @ weight, None

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(3, 4))

        def forward(self, x):
            return DropWeightGrad.apply(x, self.weight)

    torch.manual_seed(0)
    x, y = _classification(rows=4)
    report = check_gradients(Model(), F.cross_entropy, x, y)
    assert not report.passed and "weight" in report.faulty


# ------------------------------------------------------------ overfit's likely causes (item 2)
def _regression(rows=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 4, generator=g)
    return x, x[:, :2].sum(1)


def _causes(result):
    return result.findings[0].evidence["likely_causes"]


@pytest.mark.filterwarnings("ignore:Using a target size")
def test_overfit_does_not_blame_a_shape_the_loss_squeezes_itself():
    from diagnostics import overfit_one_batch
    torch.manual_seed(0)
    x, t = _regression()
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    squeezing = overfit_one_batch(model, lambda p, y: F.mse_loss(p.squeeze(-1), y), x, t,
                                  steps=2, patience=0)
    assert not squeezing.passed and not any("broadcast" in c for c in _causes(squeezing))
    broadcasting = overfit_one_batch(model, F.mse_loss, x, t, steps=2, patience=0)
    assert any("broadcasts them" in c for c in _causes(broadcasting))


def test_overfit_names_frozen_parameters():
    from diagnostics import overfit_one_batch
    torch.manual_seed(0)
    x, y = _classification(rows=16)
    model = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 3))
    model[0].requires_grad_(False)
    result = overfit_one_batch(model, F.cross_entropy, x, y, steps=2, patience=0)
    assert _causes(result)[0].startswith(
        "160 of 259 parameters are frozen (requires_grad=False): 0.weight, 0.bias")


def test_overfit_target_accounts_for_the_floor_of_label_smoothing():
    from diagnostics import overfit_one_batch
    torch.manual_seed(0)
    x, y = _classification(rows=16)
    y = y.clamp(max=2)
    model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 3))
    smoothed = nn.CrossEntropyLoss(label_smoothing=0.1)
    result = overfit_one_batch(model, smoothed, x, y, steps=300)
    # the floor of 0.1 smoothing over 3 classes: the entropy of (0.933, 0.033, 0.033)
    floor = -(0.9 + 0.1 / 3) * np.log(0.9 + 0.1 / 3) - 2 * (0.1 / 3) * np.log(0.1 / 3)
    assert result.target_loss == pytest.approx(floor + 0.05 * (np.log(3) - floor), rel=0.02)
    assert result.passed, str(result)


def test_a_softmax_before_cross_entropy_still_fails_overfit():
    """The floor is the loss's, not the model's: probabilities fed as logits stay a failure."""
    from diagnostics import overfit_one_batch
    torch.manual_seed(0)
    x, y = _classification(rows=16)
    model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 3), nn.Softmax(dim=1))
    result = overfit_one_batch(model, F.cross_entropy, x, y, steps=100, patience=0)
    assert not result.passed and result.target_loss < 0.06


# ---------------------------------------------- check_gradients trusts the loss (item 1)
def test_check_gradients_accepts_a_loss_that_squeezes_the_output():
    from diagnostics import check_gradients
    torch.manual_seed(0)
    x, t = _regression(rows=6)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    report = check_gradients(model, lambda p, y: F.mse_loss(p.squeeze(-1), y), x, t)
    assert report.passed, str(report)


def test_preflight_checks_gradients_of_a_loss_that_squeezes_the_output():
    from diagnostics import preflight
    torch.manual_seed(0)
    x, t = _regression(rows=16)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    report = preflight(model, lambda p, y: F.mse_loss(p.squeeze(-1), y), x, t)
    assert report.item("gradient check").status == "PASS", str(report)
    assert report.item("shapes").status == "PASS" and report.passed


@pytest.mark.filterwarnings("ignore:Using a target size")
def test_check_gradients_still_refuses_a_loss_that_broadcasts():
    from diagnostics import check_gradients
    from diagnostics.errors import DiagnosticsError
    torch.manual_seed(0)
    x, t = _regression(rows=6)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    with pytest.raises(DiagnosticsError, match=r"targets: expected shape \(6, 1\).*got shape "
                                               r"\(6,\): loss_fn broadcasts them"):
        check_gradients(model, F.mse_loss, x, t)


def test_class_index_layouts_are_named_readably_when_the_loss_raises():
    from diagnostics import check_gradients
    from diagnostics.errors import DiagnosticsError

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 5)

        def forward(self, x):
            return self.fc(x)                 # (N, T, V)

    x = torch.randn(3, 2, 4)
    with pytest.raises(DiagnosticsError) as caught:
        check_gradients(Sequence(), F.cross_entropy, x, torch.zeros(2, 3, dtype=torch.long))
    assert ("targets: expected class indices of shape (3, 5) (classes on axis 1) or (3, 2) "
            "(classes on the last axis) for a model output of shape (3, 2, 5), got shape "
            "(2, 3); loss_fn raised") in str(caught.value)


def test_preflight_summary_counts_skipped_items():
    from diagnostics import preflight
    torch.manual_seed(0)
    x, y = _classification(rows=16)
    report = preflight(nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)),
                       F.cross_entropy, x, y)
    skipped = [item for item in report.items if item.status == "SKIP"]
    assert skipped and report.passed
    head = str(report).splitlines()[0]
    assert "all checks passed" not in head
    assert f"{len(skipped)} skipped (stale gradients: give train_step" in head


def test_a_gradient_of_about_zero_is_not_an_unexplained_ok_next_to_error_1():
    from diagnostics import check_gradients
    torch.manual_seed(0)
    x, y = torch.randn(8, 1, 6, 6), torch.randint(0, 3, (8,))
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(64, 3))
    report = check_gradients(model, F.cross_entropy, x, y)
    assert report.passed and report.parameters["0.bias"].max_rel_error > 0.5
    row = next(line for line in str(report).splitlines() if line.startswith("0.bias"))
    assert "ok (gradient ~0)" in row
    assert "note: gradient ~0 at 0.bias (|numerical - analytical|" in str(report)


def test_loss_plateau_points_to_the_lr_finder_that_exists():
    import diagnostics
    from tests.diagnostics.test_monitor_lifecycle import feed
    noise = np.random.default_rng(0).normal(0.0, 0.002, 300)
    plateau = next(f for f in feed(1.0 + noise).findings if f.code == "LOSS_PLATEAU")
    assert "diagnostics.find_lr(model, loss_fn, train_loader)" in plateau.suggestion
    assert "gradhunt preflight" not in plateau.suggestion and callable(diagnostics.find_lr)


# ------------------------------------------------------------------ validate_data (item 3)
def test_integer_token_ids_are_not_features_to_normalise():
    from diagnostics import validate_data
    ids = np.random.default_rng(0).integers(0, 1000, (64, 32))
    report = validate_data(ids)
    assert report.passed
    assert [(f.code, f.severity) for f in report.findings] == [("UNNORMALIZED_INPUT", "info")]
    assert "ids or categories" in report.findings[0].message
    pixels = np.random.default_rng(0).integers(0, 256, (64, 32)).astype(np.uint8)
    assert not validate_data(pixels).passed       # raw uint8 pixels are still judged


def test_validate_data_reads_a_dataloader():
    from torch.utils.data import DataLoader, TensorDataset

    from diagnostics import validate_data
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((40, 3)), dtype=torch.float32)
    y = torch.tensor(np.r_[np.zeros(38), np.ones(2)], dtype=torch.long)
    x[5, 1] = float("nan")
    report = validate_data(DataLoader(TensorDataset(x, y), batch_size=16))
    assert report.counts["train_rows"] == 40 and report.counts["train_batches_read"] == 3
    assert {f.code for f in report.findings} >= {"DATA_NONFINITE", "LABEL_IMBALANCE"}
    nan = next(f for f in report.findings if f.code == "DATA_NONFINITE")
    assert list(nan.evidence["example_rows"]) == [5]


# ------------------------------------------------------------ batch independence (item 4)
class _SeqFirstOutput(nn.Module):
    """An LSTM fed (batch, seq, features) whose output is transposed to (seq, batch, ...)."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(5, 6, batch_first=True)
        self.head = nn.Linear(6, 4)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out).transpose(0, 1)


def test_an_output_with_the_batch_on_another_axis_is_batch_mixing():
    from diagnostics import check_batch_independence
    torch.manual_seed(0)
    result = check_batch_independence(_SeqFirstOutput(), torch.randn(3, 7, 5))
    assert not result.passed and [f.code for f in result] == ["BATCH_MIXING"]
    assert result[0].message.startswith(
        "the output's first axis is 7, not the batch size 3: the batch axis moved "
        "(a transpose/view)")
    assert result[0].evidence["batch_axis"] == 1
    assert str(result).startswith("batch independence: FAILED\n  [error] BATCH_MIXING")


def test_the_one_shot_checks_return_a_result_like_the_other_tools():
    import diagnostics
    import gradhunt
    from diagnostics import CheckResult, check_batch_independence, check_label_range
    torch.manual_seed(0)
    quiet = check_batch_independence(nn.Linear(4, 2), torch.randn(3, 4))
    assert isinstance(quiet, CheckResult) and quiet == [] and quiet.passed
    assert str(quiet) == "batch independence: PASSED\n  no findings"
    labels = check_label_range(np.arange(1, 201) % 10 + 1, num_classes=10)
    assert not labels.passed and labels.findings[0].code == "LABEL_RANGE"
    assert labels.to_dict()["passed"] is False and str(labels).startswith("label range: FAILED")
    for name in ("check_batch_independence", "check_label_range", "check_batch_label_order",
                 "CheckResult"):
        assert name in diagnostics.__all__ and getattr(gradhunt, name) is getattr(diagnostics,
                                                                                  name)
