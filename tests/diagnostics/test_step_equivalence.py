"""check_step_equivalence: the gradient a train_step applies against loss_fn's on the whole batch.

Healthy steps of every common form stay quiet (whole batch, accumulation over equal or permuted
parts, token-normalised accumulation, clipping by norm and by value, a GradScaler, batch norm
over micro-batches, an LBFGS closure, keyword inputs); each wrong form is named by its pattern;
nothing of the user's changes; the user's exceptions are quoted, never raised.
"""
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
nn = torch.nn
F = nn.functional

from diagnostics import DiagnosticsError, check_step_equivalence  # noqa: E402
from diagnostics.tools.step_equivalence import judge  # noqa: E402

N, D, C = 24, 5, 3


def _mlp(norm=False, seed=0):
    torch.manual_seed(seed)
    layers = [nn.Linear(D, 12)] + ([nn.BatchNorm1d(12)] if norm else []) + [nn.Tanh(),
                                                                           nn.Linear(12, C)]
    return nn.Sequential(*layers)


def _batch(seed=1):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(N, D, generator=generator), torch.randint(0, C, (N,), generator=generator)


def _check(step, *, model=None, optimizer=None, loss_fn=F.cross_entropy, batch=None,
           precision="float64"):
    model = model or _mlp()
    optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=0.1)
    inputs, targets = batch or _batch()
    return check_step_equivalence(model, loss_fn, inputs, targets, train_step=step,
                                  optimizer=optimizer, precision=precision)


def _named(result):
    alarms = [f for f in result if f.is_alarm]
    assert len(alarms) == 1 and alarms[0].code == "STEP_NOT_OBJECTIVE", str(result)
    return alarms[0]


def _accumulate(parts, scale=lambda k: 1 / k, split=lambda x, k: x.chunk(k)):
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        for x, y in zip(split(inputs, parts), split(targets, parts)):
            (F.cross_entropy(model(x), y) * scale(parts)).backward()
        optimizer.step()
    return step


def plain_step(model, batch, optimizer):
    inputs, targets = batch
    optimizer.zero_grad()
    F.cross_entropy(model(inputs), targets).backward()
    optimizer.step()


# ---- healthy steps -------------------------------------------------------------------------

@pytest.mark.parametrize("precision, exact", [("float64", 1e-10), ("float32", 1e-5)])
def test_whole_batch_step_matches(precision, exact):
    result = _check(plain_step, precision=precision)
    assert result.passed and list(result) == []       # no STEP_NOT_OBJECTIVE, not even an info
    assert result.evidence["precision"] == precision
    assert result.evidence["relative_difference"] < exact
    assert str(result).startswith("step equivalence: PASSED: train_step's gradient is the "
                                  "gradient of loss_fn on the whole batch (relative difference")
    assert result.to_dict()["note"] == result.note and "no findings" not in str(result)


def test_a_healthy_step_gives_no_finding_a_wrong_one_does():
    """Filtering by the code reads as the bug only when there is one."""
    def codes(step):
        return [f.code for f in _check(step)]
    assert codes(plain_step) == [] and codes(_accumulate(3)) == []
    assert codes(_accumulate(3, scale=lambda k: 1.0)) == ["STEP_NOT_OBJECTIVE"]


@pytest.mark.parametrize("parts, scale", [(4, 1 / 4), (4, 1.0), (3, 1 / 9)])
def test_float32_judges_as_float64_does(parts, scale):
    step = _accumulate(parts, scale=lambda k: scale)
    results = [_check(step, precision=p) for p in ("float32", "float64")]
    assert results[0].passed == results[1].passed
    factors = [result[0].evidence["factor"] if result else 1.0 for result in results]
    assert factors[0] == pytest.approx(factors[1], rel=1e-4)


@pytest.mark.parametrize("parts", [2, 3, 4, 6])
def test_accumulation_over_equal_parts_matches(parts):
    assert _check(_accumulate(parts)).passed


def test_accumulation_over_a_random_permutation_matches():
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        for index in torch.randperm(N).split(8):
            (F.cross_entropy(model(inputs[index]), targets[index]) / 3).backward()
        optimizer.step()
    assert _check(step).passed


