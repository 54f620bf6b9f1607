"""Healthy reference benches at the seeds where a criterion once raised a false alarm: each
probe, run as the hunt runs it, must stay quiet."""
import pytest

from bug_injection import make_bench
from bug_injection.hunt import bench_case, single_threaded_torch
from bug_injection.reference.models import BACKENDS
from bug_injection.tools import run_tool


@pytest.fixture(autouse=True)
def one_torch_thread():
    with single_threaded_torch(BACKENDS):
        yield


def alarms(diagnosis):
    """The warnings and errors, as the hunt counts a false alarm."""
    return [str(f) for f in diagnosis.findings if f.is_alarm]


@pytest.mark.parametrize("backend", BACKENDS)
def test_confident_classifier_whose_loss_sits_near_chance_is_not_at_chance(backend):
    # its logits reach the hundreds: the loss is near ln 4 from a few confident mistakes,
    # not from uniform guesses
    diagnosis = run_tool("monitor", bench_case(make_bench("confident_mlp", backend, seed=5)))
    assert alarms(diagnosis) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp_still_converging_on_its_batch_does_not_fail_overfit(backend):
    # loss 1.444 -> 0.080 in 200 steps, 100% accuracy, still falling; the target is 0.069,
    # which overfit_one_batch reaches 10 steps into the extra round that a falling loss earns;
    # preflight stops once the batch is plainly being memorised, long before
    diagnosis = run_tool("preflight", bench_case(make_bench("mlp", backend, seed=1)))
    assert alarms(diagnosis) == []
    summary = diagnosis.report.item("overfit one batch").summary
    assert summary.startswith("PASSED, memorising: stopped at step ")
    assert int(summary.split("stopped at step ")[1].split()[0]) < 200


@pytest.mark.parametrize("backend", BACKENDS)
def test_regressor_with_a_fresh_init_on_small_targets_is_not_a_bad_initial_loss(backend):
    # MSE at init 2.2 times an all-zero output's: the targets are small, the net is fresh
    diagnosis = run_tool("preflight", bench_case(make_bench("regressor", backend, seed=11)))
    assert alarms(diagnosis) == []
