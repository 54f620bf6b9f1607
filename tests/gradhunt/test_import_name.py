"""``import gradhunt`` gives the public API of diagnostics: the same names, the same objects."""
import diagnostics
import gradhunt


def test_gradhunt_exports_exactly_the_public_api_of_diagnostics():
    assert sorted(gradhunt.__all__) == sorted(diagnostics.__all__)


def test_every_exported_name_is_the_same_object():
    for name in diagnostics.__all__:
        assert getattr(gradhunt, name) is getattr(diagnostics, name), name
