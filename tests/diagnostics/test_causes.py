"""The causal chain between codes: roots first, consequences after them saying what they
follow from, counted apart in the report's count line."""
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import Finding
from diagnostics.causes import CAUSES, order_by_cause
from diagnostics.findings import CODES
from diagnostics.monitor.report import _finding_lines


def _finding(code, location=None, severity="warning", step=0):
    return Finding(code, severity, location, f"{code} message", "", {}, first_step=step)


def test_the_table_names_known_codes_and_has_no_cycle():
    assert set(CAUSES) <= set(CODES)
    assert all(set(effects) <= set(CODES) for effects in CAUSES.values())
    state = {}

    def visit(code):                      # depth-first search for a back edge
        state[code] = "open"
        for effect in CAUSES.get(code, ()):
            assert state.get(effect) != "open", f"cycle through {code} -> {effect}"
            if effect not in state:
                visit(effect)
        state[code] = "done"
    for code in CAUSES:
        if code not in state:
            visit(code)


def test_a_consequence_found_first_is_listed_after_its_cause_and_names_it():
    plateau = _finding("LOSS_PLATEAU", "loss", step=100)
    chance = _finding("LOSS_AT_CHANCE", "loss", step=120)
    schedule = _finding("LR_SCHEDULE_TOO_FAST", "optimizer", step=150)
    ordered = order_by_cause([plateau, chance, schedule])
    assert [f.code for f in ordered] == ["LR_SCHEDULE_TOO_FAST", "LOSS_PLATEAU",
                                         "LOSS_AT_CHANCE"]
    assert ordered[0].follows_from is None
    assert {f.follows_from for f in ordered[1:]} == {"LR_SCHEDULE_TOO_FAST at optimizer"}
    assert "(follows from LR_SCHEDULE_TOO_FAST at optimizer)" in str(ordered[1])
    assert ordered[1].to_dict()["follows_from"] == "LR_SCHEDULE_TOO_FAST at optimizer"


def test_consequences_follow_their_root_and_unrelated_findings_keep_their_place():
    nan = _finding("NAN_LOSS", "loss", severity="error")
    dead = _finding("DEAD_UNITS", "3")
    exploding = _finding("EXPLODING_GRADIENTS", "0.weight")
    stale = _finding("STALE_GRADIENTS", "0.weight")
    ordered = order_by_cause([nan, dead, exploding, stale])
    assert [f.code for f in ordered] == ["STALE_GRADIENTS", "NAN_LOSS",
                                         "EXPLODING_GRADIENTS", "DEAD_UNITS"]
    assert ordered[1].follows_from == ordered[2].follows_from == "STALE_GRADIENTS at 0.weight"
    assert ordered[3].follows_from is None


def test_findings_without_a_cause_among_them_are_unchanged():
    findings = [_finding("LOSS_PLATEAU", "loss"), _finding("TRAIN_MODE_AT_EVAL", "1")]
    assert order_by_cause(findings[:1]) == findings[:1]
    assert [f.follows_from for f in order_by_cause(findings)] == [None, None]


def test_the_count_line_counts_root_causes_and_says_how_many_follow():
    ordered = order_by_cause([_finding("LOSS_PLATEAU", "loss"),
                              _finding("LR_SCHEDULE_TOO_FAST", "optimizer")])
    lines = _finding_lines(ordered, 300)
    assert lines[0] == "1 finding (1 warning; 1 more follows from it):"
    assert any("LOSS_PLATEAU" in line and "follows from LR_SCHEDULE_TOO_FAST" in line
               for line in lines)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.sampled_from(sorted(CODES)), min_size=1, max_size=8, unique=True))
def test_ordering_keeps_every_finding_once_and_puts_causes_before_effects(codes):
    findings = [_finding(code, str(i)) for i, code in enumerate(codes)]
    ordered = order_by_cause(findings)
    assert sorted(f.code for f in ordered) == sorted(codes)
    position = {f.code: i for i, f in enumerate(ordered)}
    for finding in ordered:
        if finding.follows_from:
            cause = finding.follows_from.split(" at ")[0]
            assert finding.code in CAUSES[cause] and position[cause] < position[finding.code]


def test_a_cause_of_a_cause_leads_the_chain():
    vanishing = _finding("VANISHING_GRADIENTS", "0.weight")
    saturated = _finding("SATURATED_ACTIVATIONS", "1")
    unnormalized = _finding("UNNORMALIZED_INPUT", "data")
    ordered = order_by_cause([vanishing, saturated, unnormalized])
    assert [f.code for f in ordered] == ["UNNORMALIZED_INPUT", "SATURATED_ACTIVATIONS",
                                         "VANISHING_GRADIENTS"]
    assert ordered[2].follows_from == "SATURATED_ACTIVATIONS at 1"


def test_a_cause_is_as_severe_as_what_follows_from_it():
    ordered = order_by_cause([_finding("PARAMS_NOT_UPDATING", "0", severity="error"),
                              _finding("LR_SCHEDULE_TOO_FAST", "optimizer")])
    assert [(f.code, f.severity) for f in ordered] == [("LR_SCHEDULE_TOO_FAST", "error"),
                                                      ("PARAMS_NOT_UPDATING", "error")]
    lines = _finding_lines(ordered, 300)
    assert lines[0] == "1 finding (1 error; 1 more follows from it):"