def test_token_normalised_accumulation_matches_and_mean_of_means_does_not():
    vocab = 7
    torch.manual_seed(0)
    model = nn.Sequential(nn.Embedding(vocab, 6), nn.Linear(6, vocab))
    tokens = torch.randint(0, vocab, (8, 6))
    labels = tokens.clone()
    for row, length in enumerate([6, 1, 2, 6, 3, 6, 1, 5]):
        labels[row, length:] = -100

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), ignore_index=-100)

    def tokens_step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        count = (targets != -100).sum()
        for x, y in zip(inputs.split(2), targets.split(2)):
            F.cross_entropy(model(x).reshape(-1, vocab), y.reshape(-1), ignore_index=-100,
                            reduction="sum").div(count).backward()
        optimizer.step()

    def means_step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        for x, y in zip(inputs.split(2), targets.split(2)):
            (loss_fn(model(x), y) / 4).backward()
        optimizer.step()

    optimizer = torch.optim.AdamW(model.parameters())
    good = check_step_equivalence(model, loss_fn, tokens, labels, train_step=tokens_step,
                                  optimizer=optimizer)
    assert good.passed, str(good)
    bad = _named(check_step_equivalence(model, loss_fn, tokens, labels, train_step=means_step,
                                        optimizer=optimizer))
    assert bad.evidence["pattern"] == judge.EQUAL and "weighted equally" in bad.message
    assert bad.evidence["weights"] == pytest.approx([0.25] * 4)
    # each micro-batch's share of the 30 scored tokens
    assert bad.evidence["documented_weights"] == pytest.approx([7 / 30, 8 / 30, 9 / 30, 6 / 30])


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_clipping_between_backward_and_step_is_declared_not_blamed(clip):
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        F.cross_entropy(model(inputs), targets).backward()
        if clip == "norm":
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
        else:
            torch.nn.utils.clip_grad_value_(model.parameters(), 1e-3)
        optimizer.step()
    result = _check(step)
    assert result.passed and not result, str(result)
    assert ("clip by " + clip) in result.note and result.evidence["clipping"] in result.note


def test_a_clip_after_a_wrong_normalisation_still_names_the_normalisation():
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        for x, y in zip(inputs.chunk(4), targets.chunk(4)):
            (F.cross_entropy(model(x), y) / 16).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-4)
        optimizer.step()
    finding = _named(_check(step))
    assert finding.evidence["pattern"] == judge.SCALED
    assert finding.evidence["factor"] == pytest.approx(0.25, rel=1e-6)
    assert "clip by norm" in finding.message


def test_grad_scaler_scaling_unscaling_and_clipping_match():
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)

    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        scaler.scale(F.cross_entropy(model(inputs), targets)).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3)
        scaler.step(optimizer)
        scaler.update()
    result = _check(step)
    assert result.passed, str(result)
    assert torch.amp.GradScaler.scale.__name__ == "scale"   # the check's wrapper is gone
    assert "_scales_recorded" not in repr(torch.amp.GradScaler.scale)


def test_a_step_the_grad_scaler_skips_is_not_judged_not_blamed():
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 12)

    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        loss = F.cross_entropy(model(inputs), targets) * float("inf")   # overflows, as fp16 can
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    result = _check(step)
    assert result.passed and "GradScaler skipped" in result[0].message, str(result)


def test_batch_norm_micro_batches_weighted_by_their_share_pass():
    result = _check(_accumulate(3), model=_mlp(norm=True))
    assert result.passed and not result, str(result)
    assert "batch-norm" in result.note


def test_batch_norm_micro_batches_summed_are_named():
    finding = _named(_check(_accumulate(3, scale=lambda k: 1.0), model=_mlp(norm=True)))
    assert finding.evidence["pattern"] == judge.SCALED
    assert finding.evidence["factor"] == pytest.approx(3.0, rel=1e-5)


def test_lbfgs_closure_is_run_as_the_optimizer_would():
    model = _mlp()

    def step(model, batch, optimizer):
        inputs, targets = batch

        def closure():
            optimizer.zero_grad()
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            return loss
        optimizer.step(closure)
    result = _check(step, model=model, optimizer=torch.optim.LBFGS(model.parameters()))
    assert result.passed, str(result)


