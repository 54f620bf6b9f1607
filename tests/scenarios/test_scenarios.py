"""Every scenario runs with its fast settings and its checks hold."""
import numpy as np
import pytest

from scenarios import registry


@pytest.mark.parametrize("name", registry.names())
def test_scenario_checks_hold(name, tmp_path):
    entry = registry.SCENARIOS[name]
    options = {"out_dir": tmp_path} if "out_dir" in entry.options else {}
    result = registry.load(name).run(fast=True, **options)
    assert result.passed, str(result)
    assert result.fast and result.seconds is not None
    assert f"scenario {name} PASSED" in str(result)
    for path in result.files.values():
        assert str(path).startswith(str(tmp_path))


def test_localize_gradient_bug_writes_the_debugging_log(tmp_path):
    from scenarios import localize_gradient_bug

    result = localize_gradient_bug.run(fast=True, out_dir=tmp_path)
    text = (tmp_path / localize_gradient_bug.LOG_FILE).read_text()
    assert text.startswith("# Debugging log")
    assert "- module: `2` (HandWrittenLinear), weight path" in text
    assert "- wrong parameter gradients: `2.weight`" in text
    assert "- module: `2` (HandWrittenLinear), input path" in text
    assert text.count("pattern: transpose") == 2
    assert result.files["debugging log"] == str(tmp_path / localize_gradient_bug.LOG_FILE)


def test_data_validator_ground_truth_is_planted():
    from scenarios import data_validator

    clean = data_validator.clean_split(rows=300)
    data = data_validator.corrupt(*clean)
    truth = data.truth
    assert (~np.isfinite(data.train_x)).any(axis=1).sum() == 9
    assert set(truth["nan_rows"]).isdisjoint(truth["leaked_train_rows"])
    for test_row, train_row in zip(truth["leaked_test_rows"], truth["leaked_train_rows"]):
        assert (data.train_x[train_row] == data.test_x[test_row]).all()
    counts = {c: int((data.train_y == c).sum()) for c in range(10)}
    assert max(counts.values()) > 10 * counts[data_validator.RARE_CLASS]
    column = data.train_x[:, truth["constant_feature"]]
    assert (column[np.isfinite(column)] == 0).all()
