"""The hunt: every planted bug caught by its expected codes and localized to its ground truth,
on both backends; every healthy control clean. One hunt run serves all the assertions."""
import pytest
from hypothesis import given, settings, strategies as st

from bug_injection import catalog, get_bug, make_bench
from bug_injection.hunt import (CLEAN, FOUND, MISPLACED, MISSED, hunt, judge, run_bug,
                                single_threaded_torch)
from bug_injection.tools import Diagnosis
from bug_injection.reference.models import BACKENDS
from diagnostics import Finding

CASES = [(bug.name, backend) for bug in catalog() for backend in bug.backends]
CONTROLS = [(tool, setup, backend) for tool, setup in
            dict.fromkeys((bug.tool, bug.setup) for bug in catalog()) for backend in BACKENDS]


@pytest.fixture(scope="module")
def result():
    return hunt()


@pytest.fixture(scope="module")
def outcomes(result):
    return {(o.name, o.backend): o for o in result.bugs}


@pytest.mark.parametrize("case", CASES, ids=["-".join(c) for c in CASES])
def test_planted_bug_is_found_and_localized(outcomes, case):
    outcome = outcomes[case]
    bug = get_bug(case[0])
    assert outcome.verdict == FOUND, (outcome.verdict, outcome.found, outcome.message)
    assert outcome.code in bug.codes
    if bug.culprit is not None:
        assert outcome.found.split(" ")[0].rstrip(",") == bug.culprit


@pytest.mark.parametrize("control", CONTROLS, ids=["-".join(c) for c in CONTROLS])
def test_healthy_control_is_clean(result, control):
    tool, setup, backend = control
    [outcome] = [o for o in result.controls if o.tool == tool and o.setup == setup
                 and o.backend == backend]
    assert outcome.verdict == CLEAN, (outcome.code, outcome.found, outcome.message)


def test_hunt_covers_catalogue_and_controls_and_is_json_ready(result):
    import json

    assert len(result.bugs) == len(CASES) and len(result.controls) == len(CONTROLS)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["bugs"] == len(CASES) and data["passed"] == result.passed
    assert result.score().startswith(f"score: {data['bugs_found']}/{len(CASES)} planted bugs")


@settings(max_examples=10)
@given(bug=st.sampled_from(catalog()), backend=st.sampled_from(BACKENDS),
       seed=st.integers(1, 2**16))
def test_bugs_are_found_at_other_seeds(bug, backend, seed):
    """Other weights and data than the hunt's seed 0: still found and localized."""
    with single_threaded_torch(BACKENDS):
        outcome = run_bug(bug, make_bench(bug.setup, backend, seed=seed))
    assert outcome.verdict == FOUND, (outcome.found, outcome.message)


def test_a_patch_left_behind_makes_the_run_an_error():
    import contextlib
    import dataclasses
    import types

    def leaky(bench):
        bench.loss_fn.forward = types.MethodType(lambda self, out, y: out, bench.loss_fn)
        return contextlib.nullcontext()

    bug = dataclasses.replace(get_bug("nonfinite_rows"), plant=leaky)
    outcome = run_bug(bug, make_bench("mlp", "minigrad"))
    assert outcome.verdict == "error"
    assert outcome.message.startswith("still patched after the run: module <loss_fn>.forward")


def _finding(code, location):
    return Finding(code, "error", location, "message")


def test_judge_needs_the_code_the_place_the_path_and_the_pattern():
    bug = get_bug("linear_input_transposed")
    hit = Diagnosis("gradcheck", [_finding("GRADIENT_MISMATCH", "2")], None,
                    {"2": "input"}, {"2": "transpose"})
    assert judge(bug, hit)[:2] == (FOUND, "2 input, transpose")
    wrong_place = Diagnosis("gradcheck", [_finding("GRADIENT_MISMATCH", "4")], None,
                            {"4": "input"}, {"4": "transpose"})
    assert judge(bug, wrong_place)[0] == MISPLACED
    wrong_pattern = Diagnosis("gradcheck", [_finding("GRADIENT_MISMATCH", "2")], None,
                              {"2": "input"}, {"2": "scale"})
    assert judge(bug, wrong_pattern)[0] == MISPLACED
    other_code = Diagnosis("monitor", [_finding("NAN_LOSS", "loss")], None)
    assert judge(bug, other_code) == (MISSED, "-", None)


def test_judge_without_a_culprit_takes_the_code_alone():
    bug = get_bug("missing_zero_grad")
    found = Diagnosis("monitor", [_finding("LOSS_DIVERGING", "loss"),
                                  _finding("STALE_GRADIENTS", "0.weight")], None)
    assert judge(bug, found)[:2] == (FOUND, "0.weight")