def test_keyword_inputs_rows_are_read_from_input_ids():
    vocab = 9

    class Tagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed, self.head = nn.Embedding(vocab, 4), nn.Linear(4, vocab)

        def forward(self, input_ids, attention_mask):
            return self.head(self.embed(input_ids) * attention_mask[..., None])

    torch.manual_seed(0)
    model = Tagger()
    ids = torch.randint(0, vocab, (6, 4))
    inputs = {"input_ids": ids, "attention_mask": torch.ones(6, 4)}

    def loss_fn(logits, targets):
        return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))

    def step(model, batch, optimizer, keep=4):
        features, targets = batch
        optimizer.zero_grad()
        loss_fn(model(**{k: v[:keep] for k, v in features.items()}), targets[:keep]).backward()
        optimizer.step()
    finding = _named(check_step_equivalence(model, loss_fn, inputs, ids, train_step=step))
    assert finding.evidence["pattern"] == judge.DROPPED and "rows 4-5" in finding.message


# ---- wrong steps, by pattern ---------------------------------------------------------------

@settings(max_examples=12, deadline=None)
@given(parts=st.sampled_from([1, 2, 3, 4]), factor=st.sampled_from([0.25, 0.5, 2.0, 8.0]))
def test_a_constant_factor_is_named_with_its_value(parts, factor):
    finding = _named(_check(_accumulate(parts, scale=lambda k: factor / k)))
    assert finding.evidence["pattern"] == judge.SCALED and "scaled by" in finding.message
    assert finding.evidence["factor"] == pytest.approx(factor, rel=1e-6)


@settings(max_examples=10, deadline=None)
@given(size=st.integers(2, 11))
def test_a_loop_that_stops_short_names_the_rows_it_drops(size):
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        starts = list(range(0, N - size, size))       # stops one micro-batch short
        for start in starts:
            x, y = inputs[start:start + size], targets[start:start + size]
            (F.cross_entropy(model(x), y) * len(y) / N).backward()
        optimizer.step()
    finding = _named(_check(step))
    fed = len(range(0, N - size, size)) * size
    assert finding.evidence["pattern"] == judge.DROPPED and "dropped" in finding.message
    assert finding.evidence["rows_never_fed"] == N - fed


def test_a_loss_overwritten_in_the_loop_is_dropped():
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        for x, y in zip(inputs.chunk(3), targets.chunk(3)):
            loss = F.cross_entropy(model(x), y) / 3      # replaced, not accumulated
        loss.backward()
        optimizer.step()
    finding = _named(_check(step))
    assert finding.evidence["pattern"] == judge.DROPPED
    assert "fed to the model but their loss is dropped" in finding.message
    assert "rows 0-15 are fed to the model but their loss is dropped" in finding.message


def test_a_part_fed_twice_is_counted_twice():
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        for start in (0, 8, 16, 16):
            x, y = inputs[start:start + 8], targets[start:start + 8]
            (F.cross_entropy(model(x), y) / 3).backward()
        optimizer.step()
    finding = _named(_check(step))
    assert finding.evidence["pattern"] == judge.TWICE and "rows 16-23" in finding.message


def test_overlapping_parts_name_the_rows_counted_twice():
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        for start in (0, 10, 14):                        # 14-19 fall in two parts
            x, y = inputs[start:start + 10], targets[start:start + 10]
            (F.cross_entropy(model(x), y) * len(y) / N).backward()
        optimizer.step()
    finding = _named(_check(step))
    assert finding.evidence["pattern"] == judge.TWICE and "rows 14-19" in finding.message


def test_an_unrelated_objective_is_other_with_the_parameters_most_affected():
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        (F.cross_entropy(model(inputs), targets) + model[2].weight.pow(2).sum()).backward()
        optimizer.step()
    finding = _named(_check(step))
    assert finding.evidence["pattern"] == judge.OTHER
    assert finding.evidence["parameters"][0] == "2.weight"
    assert "a term outside loss_fn" in finding.message
    model = _mlp()
    declared = check_step_equivalence(model, F.cross_entropy, *_batch(), train_step=step,
                                      optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                                      declared=("regularizer",))
    assert declared.passed and not declared and "declared: a regularizer" in declared.note


@pytest.mark.parametrize("set_to_none", [True, False])
def test_zero_grad_inside_the_accumulation_loop_is_named_as_such(set_to_none):
    def step(model, batch, optimizer):
        inputs, targets = batch
        for x, y in zip(inputs.chunk(4), targets.chunk(4)):
            optimizer.zero_grad(set_to_none=set_to_none)
            (F.cross_entropy(model(x), y) / 4).backward()
        optimizer.step()
    for model in (_mlp(), _mlp(norm=True)):
        finding = _named(_check(step, model=model))
        assert "clears the gradients (zero_grad) after 3 of its 4 backward passes" in \
            finding.message and "only the last 1 pass" in finding.message


