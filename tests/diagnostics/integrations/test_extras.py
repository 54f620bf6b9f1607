"""A callback whose framework is not installed says which extra to install."""
import sys

import pytest

import diagnostics.integrations as integrations


@pytest.mark.parametrize("name, module, framework, extra", [
    ("GradhuntCallback", "lightning", "lightning.pytorch.callbacks", "lightning"),
    ("GradhuntTrainerCallback", "huggingface", "transformers", "transformers")])
def test_a_missing_framework_names_the_extra(monkeypatch, name, module, framework, extra):
    monkeypatch.setitem(sys.modules, framework, None)       # as if it were not installed
    monkeypatch.delitem(sys.modules, f"diagnostics.integrations.{module}", raising=False)
    with pytest.raises(ModuleNotFoundError, match=rf"pip install 'gradhunt\[{extra}\]'"):
        getattr(integrations, name)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="NoSuchCallback"):
        integrations.NoSuchCallback
