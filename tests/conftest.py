import os

import pytest
from hypothesis import HealthCheck, settings

# the blind folders' standard tests live in this shared module: rewrite its asserts too, so a
# failure shows the compared values as it does in a test module
pytest.register_assert_rewrite("tests.blind.pairs")

settings.register_profile(
    "ci", deadline=None, max_examples=25, derandomize=True,
    suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

try:  # the tests use tiny tensors: thread pools only fight over the cores
    import torch
except ImportError:  # minigrad's own tests run without torch
    torch = None
else:
    torch.set_num_threads(1)