def test_tuple_inputs_are_positional_inputs():
    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(D, C), nn.Linear(2, C)

        def forward(self, x, extra):
            return self.a(x) + self.b(extra)

    torch.manual_seed(0)
    inputs = (torch.randn(N, D), torch.randn(N, 2))
    targets = torch.randint(0, C, (N,))

    def step(model, batch, optimizer, scale=1 / 3):
        (x, extra), y = batch
        optimizer.zero_grad()
        for start in range(0, N, 8):
            part = slice(start, start + 8)
            (F.cross_entropy(model(x[part], extra[part]), y[part]) * scale).backward()
        optimizer.step()
    model = TwoInputs()
    good = check_step_equivalence(model, F.cross_entropy, inputs, targets, train_step=step)
    assert good.passed and not good and "more than the batch" not in good.note, str(good)
    bad = _named(check_step_equivalence(model, F.cross_entropy, inputs, targets,
                                        train_step=lambda m, b, o: step(m, b, o, scale=1.0)))
    assert bad.evidence["factor"] == pytest.approx(3.0, rel=1e-4)


# ---- the user's things stay as they were ---------------------------------------------------

def test_model_optimizer_rng_and_hooks_are_left_as_they_were():
    patched = (torch.autograd.backward, torch.optim.Optimizer.zero_grad, nn.Module.zero_grad,
               torch.amp.GradScaler.scale)
    model = _mlp(norm=True)
    optimizer = torch.optim.Adam(model.parameters())
    plain_step(model, _batch(), optimizer)          # optimizer state and grads to keep
    state = {k: v.clone() for k, v in model.state_dict().items()}
    grads = [p.grad.clone() for p in model.parameters()]
    moments = [optimizer.state[p]["exp_avg"].clone() for p in model.parameters()]
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    expected = (random.random(), np.random.rand(), torch.rand(1))
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    _check(_accumulate(4, scale=lambda k: 1.0), model=model, optimizer=optimizer)
    assert (random.random(), np.random.rand(), torch.rand(1)) == expected
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state.items())
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, model.parameters()))
    assert all(torch.equal(m, optimizer.state[p]["exp_avg"])
               for m, p in zip(moments, model.parameters()))
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert not model._forward_pre_hooks
    from torch.optim.optimizer import _global_optimizer_pre_hooks
    assert not _global_optimizer_pre_hooks
    assert (torch.autograd.backward, torch.optim.Optimizer.zero_grad, nn.Module.zero_grad,
            torch.amp.GradScaler.scale) == patched


def test_a_step_that_trains_the_original_model_is_not_judged_and_is_undone():
    model = _mlp(norm=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    before = {k: v.clone() for k, v in model.state_dict().items()}

    def step(_model, batch, _optimizer):      # ignores its arguments
        inputs, targets = batch
        optimizer.zero_grad()
        F.cross_entropy(model(inputs.float()), targets).backward()
        optimizer.step()
    result = _check(step, model=model, optimizer=optimizer)
    assert result.passed and "not judged" in result[0].message
    assert "model it was built with" in result[0].message
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert all(p.grad is None for p in model.parameters())


def test_the_users_exceptions_are_quoted_not_raised():
    def step(model, batch, optimizer):
        raise RuntimeError("shapes went wrong in my step")
    result = _check(step)
    assert not result.passed and result[0].severity == "error"     # a CI gate must not pass
    assert "shapes went wrong in my step" in result[0].message
    assert "RuntimeError" in result[0].message


def test_a_loss_fn_that_fails_on_the_batch_is_quoted():
    result = _check(plain_step, loss_fn=lambda output, targets: output)   # not a scalar
    assert not result.passed and "could not be compared" in result[0].message
    assert "not a scalar" in result[0].message


def test_a_step_that_never_steps_is_a_warning():
    def step(model, batch, optimizer):
        inputs, targets = batch
        F.cross_entropy(model(inputs), targets).backward()
    finding = _named(_check(step))
    assert "without calling optimizer.step()" in finding.message


def test_a_step_written_for_float32_is_judged_in_float32_when_float64_is_asked():
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        model(torch.zeros(1, D, dtype=torch.float32))    # float64 copy: this raises
        F.cross_entropy(model(inputs), targets).backward()
        optimizer.step()
    result = _check(step)
    assert result.passed and result.evidence["precision"] == "float32", str(result)
    scaled = _named(_check(_accumulate(2, scale=lambda k: 0.1)))
    assert scaled.evidence["precision"] == "float64"


class _AlwaysDropping(nn.Module):
    """Functional dropout the check cannot turn off: every forward pass is random."""

    def __init__(self, head=True):
        super().__init__()
        self.layer = nn.Linear(D, C)

    def forward(self, x):
        return F.dropout(self.layer(x), 0.5, training=True)


def test_a_random_forward_is_judged_at_its_outputs():
    torch.manual_seed(0)
    assert _check(_accumulate(2), model=_AlwaysDropping()).passed
    finding = _named(_check(_accumulate(2, scale=lambda k: 1.0), model=_AlwaysDropping()))
    assert finding.evidence["factor"] == pytest.approx(2.0, rel=1e-6)


def test_a_random_forward_with_a_term_outside_the_outputs_is_not_judged():
    def step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        (F.cross_entropy(model(inputs), targets) + model.layer.weight.sum()).backward()
        optimizer.step()
    torch.manual_seed(0)
    result = _check(step, model=_AlwaysDropping())
    assert result.passed and "random" in result[0].message


def test_dropout_layers_are_turned_off_in_the_copy_only():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(D, 12), nn.Dropout(0.5), nn.ReLU(), nn.Linear(12, C))
    assert _check(_accumulate(3), model=model).passed
    assert _named(_check(_accumulate(3, scale=lambda k: 1.0), model=model))
    assert model[1].p == 0.5


