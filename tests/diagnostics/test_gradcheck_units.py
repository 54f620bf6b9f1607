"""Units of the gradient check: the pattern classifier (hypothesis), kinks, localization."""
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from diagnostics.gradcheck import classify_arrays
from diagnostics.gradcheck.kinks import Tolerance, estimate_slope
from diagnostics.gradcheck.localize import locate
from diagnostics.gradcheck.patterns import KINDS, Pattern
from diagnostics.gradcheck.points import Point
from tests.strategies import arrays, shapes

TOLERANCE = Tolerance(rtol=1e-4, atol=1e-8)


def _numerical(shape):
    """Gaussian "true gradients" without zeros, ties or symmetry."""
    return arrays(shape).map(lambda a: a + np.sign(a) * 0.1 + 1e-3 * np.arange(a.size).reshape(
        shape))


# ------------------------------------------------------------------ patterns
@given(data=st.data(), shape=shapes(min_dims=1, max_dims=3))
def test_sign_flip(data, shape):
    true = data.draw(_numerical(shape))
    pattern = classify_arrays(true, -true)
    assert (pattern.kind, pattern.factor) == ("sign flip", -1.0)


@given(data=st.data(), shape=shapes(min_dims=1, max_dims=3),
       factor=st.floats(-50, 50).filter(lambda k: min(abs(k - 1), abs(k + 1), abs(k)) > 0.01))
def test_constant_scale_and_its_factor(data, shape, factor):
    true = data.draw(_numerical(shape))
    pattern = classify_arrays(true, factor * true, batch_size=7)
    assume(abs(factor * 7 - 1) > 0.01 and abs(factor - 7) > 0.01)
    assert pattern.kind == "scale"
    assert pattern.factor == pytest.approx(factor, rel=1e-6)


@given(data=st.data(), batch=st.integers(2, 64), shape=shapes(min_dims=1, max_dims=2))
def test_mean_instead_of_sum_and_back(data, batch, shape):
    true = data.draw(_numerical(shape))
    mean = classify_arrays(true, true / batch, batch_size=batch)
    assert mean.kind == "mean instead of sum" and mean.factor == pytest.approx(1 / batch)
    assert f"batch size {batch}" in str(mean)
    assert classify_arrays(true, true * batch, batch_size=batch).kind == "sum instead of mean"


@given(data=st.data(), side=st.integers(2, 6))
def test_transpose(data, side):
    true = data.draw(_numerical((side, side)))
    assert classify_arrays(true, true.T).kind == "transpose"


@given(data=st.data(), shape=shapes(min_dims=2, max_dims=3, min_side=2))
def test_zeroed_rows_are_named(data, shape):
    true = data.draw(_numerical(shape))
    rows = data.draw(st.lists(st.integers(0, shape[0] - 1), min_size=1, max_size=shape[0] - 1,
                              unique=True))
    spoiled = true.copy()
    spoiled[rows] = 0
    pattern = classify_arrays(true, spoiled)
    assert pattern.kind == "zeroed"
    assert pattern.detail == f"rows [{', '.join(map(str, sorted(rows)))}] of {shape[0]}"


@given(data=st.data(), shape=shapes(min_dims=1, max_dims=3))
def test_zeroed_elements(data, shape):
    true = data.draw(_numerical(shape))
    assume(true.size >= 2)
    flat = data.draw(st.lists(st.integers(0, true.size - 1), min_size=1,
                              max_size=true.size - 1, unique=True))
    spoiled = true.copy().reshape(-1)
    spoiled[flat] = 0
    pattern = classify_arrays(true, spoiled.reshape(shape))
    assert pattern.kind == "zeroed"
    assert classify_arrays(true, np.zeros(shape)).detail == "all elements"


@given(data=st.data(), shape=shapes(min_dims=1, max_dims=3))
def test_unrelated_gradients_are_unexplained(data, shape):
    true, other = data.draw(_numerical(shape)), data.draw(_numerical(shape))
    assume(true.size >= 2)
    assert classify_arrays(true, other).kind == "unexplained"


