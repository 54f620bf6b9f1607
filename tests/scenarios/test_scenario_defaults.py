"""Every scenario at the settings a user runs it with (``gradhunt scenario NAME``): the lesson a
user reads must hold there, not only at the suite's fast settings."""
import pytest

from scenarios import registry


@pytest.mark.parametrize("name", registry.names())
def test_scenario_holds_at_its_default_settings(name, tmp_path):
    entry = registry.SCENARIOS[name]
    options = {"out_dir": tmp_path} if "out_dir" in entry.options else {}
    result = registry.load(name).run(**options)
    assert not result.fast
    assert result.passed, str(result)
