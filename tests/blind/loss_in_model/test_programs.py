"""Blind programs: models that compute their loss inside forward (gradhunt issue 27, item 3).

The Hugging Face convention: ``out = model(**batch)`` returns the loss computed inside forward
with the logits (a ModelOutput-like dataclass, a dict, a ``(loss, logits)`` tuple, a real tiny
``transformers`` GPT-2), and the loop calls ``out.loss.backward()``. gradhunt's tools must judge
such models (or skip an item with a reason), never fail an item on gradhunt's own error.

Each module exposes ``EXPECTED`` (None for healthy programs), ``CAUSAL`` (a language model),
``loss_fn(output, labels)`` (what its user hands gradhunt: the loss the model computed),
``make(fixed=)`` -> ``(model, batch)`` with ``model(**batch)`` and ``run(fixed=, monitor=)``.
For every program: (1) the bug is real (the fixed twin's held-out number is clearly better);
(2) the Monitor's first alarm on the buggy program is ``EXPECTED`` and the fixed twins and
healthy programs raise no warning or error; (3) ``gradhunt.preflight(model, loss_fn, batch,
batch["labels"], causal=CAUSAL)`` FAILs no item on an exception of its own (an item that says
the user's code raised while forward, loss and backward run cleanly on that batch, or one that
quotes a path in gradhunt/ or diagnostics/), and on a buggy program ``EXPECTED`` is among its
findings (and not among a fixed twin's); (4) ``check_batch_independence(model, batch,
causal=True)`` on the language models: CAUSALITY_LEAK on the unmasked attention, quiet on the
others.

Programs (held-out metric without gradhunt, buggy -> fixed):
- gru_lm_unshifted_labels: GRU LM, dataclass output, plain loop, Adam; logits[t] scored
  against labels[t]; next-token accuracy 0.010 -> 0.858.
- attention_lm_no_causal_mask: hand-written 2-block transformer LM, ``(loss, logits)`` tuple,
  ``train_step``, AdamW; no causal mask; prefix-only next-token accuracy 0.110 -> 0.817.
- layernorm_mlp_softmax_before_ce: LayerNorm MLP classifier, dict output, a Trainer class,
  SGD momentum; softmax before ``F.cross_entropy`` inside forward; accuracy 0.415 -> 0.693.
- gpt2_trainer_padding_scored: ``transformers`` GPT2LMHeadModel from a config, HF ``Trainer``
  with SGD handed in and ``GradhuntTrainerCallback``; labels at padding not -100 (pad = eos);
  real-token next-token accuracy 0.135 -> 0.777.
Healthy: healthy_gpt2_plain_loop (GPT-2 from a config, plain loop, AdamW + warm-up; 0.850),
healthy_tagger_dict_ignore_pad (BiGRU tagger, dict output, -100 on padding, DataLoader epochs;
0.998).

What gradhunt said when these were first run is recorded in MISSED, FALSE_ALARMS,
PREFLIGHT_OWN_ERRORS, PREFLIGHT_MISSED, PREFLIGHT_FALSE_FAILS and CAUSAL_MISSED below (strict
xfails). When first run (Monitor): only layernorm_mlp_softmax_before_ce was named
(PROBABILITIES_AS_LOGITS first); the other three buggy programs raised no warning or error;
every fixed twin and healthy program was quiet. preflight: its "next-token targets" item FAILed
on every transformers GPT-2 and on the GRU LM (dataclass output) with "RuntimeError: element 0
of tensors does not require grad and does not have a grad_fn" although forward, loss_fn and
backward run cleanly; on the ``(loss, logits)`` tuple it read the scalar loss as the logits
("forward" FAILed, batch independence and next-token targets skipped), and
check_batch_independence raised DiagnosticsError on it for the same reason. Named by preflight:
PROBABILITIES_AS_LOGITS on the softmax classifier (with OVERFIT_FAILED); passed: the dict
tagger and the fixed classifier (the tagger with an info GRADIENT_MISMATCH among its
findings). The causal check passed on the GRU LM and on all GPT-2 programs (padding mask passed
along). Since the loss-in-model work all four are named by the Monitor and by preflight; the
GPT-2 padding last, once padding runs skip the -100 column the model's loss appends before it
shifts the labels.
"""
import functools
import importlib
import json

import pytest
import torch

PAIRS = [
    "gru_lm_unshifted_labels",
    "attention_lm_no_causal_mask",
    "layernorm_mlp_softmax_before_ce",
    "gpt2_trainer_padding_scored",
]
HEALTHY = ["healthy_gpt2_plain_loop", "healthy_tagger_dict_ignore_pad"]
# (module, fixed) for every program: buggy and fixed twins, healthy programs once
PROGRAMS = [(n, f) for n in PAIRS for f in (False, True)] + [(n, True) for n in HEALTHY]

# Monitor: buggy programs whose first alarm is not EXPECTED today
MISSED = {}   # gpt2_trainer_padding_scored named since padding runs skip the loss's own
              # appended -100 column
# Monitor: fixed twins / healthy programs with a warning or error today
FALSE_ALARMS = {}
# preflight items FAILed on gradhunt's own exception today: (module, fixed) -> reason
PREFLIGHT_OWN_ERRORS = {}
# preflight: buggy programs whose findings lack EXPECTED today
PREFLIGHT_MISSED = {}
# preflight: fixed twins / healthy programs with a FAILed item today
PREFLIGHT_FALSE_FAILS = {}
# check_batch_independence(causal=True): (module, fixed) judged wrongly today
CAUSAL_MISSED = {}

