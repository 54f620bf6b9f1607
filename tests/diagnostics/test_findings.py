"""``Finding``: the vocabulary it refuses, and what makes one an alarm."""
import pytest

from diagnostics import Finding
from diagnostics.findings import SEVERITIES


@pytest.mark.parametrize("severity", SEVERITIES)
def test_a_warning_or_an_error_is_an_alarm_an_info_is_not(severity):
    finding = Finding("NAN_LOSS", severity, "loss", "the loss is NaN")
    assert finding.is_alarm is (severity in ("warning", "error"))


def test_an_unknown_code_or_severity_is_refused_by_name():
    with pytest.raises(ValueError, match="Finding.code"):
        Finding("NOT_A_CODE", "error", None, "x")
    with pytest.raises(ValueError, match="Finding.severity"):
        Finding("NAN_LOSS", "fatal", None, "x")
