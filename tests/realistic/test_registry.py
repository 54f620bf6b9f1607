"""The registry itself: enough setups, deterministic, and an xfail table that names real pairs."""
from .runs import TOOLS
from .setups import ASSERTIONS, KNOWN_FALSE_ALARMS, SETUPS, TORCH_SETUPS, build, train


def test_at_least_twenty_torch_setups():
    assert len(TORCH_SETUPS) >= 20


def test_every_known_false_alarm_names_a_setup_and_an_assertion_and_quotes_it():
    for (name, assertion), reason in KNOWN_FALSE_ALARMS.items():
        assert name in SETUPS and assertion in ASSERTIONS and reason.strip()
    assert set(TOOLS) <= set(ASSERTIONS)


def _twenty_steps(name):
    setup = build(name)
    setup.steps = 20
    return train(setup)


def test_a_setup_built_twice_trains_the_same():
    """Dropout draws from the global generator ``build`` seeds: train right after building."""
    assert _twenty_steps("adam_mlp") == _twenty_steps("adam_mlp")
    assert _twenty_steps("mg_adam_mlp") == _twenty_steps("mg_adam_mlp")