def _module(name):
    return importlib.import_module(f"{__package__}.{name}")


@functools.cache
def _run(name, fixed, monitor):
    return _module(name).run(fixed=fixed, monitor=monitor)


@functools.cache
def _preflight(name, fixed):
    import gradhunt

    module = _module(name)
    model, batch = module.make(fixed=fixed)
    return gradhunt.preflight(model, module.loss_fn, batch, batch["labels"],
                              causal=module.CAUSAL)


def _alarms(report):
    return [f for f in report.findings if f.severity in ("warning", "error")]


def _describe(findings):
    return [(f.code, f.severity, f.location) for f in findings]


def _label(name, fixed):
    return f"{name}[{'fixed' if fixed else 'buggy'}]"


def _marked(params, table):
    return [pytest.param(*p, marks=pytest.mark.xfail(strict=True, reason=table[key]))
            if (key := (p if len(p) > 1 else p[0])) in table else pytest.param(*p)
            for p in params]


def _user_code_runs(name, fixed):
    """Whether the program's own forward, loss and backward run on make()'s batch."""
    module = _module(name)
    model, batch = module.make(fixed=fixed)
    try:
        module.loss_fn(model(**batch), batch["labels"]).backward()
    except Exception:   # noqa: BLE001  (a user's code that raises is the user's failure)
        return False
    return True


@pytest.mark.parametrize("name", PAIRS)
def test_bug_is_real(name):
    buggy, fixed = _run(name, False, False), _run(name, True, False)
    assert buggy["report"] is None and fixed["report"] is None
    assert fixed["higher_is_better"] and buggy["higher_is_better"]
    assert fixed["metric"] >= buggy["metric"] + 0.15, (name, buggy["metric"], fixed["metric"])


@pytest.mark.parametrize("name", _marked([(n,) for n in PAIRS], MISSED))
def test_monitor_first_alarm_is_expected(name):
    report = _run(name, False, True)["report"]
    alarms = _alarms(report)
    assert alarms, f"{name}: no warning or error on the buggy program\n{report}"
    assert alarms[0].code == _module(name).EXPECTED, (
        f"{name}: first alarm {alarms[0].code}, expected {_module(name).EXPECTED}; "
        f"alarms {_describe(alarms)}\n{report}")


@pytest.mark.parametrize("name", _marked([(n,) for n in PAIRS + HEALTHY], FALSE_ALARMS))
def test_monitor_quiet_on_fixed_and_healthy(name):
    report = _run(name, True, True)["report"]
    alarms = _alarms(report)
    assert not alarms, f"{name}: alarms on a healthy program {_describe(alarms)}\n{report}"


@pytest.mark.parametrize("name,fixed", _marked(PROGRAMS, PREFLIGHT_OWN_ERRORS))
def test_preflight_fails_no_item_on_its_own_error(name, fixed):
    report = _preflight(name, fixed)
    items = report.to_dict()["items"]
    failed = [i for i in items if i["status"] == "FAIL"]
    quoting = [i for i in failed
               if "diagnostics/" in json.dumps(i) or "gradhunt/" in json.dumps(i)]
    assert not quoting, f"{_label(name, fixed)}: items quote gradhunt's code\n{report}"
    raised = [i["name"] for i in failed if " raised " in i["summary"]]
    if raised:
        assert not _user_code_runs(name, fixed), (
            f"{_label(name, fixed)}: items {raised} FAIL on an exception, but the model's "
            f"forward, loss_fn and backward run cleanly on this batch\n{report}")


@pytest.mark.parametrize("name", _marked([(n,) for n in PAIRS], PREFLIGHT_MISSED))
def test_preflight_names_expected_on_buggy(name):
    report = _preflight(name, False)
    codes = {f.code for f in report.findings}
    assert _module(name).EXPECTED in codes, (
        f"{name}: preflight found {sorted(codes)}, expected {_module(name).EXPECTED}\n{report}")


FIXED_AND_HEALTHY = [(n, f) for n, f in PROGRAMS if f]


@pytest.mark.parametrize("name,fixed", _marked(FIXED_AND_HEALTHY, PREFLIGHT_FALSE_FAILS))
def test_preflight_passes_fixed_and_healthy(name, fixed):
    report = _preflight(name, fixed)
    assert report.passed, f"{_label(name, fixed)}: preflight FAILED a healthy program\n{report}"


@pytest.mark.parametrize("name", PAIRS)
def test_preflight_expected_absent_on_fixed(name):
    report = _preflight(name, True)
    codes = {f.code for f in report.findings}
    assert _module(name).EXPECTED not in codes, f"{name}[fixed]: {sorted(codes)}\n{report}"


LANGUAGE_MODELS = [(n, f) for n, f in PROGRAMS if _module(n).CAUSAL]


@pytest.mark.parametrize("name,fixed", _marked(LANGUAGE_MODELS, CAUSAL_MISSED))
def test_causal_check_on_language_models(name, fixed):
    import gradhunt

    model, batch = _module(name).make(fixed=fixed)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = gradhunt.check_batch_independence(model, batch, causal=True)
    codes = {f.code for f in result}
    leaks = not fixed and _module(name).EXPECTED == "CAUSALITY_LEAK"
    if leaks:
        assert "CAUSALITY_LEAK" in codes, f"{_label(name, fixed)}: {sorted(codes)}\n{result}"
    else:
        assert not codes & {"CAUSALITY_LEAK", "BATCH_MIXING"}, (
            f"{_label(name, fixed)}: {sorted(codes)}\n{result}")
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