SPOILERS = {"sign flip": lambda t: -t, "scale": lambda t: 2.5 * t, "transpose": np.transpose,
            "zeroed": lambda t: np.where(np.arange(t.size).reshape(t.shape) % 3 == 0, 0.0, t),
            "unexplained": lambda t: t + np.cos(np.arange(t.size).reshape(t.shape))}


@given(data=st.data(), side=st.integers(2, 5), kind=st.sampled_from(sorted(SPOILERS)),
       known=st.integers(0, 3), seed=st.integers(0, 1000))
def test_directions_measured_already_give_the_same_pattern_at_no_cost(data, side, kind, known,
                                                                      seed):
    """A check's directional probes (random unit directions with their true slopes) are the
    classifier's first directions: the pattern is the same as with fresh ones, and the true
    gradient is never measured again along them (nor along a multiple of them)."""
    from diagnostics.gradcheck.patterns import classify

    true = data.draw(_numerical((side, side)))
    analytic = SPOILERS[kind](true)
    rng = np.random.default_rng(seed)
    directions = [u / np.linalg.norm(u) for u in rng.standard_normal((known, side, side))]
    asked = []

    def true_slope(w):
        asked.append(w)
        return float(np.vdot(true, w))

    pattern = classify(analytic, true_slope, rng=np.random.default_rng(seed + 1),
                       measured=[(u, float(np.vdot(true, u))) for u in directions])
    assert pattern.kind == kind == classify_arrays(true, analytic, seed=seed).kind
    for w in asked:
        for u in directions:
            c = float(np.vdot(w, u))
            assert not np.allclose(w, c * u, rtol=0, atol=1e-9 * np.abs(w).max())


def test_pattern_text_and_kinds():
    assert str(Pattern("scale", 0.5)) == "scale (factor 0.5 = 1/2)"
    assert str(Pattern("sign flip", -1.0)) == "sign flip (factor -1)"
    with pytest.raises(ValueError, match="Pattern.kind"):
        Pattern("wobble")
    assert set(KINDS) >= {"transpose", "zeroed", "unexplained"}


# --------------------------------------------------------------------- kinks
def _slope(f, analytic=None, step=1e-6):
    return estimate_slope(f, f(0.0), step=step, tolerance=TOLERANCE, analytic=analytic)


@given(x=st.floats(-2, 2), wrong=st.floats(0.01, 5))
def test_smooth_functions_agree_or_mismatch(x, wrong):
    f = lambda t: np.sin(x + t) + 0.5 * (x + t) ** 2
    right = np.cos(x) + x
    assert _slope(f, right).status == "ok"
    assert _slope(f, right + wrong * max(1, abs(right))).status == "mismatch"


@pytest.mark.parametrize("analytic", [0.0, 1.0, 0.5, 3.0])
def test_kink_at_the_point_is_not_a_mismatch(analytic):
    relu_sum = lambda t: max(t, 0.0) + max(-2 * t, 0.0) + 0.3 * t
    assert _slope(relu_sum, analytic).status in ("kink", "ok")
    assert _slope(lambda t: abs(t), analytic).status in ("kink", "ok")


@given(offset=st.floats(0.01, 0.99))
def test_kink_crossed_inside_the_step_is_never_a_mismatch(offset):
    """A ReLU whose kink lies inside the first step: the tenfold smaller step sees the right
    slope when it stays clear of the kink, and reports the kink when it does not."""
    f = lambda t: max(t + offset * 1e-6, 0.0) * 2.0 + t
    status = _slope(f, 3.0).status
    assert status == "ok" if offset > 0.101 else status == "kink" if offset < 0.099 else True


def test_ties_with_cancelling_slopes_are_kinks():
    """max over tied windows, weighted with mixed signs: one-sided slopes nearly agree, but
    keep disagreeing as the step shrinks."""
    u = np.array([[0.3, -1.2], [0.9, 0.1], [-0.4, 0.8]])
    weights = np.array([1.0, -0.999, 0.5])
    f = lambda t: float(weights @ np.max(t * u, axis=1))
    analytic = float(weights @ u[:, 0])   # the backward routes to the first of the tied values
    assert _slope(f, analytic).status in ("kink", "ok")