@pytest.mark.parametrize("arguments, named", [
    (dict(train_step=None), "train_step"),
    (dict(loss_fn=3), "loss_fn"),
    (dict(inputs=[1, 2]), "inputs"),
    (dict(inputs=(1, 2)), "inputs"),
    (dict(optimizer=object()), "optimizer"),
    (dict(precision="double"), "precision"),
    (dict(declared=("clipping",)), "declared"),
])
def test_bad_arguments_name_the_argument(arguments, named):
    inputs, targets = _batch()
    call = dict(model=_mlp(), loss_fn=F.cross_entropy, inputs=inputs, targets=targets,
                train_step=plain_step, optimizer=None)
    call.update(arguments)
    with pytest.raises(DiagnosticsError, match=named):
        check_step_equivalence(call.pop("model"), call.pop("loss_fn"), call.pop("inputs"),
                               call.pop("targets"), **call)


# ---- the judge on vectors ------------------------------------------------------------------

def _calls(shares, weights, rng, width=4):
    """CallGradients for parts of ``shares[k]`` rows each, the step weighting part k's mean
    loss by ``weights[k]`` where the objective (a mean over all rows) weighs it by its share."""
    total, calls, start = sum(shares), [], 0
    for count, weight in zip(shares, weights):
        own = rng.normal(size=(count, width)) / count          # d mean_k / d outputs
        objective = own * count / total
        calls.append(judge.CallGradients(tuple(range(start, start + count)), weight * own,
                                         objective, own))
        start += count
    return calls, total


@settings(max_examples=40, deadline=None)
@given(shares=st.lists(st.integers(1, 20), min_size=2, max_size=6),
       factor=st.floats(0.05, 20), seed=st.integers(0, 10 ** 6))
def test_judge_reads_the_pattern_from_the_weights(shares, factor, seed):
    rng = np.random.default_rng(seed)
    documented = np.asarray(shares, dtype=float) / sum(shares)

    def verdict(weights, missing=None):
        calls, total = _calls(shares, weights, np.random.default_rng(seed))
        missing = missing or {}
        return judge.at_outputs(calls, missing, total + len(missing), 1e-7)
    assert verdict(documented).pattern is None
    scaled = verdict(factor * documented)
    assert (scaled.pattern is None) if abs(factor - 1) < 1e-6 else (
        scaled.pattern == judge.SCALED and scaled.factor == pytest.approx(factor))
    equal = verdict(np.full(len(shares), factor / len(shares)))
    if len(set(shares)) > 1:
        assert equal.pattern == judge.EQUAL
        assert equal.documented == pytest.approx(tuple(documented))
    dropped = documented.copy()
    dropped[-1] = 0
    assert verdict(dropped).pattern == judge.DROPPED
    doubled = documented.copy()
    doubled[0] *= 2
    assert verdict(doubled).pattern == judge.TWICE
    never = verdict(documented, missing={sum(shares): rng.normal(size=4)})
    assert never.pattern == judge.DROPPED and never.missing == (sum(shares),)

