"""The Monitor inside a 2-rank torch.distributed job (gloo over 127.0.0.1, spawned processes).

Every job runs in one spawned group (starting processes dominates the cost); the job in which
rank 1 raises and leaves comes last."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics.monitor.checks.ranks import RankSample, RanksView, run_rank_checks
from diagnostics.monitor.distributed import _merge, _named_ranks
from diagnostics import Finding

torch = pytest.importorskip("torch")
if not torch.distributed.is_available():
    pytest.skip("torch.distributed is not available", allow_module_level=True)

from scenarios.distributed import job, launch  # noqa: E402

TIMEOUT = 5.0
STALL_TIMEOUT = 1.5
JOBS = [job("ddp_wrapper", sinks_on="rank0"), job("ddp_module", watch="module", sinks_on="all"),
        job("manual_average", sync="average"), job("manual_sum", sync="sum"),
        job("no_sampler", shard=False), job("not_reduced", sync="none"),
        job("local_reset", reset_rank=1), job("nan_on_rank1", sync="none", nan_rank=1),
        job("bn_broadcast", norm=True),
        job("bn_broadcast_module_eval", norm=True, watch="module", eval_every=3),
        job("bn_broadcast_eval_inner_module", norm=True, watch="module", eval_every=4,
            eval_through="module"),
        job("bn_broadcast_pseudo_labels", norm=True, watch="module", eval_every=2,
            eval_mode=False),
        job("bn_no_broadcast", norm=True, broadcast_buffers=False),
        job("bn_no_broadcast_same_data", norm=True, broadcast_buffers=False, shard=False),
        job("bn_no_broadcast_eval", norm=True, broadcast_buffers=False, eval_every=4),
        job("bn_no_broadcast_reduced_before_eval", norm=True, broadcast_buffers=False,
            eval_every=4, sync_buffers="eval"),
        job("bn_manual", norm=True, sync="average"),
        job("bn_manual_buffers_reduced", norm=True, sync="average", sync_buffers=True),
        job("no_buffers_no_broadcast", broadcast_buffers=False),
        job("rank1_stalls", sync="none", stall_rank=1, stall_seconds=3 * STALL_TIMEOUT,
            rank_timeout=STALL_TIMEOUT),
        job("rank1_raises", sync="none", raise_rank=1, rank_timeout=TIMEOUT)]


@pytest.fixture(scope="module")
def outcome():
    return launch(JOBS)


def codes(outcome, name, rank=0):
    return [f["code"] for f in outcome[name][rank]["findings"]]


def finding(outcome, name, code):
    return next(f for f in outcome[name][0]["findings"] if f["code"] == code)


@pytest.mark.parametrize("name", ["ddp_wrapper", "ddp_module", "manual_average"])
def test_healthy_jobs_have_no_finding(outcome, name):
    assert codes(outcome, name) == [] and codes(outcome, name, rank=1) == []


def test_one_exchange_per_sampled_step_only(outcome):
    # 12 steps, every=2: steps 0, 1, 2, 4, 6, 8, 10 are sampled
    assert [r["exchanges"] for r in outcome["ddp_wrapper"]] == [7, 7]
    assert outcome["rank1_raises"][0]["exchanges"] == 3     # steps 0, 1, 2; step 4 failed


def test_wrapper_and_module_give_the_same_parameter_names(outcome):
    names = outcome["ddp_wrapper"][0]["parameters"]
    assert names == outcome["ddp_module"][0]["parameters"] == ["0.weight", "0.bias",
                                                               "2.weight", "2.bias"]


def test_sinks_write_on_rank0_unless_asked(outcome):
    rank0, rank1 = outcome["ddp_wrapper"]
    assert rank0["csv_rows"] == 7 and rank1["csv_rows"] is None   # steps 0, 1, 2, 4, .., 10
    assert [r["csv_rows"] for r in outcome["ddp_module"]] == [7, 7]


def test_summed_all_reduce(outcome):
    assert codes(outcome, "manual_sum") == ["GRADIENTS_NOT_SYNCED"]
    found = finding(outcome, "manual_sum", "GRADIENTS_NOT_SYNCED")
    assert found["evidence"]["how"] == "summed" and found["evidence"]["world_size"] == 2
    assert "p.grad /= 2" in found["suggestion"]


def test_no_distributed_sampler(outcome):
    assert codes(outcome, "no_sampler") == ["SAME_BATCH_ON_RANKS"]
    assert "DistributedSampler" in finding(outcome, "no_sampler", "SAME_BATCH_ON_RANKS")[
        "suggestion"]


def test_gradients_never_reduced(outcome):
    assert sorted(codes(outcome, "not_reduced")) == ["GRADIENTS_NOT_SYNCED", "RANKS_DIVERGED"]
    assert finding(outcome, "not_reduced", "GRADIENTS_NOT_SYNCED")["evidence"]["how"] == \
        "not reduced"


def test_rank_local_parameter_change(outcome):
    assert codes(outcome, "local_reset") == ["RANKS_DIVERGED"]
    found = finding(outcome, "local_reset", "RANKS_DIVERGED")
    assert found["location"] == "2.bias" and found["evidence"]["parameters"] == ["2.bias"]


@pytest.mark.parametrize("name", ["bn_broadcast", "bn_broadcast_module_eval",
                                  "bn_manual_buffers_reduced", "no_buffers_no_broadcast"])
def test_buffers_kept_in_step_are_quiet(outcome, name):
    # DDP's broadcast (the wrapper or the module watched, evaluation passes between steps),
    # an all-reduce of the buffers after each step, a model without buffers
    assert codes(outcome, name) == [] and codes(outcome, name, rank=1) == []


def test_buffers_compared_only_after_ddp_broadcast_them(outcome):
    # a no_grad pass in training mode updates the statistics per rank and makes DDP skip its
    # broadcast in the next forward: that forward is not compared
    assert "BUFFERS_DIVERGED" not in codes(outcome, "bn_broadcast_pseudo_labels")


def test_identical_batches_keep_buffers_identical(outcome):
    assert codes(outcome, "bn_no_broadcast_same_data") == ["SAME_BATCH_ON_RANKS"]


@pytest.mark.parametrize("name", ["bn_no_broadcast", "bn_manual"])
def test_buffers_that_drift_apart_without_evaluation_are_info(outcome, name):
    assert codes(outcome, name) == ["BUFFERS_DIVERGED"]
    assert codes(outcome, name, rank=1) == ["BUFFERS_DIVERGED"]
    found = finding(outcome, name, "BUFFERS_DIVERGED")
    evidence = found["evidence"]
    assert found["severity"] == "info" and found["location"] == "1.running_mean"
    assert evidence["buffers"] == ["1.running_mean", "1.running_var"]   # not the step count
    assert evidence["when"] == "training" and evidence["step"] == 10
    assert evidence["differing_ranks"] == [0, 1]
    assert all(1e-4 < v < 10 for v in evidence["relative_difference"].values())
    assert "1.running_mean (relative difference" in found["message"]
    assert "no evaluation pass" in found["message"]
    assert "--dist-bn reduce" in found["suggestion"]
    assert "SyncBatchNorm" in found["suggestion"] and "all_reduce" in found["suggestion"]
    assert outcome[name][0]["seconds"] < 30


def test_buffers_apart_at_an_evaluation_pass(outcome):
    # no broadcast, evaluation passes before steps 0, 4, 8, nothing averages the buffers:
    # info at steps 1 and 2, the warning once the pass before step 4 is compared
    name = "bn_no_broadcast_eval"
    assert codes(outcome, name) == ["BUFFERS_DIVERGED"]
    assert codes(outcome, name, rank=1) == ["BUFFERS_DIVERGED"]
    found = finding(outcome, name, "BUFFERS_DIVERGED")
    evidence = found["evidence"]
    assert found["severity"] == "warning" and found["location"] == "1.running_mean"
    assert evidence["when"] == "evaluation" and evidence["step"] == 8
    assert evidence["buffers"] == ["1.running_mean", "1.running_var"]
    assert found["message"].startswith("at the evaluation pass during step 8, 2 of 3 buffers")
    assert "evaluated with different statistics" in found["message"]
    assert "broadcast_buffers=True" in found["suggestion"]
    assert [a for a in outcome[name][0]["announced"] if a[0] == "BUFFERS_DIVERGED"] == [
        ["BUFFERS_DIVERGED", "info"], ["BUFFERS_DIVERGED", "warning"]]


def test_evaluation_that_bypasses_the_broadcast_is_info(outcome):
    # DDP broadcasts, but the pass calls the module inside it (transformers' Trainer): the
    # ranks evaluate with their last batch's update; the next training forward undoes it
    name = "bn_broadcast_eval_inner_module"
    assert codes(outcome, name) == ["BUFFERS_DIVERGED"]
    found = finding(outcome, name, "BUFFERS_DIVERGED")
    assert found["severity"] == "info" and found["evidence"]["when"] == "evaluation"
    assert found["evidence"]["kept_in_step_while_training"] is True
    assert "without DDP's copy" in found["message"]


def test_buffers_averaged_before_each_evaluation_are_quiet(outcome):
    # timm's --no-ddp-bb --dist-bn reduce: apart while training (the info at steps 1 and 2,
    # before any evaluation pass after the first step), the same at every evaluation pass
    name = "bn_no_broadcast_reduced_before_eval"
    assert codes(outcome, name) == [] and codes(outcome, name, rank=1) == []
    assert ["BUFFERS_DIVERGED", "info"] in outcome[name][0]["announced"]


def test_finding_on_one_rank_only(outcome):
    nan = finding(outcome, "nan_on_rank1", "NAN_LOSS")
    assert nan["evidence"]["ranks"] == [1]
    assert nan["message"].endswith("(on rank 1 only, of 2)")
    assert nan["evidence"]["step"] == 3


def test_a_rank_that_raises_leaves_a_finding_not_a_hang(outcome):
    rank0, rank1 = outcome["rank1_raises"]
    assert rank1["raised"].startswith("planted failure on rank 1")
    assert rank0["raised"] is None
    stopped = finding(outcome, "rank1_raises", "RANK_STOPPED")
    assert stopped["evidence"]["ranks"] == [1] and stopped["evidence"]["step"] == 4
    assert stopped["message"].startswith("rank 1 did not reach the Monitor's exchange at step 4")
    assert rank0["seconds"] < TIMEOUT + 15


# ------------------------------------------------------------- single-process parts
def _sample(step, params, local=None, final=None, inputs=None, buffers=None):
    nan = np.full_like(params, np.nan)
    return RankSample(step, params, nan if local is None else local,
                      nan if final is None else final,
                      np.full((params.shape[0], 3), np.nan) if inputs is None else inputs,
                      buffers)


def test_checks_stay_quiet_on_identical_ranks_and_on_rounding():
    rng = np.random.default_rng(0)
    params = np.repeat(rng.normal(size=(1, 3, 3)), 2, axis=0)
    params[..., 2] = np.abs(params[..., 2]) + 1
    local = rng.normal(size=(2, 3, 3))
    local[..., 2] = np.abs(local[..., 2]) + 1
    final = np.repeat(local.mean(axis=0, keepdims=True), 2, axis=0) * (1 + 1e-9)
    inputs = rng.normal(size=(2, 3))
    view = RanksView(2, ["a", "b", "c"],
                     [_sample(s, params * (1 + 1e-9 * np.arange(2))[:, None, None], local,
                              final, inputs) for s in (0, 1, 2)])
    assert run_rank_checks(view) == []


@settings(max_examples=40, deadline=None)
@given(world=st.integers(2, 8), seed=st.integers(0, 2**16), summed=st.booleans())
def test_summed_gradients_are_told_from_averaged_ones(world, seed, summed):
    rng = np.random.default_rng(seed)
    params = np.repeat(np.abs(rng.normal(size=(1, 4, 3))) + 1, world, axis=0)
    local = rng.normal(size=(world, 4, 3))
    local[..., 2] = np.abs(local[..., 2]) * 10 + np.abs(local[..., 0]) + np.abs(local[..., 1])
    reduced = local.sum(axis=0) if summed else local.mean(axis=0)
    final = np.repeat(reduced[None].astype(np.float32).astype(np.float64), world, axis=0)
    view = RanksView(world, list("abcd"), [_sample(0, params, local, final)])
    found = run_rank_checks(view)
    assert [f.code for f in found] == (["GRADIENTS_NOT_SYNCED"] if summed else [])


def _buffer_view(prints, names=("bn.running_mean", "bn.running_var"), eval_step=None,
                 eval_prints=None):
    world = prints.shape[0]
    sample = _sample(4, np.ones((world, 1, 3)), buffers=prints)
    if eval_step is not None:
        sample.eval_step, sample.eval_buffers = np.asarray(eval_step, float), eval_prints
    return RanksView(world, ["w"], [sample], buffer_names=list(names))


@settings(max_examples=40, deadline=None)
@given(world=st.integers(2, 6), odd=st.integers(0, 5), seed=st.integers(0, 2**16),
       shift=st.floats(1e-4, 1e3), at_eval=st.booleans())
def test_buffers_diverged_names_the_buffers_and_ranks(world, odd, seed, shift, at_eval):
    rng = np.random.default_rng(seed)
    prints = np.repeat(rng.normal(size=(1, 2, 3)), world, axis=0)
    prints[..., 2] = np.abs(prints[..., 2]) + 1
    assert run_rank_checks(_buffer_view(prints)) == []
    odd %= world
    apart = prints.copy()
    apart[odd, 1, 0] += shift * apart[odd, 1, 2]
    view = (_buffer_view(apart, eval_step=[3] * world, eval_prints=apart) if at_eval
            else _buffer_view(apart))
    found = run_rank_checks(view)
    assert [(f.code, f.severity) for f in found] == [
        ("BUFFERS_DIVERGED", "warning" if at_eval else "info")]
    evidence = found[0].evidence
    assert evidence["buffers"] == ["bn.running_var"] and found[0].location == "bn.running_var"
    assert evidence["differing_ranks"] == (list(range(world)) if odd == 0 else [0, odd])
    assert evidence["relative_difference"]["bn.running_var"] > shift / 2
    assert evidence["when"] == ("evaluation" if at_eval else "training")


def test_buffers_the_same_at_an_evaluation_pass_are_quiet_only_after_the_first_step():
    same = np.array([[[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]]])
    apart = np.array([[[1.0, 2.0, 3.0]], [[1.5, 2.0, 3.5]]])
    names = ["bn.running_mean"]

    def severities(**evaluation):
        return [f.severity for f in run_rank_checks(_buffer_view(apart, names, **evaluation))]
    assert severities() == ["info"]                                      # no evaluation pass
    assert severities(eval_step=[2, 2], eval_prints=same) == []          # averaged before it
    assert severities(eval_step=[0, 0], eval_prints=same) == ["info"]    # before training
    assert severities(eval_step=[2, np.nan], eval_prints=same) == ["info"]   # rank 0 only
    assert severities(eval_step=[2, 3], eval_prints=same) == ["info"]    # not the same pass
    assert severities(eval_step=[2, 2], eval_prints=apart) == ["warning"]
    kept = _buffer_view(same, names, eval_step=[2, 2], eval_prints=apart)   # broadcast, but
    assert [f.severity for f in run_rank_checks(kept)] == ["info"]        # not at the pass


def test_buffers_not_taken_on_a_rank_are_not_compared():
    prints = np.array([[[1.0, 2.0, 3.0]], [[np.nan] * 3]])
    assert run_rank_checks(_buffer_view(prints, names=["bn.running_mean"])) == []
    prints[1] = [[1.0, 2.0, 3.0 * (1 + 1e-9)]]           # rounding is not a difference
    assert run_rank_checks(_buffer_view(prints, names=["bn.running_mean"])) == []


def test_merge_names_the_ranks_and_keeps_differing_evidence():
    a = Finding("NAN_LOSS", "error", "loss", "the loss became nan at step 3", "", {"step": 3})
    b = Finding("NAN_LOSS", "error", "loss", "the loss became nan at step 4", "", {"step": 4})
    merged = _merge({0: a, 1: b}, 2)
    assert merged.evidence["ranks"] == [0, 1] and merged.message == a.message
    assert merged.evidence["per_rank"] == {0: {"step": 3}, 1: {"step": 4}}
    only = _merge({2: b}, 4)
    assert only.evidence["ranks"] == [2] and "per_rank" not in only.evidence
    assert only.message.endswith("(on rank 2 only, of 4)")


def test_missing_ranks_are_read_from_the_monitored_barrier_error():
    assert _named_ranks("[Rank 0]: Ranks 1, 3 failed to pass monitoredBarrier in 10 ms") == [1, 3]
    assert _named_ranks("Rank 2 failed to pass monitoredBarrier in 10 ms") == [2]
    assert _named_ranks("Connection closed by peer") == []


def test_monitor_arguments_are_checked():
    from diagnostics import Monitor
    from diagnostics.errors import DiagnosticsError

    model = torch.nn.Linear(2, 2)
    with pytest.raises(DiagnosticsError, match="sinks_on"):
        Monitor(model, sinks_on="rank1")
    with pytest.raises(DiagnosticsError, match="rank_timeout"):
        Monitor(model, rank_timeout=0)


def test_a_stalled_rank_is_named_after_the_timeout(outcome):
    rank0, rank1 = outcome["rank1_stalls"]
    stopped = finding(outcome, "rank1_stalls", "RANK_STOPPED")
    assert stopped["evidence"]["ranks"] == [1] and stopped["evidence"]["step"] == 4
    assert "timed out" in stopped["evidence"]["error"].lower() or "timeout" in stopped[
        "evidence"]["error"].lower()
    assert STALL_TIMEOUT < rank0["seconds"] < 3 * STALL_TIMEOUT + 10
    assert rank0["exchanges"] == 3 and rank1["raised"] is None
    # rank 1, awake again, finds rank 0 gone from the exchange and finishes its loop too
    back = [f for f in rank1["findings"] if f["code"] == "RANK_STOPPED"]
    assert back and back[0]["evidence"]["ranks"] == [0] and rank1["exchanges"] == 3


def test_only_persistent_buffers_are_compared_and_shared_ones_once():
    from diagnostics.monitor.probes.ranks import persistent_buffers

    norm = torch.nn.BatchNorm1d(3)
    model = torch.nn.Sequential(norm, torch.nn.Linear(3, 3), norm)
    model[1].register_buffer("rotary_cache", torch.ones(4), persistent=False)
    model[1].register_buffer("ema", torch.zeros(3))
    names = [name for name, _, _ in persistent_buffers(model)]
    assert names == ["0.running_mean", "0.running_var", "0.num_batches_tracked", "1.ema"]
    model._ddp_params_and_buffers_to_ignore = ["1.ema"]   # rank-local, as DDP was told
    assert [name for name, _, _ in persistent_buffers(model)][-1] == "0.num_batches_tracked"