# -------------------------------------------------------------- localization
def _chain(names, wrong, *, root_output_wrong=False):
    """Points of a Sequential of ``names`` (inputs of the first skipped, as data)."""
    points, status = [], {}
    for position, name in enumerate(names):
        stack = (("", 0), (name, 0))
        for kind in ("input", "output"):
            if kind == "input" and position == 0:
                continue
            point = Point(name, 0, kind, 0, (2, 3), stack)
            points.append(point)
            status[point.key] = "mismatch" if (name, kind) in wrong else "ok"
    root = Point("", 0, "output", 0, (2, 3), (("", 0),))
    points.append(root)
    status[root.key] = "mismatch" if root_output_wrong else "ok"
    return points, status


def test_birth_between_a_wrong_input_and_a_right_output():
    wrong = {("0", "output"), ("1", "input"), ("1", "output"), ("2", "input")}
    points, status = _chain(["0", "1", "2", "3"], wrong)
    births = locate(points, status, {"0.weight": "mismatch", "2.weight": "ok"})
    assert [(b.module, b.path) for b in births] == [("2", "input")]


def test_wrong_model_output_blames_the_loss():
    wrong = {("0", "output"), ("1", "input"), ("1", "output")}
    points, status = _chain(["0", "1"], wrong, root_output_wrong=True)
    assert [(b.module, b.path) for b in locate(points, status, {})] == [("loss", "input")]


def test_parameter_birth_and_unknown_points_skipped():
    points, status = _chain(["0", "1", "2"], {("0", "output"), ("1", "input")})
    births = locate(points, status, {"2.bias": "mismatch", "0.weight": "mismatch"})
    assert {(b.module, b.path) for b in births} == {("2", "bias"), ("1", "input")}
    status[points[2].key] = "unchecked"     # '1' output unknown: the span widens to the model
    births = locate(points, status, {})
    assert [(b.module, b.path) for b in births] == [("", "internal")]


def test_nested_module_and_glue_between_sub_modules():
    block = ("", 0), ("1", 0)
    points = [Point("1", 0, "input", 0, (2,), block),
              Point("1.fc", 0, "input", 0, (2,), block + (("1.fc", 0),)),
              Point("1.fc", 0, "output", 0, (2,), block + (("1.fc", 0),)),
              Point("1", 0, "output", 0, (2,), block)]
    status = {p.key: "ok" for p in points}
    status[points[0].key] = status[points[1].key] = "mismatch"
    assert [(b.module, b.path) for b in locate(points, status, {})] == [("1.fc", "input")]
    status = {p.key: "mismatch" for p in points}
    status[points[3].key] = "ok"
    assert [(b.module, b.path) for b in locate(points, status, {})] == [("1", "internal")]


def test_unknown_model_output_does_not_blame_the_loss():
    points, status = _chain(["0", "1"], {("0", "output"), ("1", "input")})
    status[points[-1].key] = status[points[-2].key] = "unchecked"
    assert [(b.module, b.path) for b in locate(points, status, {})] == [("", "internal")]


def test_sibling_outputs_are_not_a_birth():
    stack = (("", 0), ("pair", 0))
    first = Point("pair", 0, "output", 0, (2,), stack, tensors=2)
    second = Point("pair", 0, "output", 1, (2,), stack, tensors=2)
    after = Point("next", 0, "input", 0, (2,), (("", 0), ("next", 0)))
    done = Point("next", 0, "output", 0, (2,), (("", 0), ("next", 0)))
    status = {first.key: "mismatch", second.key: "ok", after.key: "mismatch", done.key: "ok"}
    births = locate([first, second, after, done], status, {})
    assert [(b.module, b.path) for b in births] == [("next", "input")]
