"""ScenarioResult's verdict and the ``gradhunt scenario(s)`` commands."""
import json
import types

from scenarios import cli, registry
from scenarios.result import ScenarioResult


def _result(*held):
    result = ScenarioResult("demo", "a demo", fast=True)
    for number, value in enumerate(held):
        result.check(f"claim {number}", value, "detail")
    return result


def test_result_passes_only_when_every_check_held():
    assert _result(True, True).passed
    assert not _result(True, False).passed
    assert not _result().passed  # a scenario that checked nothing proved nothing
    text = str(_result(True, False))
    assert "[PASS] claim 0 (detail)" in text and "[FAIL] claim 1 (detail)" in text
    assert text.endswith("scenario demo FAILED: 1 of 2 checks held")
    assert [c.claim for c in _result(True, False).failed_checks] == ["claim 1"]


def test_result_to_dict_is_json_ready():
    result = _result(True)
    result.say("a line")
    result.files["log"] = "/tmp/x.md"
    data = json.loads(json.dumps(result.to_dict()))
    assert data["passed"] is True and data["log"] == ["a line"]
    assert data["checks"] == [{"claim": "claim 0", "held": True, "detail": "detail"}]


def test_scenarios_lists_every_scenario(capsys):
    assert cli.main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == registry.names()


def _fake_scenario(monkeypatch, held):
    def run(*, fast=False):
        return _result(held)
    monkeypatch.setattr(registry, "load", lambda name: types.SimpleNamespace(run=run))


def test_scenario_exit_code_follows_the_checks(monkeypatch, capsys):
    _fake_scenario(monkeypatch, True)
    assert cli.main(["scenario", "data_validator", "--fast"]) == 0
    _fake_scenario(monkeypatch, False)
    assert cli.main(["scenario", "data_validator"]) == 1
    assert "[FAIL] claim 0" in capsys.readouterr().out


def test_scenario_json_output(monkeypatch, capsys):
    _fake_scenario(monkeypatch, True)
    assert cli.main(["scenario", "data_validator", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True


def test_scenario_rejects_options_it_does_not_take(monkeypatch, capsys):
    _fake_scenario(monkeypatch, True)
    assert cli.main(["scenario", "data_validator", "--cifar10", "/nowhere"]) == 2
    assert "--cifar10 does not apply" in capsys.readouterr().out


def test_registry_load_rejects_unknown_names():
    try:
        registry.load("no_such_scenario")
    except KeyError as error:
        assert "known: broken_networks" in str(error)
    else:
        raise AssertionError("expected a KeyError")


def test_scenario_help_and_refusal_name_the_scenarios_an_option_applies_to(monkeypatch, capsys):
    taking_out = [n for n, e in registry.SCENARIOS.items() if "out_dir" in e.options]
    assert taking_out and len(taking_out) < len(registry.SCENARIOS)
    _fake_scenario(monkeypatch, True)
    assert cli.main(["scenario", "data_validator", "--out", "/nowhere"]) == 2
    printed = capsys.readouterr().out
    assert "--out does not apply" in printed
    assert ", ".join(taking_out) in printed
    try:
        cli.main(["scenario", "--help"])
    except SystemExit:
        pass
    assert f"taken by {', '.join(taking_out)}" in " ".join(capsys.readouterr().out.split())
