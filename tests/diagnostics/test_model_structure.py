"""MODULE_REUSED and BATCHNORM_MOMENTUM_INVERTED: the module tree read once, by the Monitor and
by preflight, on torch and minigrad; deliberate sharing stays quiet."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import preflight
from diagnostics.model_structure import (INVERTED_MOMENTUM, ignored_backward_finding,
                                         ignored_backwards, inverted_momenta, reused_modules,
                                         structure_findings)
from tests.diagnostics.monitor_nets import (FEATURES, frameworks, mlp, one_torch_thread,  # noqa: F401
                                            train)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(params=frameworks(), ids=lambda fw: fw.name)
def fw(request):
    request.param.seed(0)
    return request.param


def _repeated(fw, copies=3):
    nn = fw.nn
    block = nn.Linear(FEATURES, FEATURES)
    return nn.Sequential(*[block] * copies, nn.ReLU(), nn.Linear(FEATURES, 4))


def test_one_block_repeated_in_a_sequential_is_named_with_every_name(fw):
    (reused,) = reused_modules(_repeated(fw))
    assert reused.names == ("0", "1", "2") and reused.type_name == "Linear"
    (finding,) = structure_findings(_repeated(fw))
    assert finding.code == "MODULE_REUSED" and finding.location == "0"
    assert "0, 1, 2 are one Linear object, registered 3 times" in finding.message
    assert "1/3 of the capacity" in finding.message


def test_a_module_list_of_one_instance_is_found_in_its_container():
    from torch import nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(4, 4)] * 2)
            self.heads = nn.ModuleDict(dict.fromkeys(["a", "b"], nn.Linear(4, 1)))

    found = {r.container: r.names for r in reused_modules(Net())}
    assert found == {"blocks": ("blocks.0", "blocks.1"), "heads": ("heads.a", "heads.b")}


def test_deliberate_sharing_is_quiet():
    """T5's one embedding under two parents, tied weights, a parameter-free module reused, a
    block called twice in forward: none is a list of copies that were meant to differ."""
    from torch import nn

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.shared = nn.Embedding(10, 4)
            self.encoder, self.decoder = nn.Module(), nn.Module()
            self.encoder.embed, self.decoder.embed = self.shared, self.shared
            act = nn.ReLU()
            self.mlp = nn.Sequential(nn.Linear(4, 4), act, nn.Linear(4, 4), act)
            self.head = nn.Linear(4, 10, bias=False)
            self.head.weight = self.shared.weight

    assert structure_findings(Shared()) == []


def test_batchnorm_momentum_in_keras_convention_is_named_with_the_fix(fw):
    nn = fw.nn
    model = nn.Sequential(nn.Linear(FEATURES, 8), nn.BatchNorm1d(8, momentum=0.9), nn.ReLU(),
                          nn.Linear(8, 4))
    (finding,) = structure_findings(model)
    assert finding.code == "BATCHNORM_MOMENTUM_INVERTED" and finding.location == "1"
    assert "1 (0.9)" in finding.message and "momentum=0.1" in finding.suggestion


@settings(max_examples=40, deadline=None)
@given(st.floats(min_value=0.0, max_value=1.0))
def test_momentum_is_judged_against_one_half(momentum):
    from torch import nn

    layer = nn.BatchNorm1d(3, momentum=momentum)
    assert bool(inverted_momenta(layer)) is (momentum > INVERTED_MOMENTUM)


def test_cumulative_or_untracked_statistics_are_not_judged():
    from torch import nn

    assert inverted_momenta(nn.BatchNorm1d(3, momentum=None)) == []
    assert inverted_momenta(nn.BatchNorm1d(3, momentum=0.9, track_running_stats=False)) == []


def test_the_monitor_reports_both_at_its_first_steps(fw):
    nn = fw.nn
    block = nn.Linear(FEATURES, FEATURES)
    model = nn.Sequential(block, nn.ReLU(), block, nn.BatchNorm1d(FEATURES, momentum=0.99),
                          nn.Linear(FEATURES, 4))
    report = train(fw, model, steps=3)
    codes = {f.code: f for f in report.findings}
    assert {"MODULE_REUSED", "BATCHNORM_MOMENTUM_INVERTED"} <= set(codes)
    assert codes["MODULE_REUSED"].first_step == 0


def test_a_healthy_model_gives_the_monitor_nothing_to_say_about_its_structure(fw):
    report = train(fw, mlp(fw, [FEATURES, 16, 4]), steps=3)
    assert not {f.code for f in report.findings} & {"MODULE_REUSED",
                                                     "BATCHNORM_MOMENTUM_INVERTED"}


def test_preflight_fails_its_model_structure_item(fw):
    x = np.random.default_rng(0).normal(size=(16, FEATURES)).astype(np.float32)
    y = np.arange(16) % 4
    model = _repeated(fw)
    report = preflight(model, fw.F.cross_entropy, fw.inputs(x), fw.labels(y))
    item = next(i for i in report.items if i.name == "model structure")
    assert item.status == "FAIL" and [f.code for f in item.findings] == ["MODULE_REUSED"]
    healthy = preflight(mlp(fw, [FEATURES, 16, 4]), fw.F.cross_entropy, fw.inputs(x),
                        fw.labels(y))
    assert next(i for i in healthy.items if i.name == "model structure").status == "PASS"


def _with_own_backward(fw):
    """A straight-through rounding module written the Function way, on a Module."""
    nn = fw.nn

    class RoundSTE(nn.Module):
        def forward(self, x):
            return x * 0.0                      # rounding's derivative: zero

        def backward(self, grad_output):        # autograd never calls it
            return grad_output

    return nn.Sequential(nn.Linear(FEATURES, 16), RoundSTE(), nn.ReLU(), RoundSTE(),
                         nn.Linear(16, 4))


def test_a_module_defining_backward_is_found_once_per_class(fw):
    found = ignored_backwards(_with_own_backward(fw))
    assert [(i.name, i.type_name) for i in found] == [("1", "RoundSTE")]
    assert structure_findings(_with_own_backward(fw)) == []   # the tree alone does not judge it


def test_the_monitor_names_a_backward_that_disagrees_with_autograd(fw):
    report = train(fw, _with_own_backward(fw), steps=3)
    (finding,) = [f for f in report.findings if f.code == "MODULE_BACKWARD_IGNORED"]
    # a warning, raised to the error of the dead units it causes
    assert finding.location == "1" and finding.is_alarm
    assert report.findings[0] is finding
    assert "RoundSTE defines backward(), but autograd never calls" in finding.message
    assert "torch.autograd.Function" in finding.suggestion
    if fw.name == "torch":    # its backward passes the gradient on, autograd passes none
        assert "autograd passed no gradient back through it" in finding.message


def test_a_leftover_backward_beside_a_straight_through_forward_is_quiet_a_reversal_is_not():
    import torch
    from torch import nn

    class Rounding(nn.Module):
        def forward(self, x):
            return x + (torch.round(x) - x).detach()   # the fix, made in forward

        def backward(self, grad_output):               # dead, but the same gradient
            return grad_output

    class HardTanhSte(nn.Module):
        def forward(self, x):
            soft = x.clamp(-1, 1)                       # the fix: a masked straight-through
            return soft + (torch.sign(x) - soft).detach()

        def backward(self, grad_output):                # dead, and not quite the same
            return grad_output.clamp(-1, 1)

    class Reversal(nn.Module):
        def forward(self, x):
            return x * 1.0                              # autograd: +g

        def backward(self, grad_output):
            return -grad_output

    healthy = nn.Sequential(nn.Linear(FEATURES, 16), Rounding(), HardTanhSte(),
                            nn.Linear(16, 4))
    broken = nn.Sequential(nn.Linear(FEATURES, 16), Reversal(), nn.Linear(16, 4))
    from tests.diagnostics.monitor_nets import frameworks as _frameworks
    fw = next(f for f in _frameworks() if f.name == "torch")
    assert "MODULE_BACKWARD_IGNORED" not in {f.code for f in train(fw, healthy, steps=3).findings}
    codes = {f.code: f for f in train(fw, broken, steps=3).findings}
    assert "points against the one its backward gives" in codes["MODULE_BACKWARD_IGNORED"].message


def test_an_inherited_backward_names_the_class_that_defines_it():
    from torch import nn

    class Reversal(nn.Module):
        def forward(self, x):
            return x

        def backward(self, grad):
            return -grad

    class ScaledReversal(Reversal):
        pass

    (found,) = ignored_backwards(nn.Sequential(nn.Linear(3, 3), ScaledReversal()))
    assert (found.type_name, found.defined_in) == ("ScaledReversal", "Reversal")
    assert "ScaledReversal defines backward() (inherited from Reversal)" in (
        ignored_backward_finding(found).message)


def test_a_function_wrapped_in_a_module_and_lightning_hooks_are_quiet():
    import torch
    from torch import nn

    class Ste(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.round()

        @staticmethod
        def backward(ctx, grad):
            return grad

    class Rounding(nn.Module):
        def forward(self, x):
            return Ste.apply(x)

        def backward_features(self, x):           # a name that merely starts with backward
            return x

    assert ignored_backwards(nn.Sequential(nn.Linear(3, 3), Rounding())) == []
    pl = pytest.importorskip("lightning.pytorch")

    class Lit(pl.LightningModule):                # Lightning calls this hook itself
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(3, 3)

        def backward(self, loss, *args, **kwargs):
            loss.backward()

    assert ignored_backwards(Lit()) == []


def test_preflight_names_a_module_backward_through_its_training_steps():
    x = np.random.default_rng(0).normal(size=(16, FEATURES)).astype(np.float32)
    from tests.diagnostics.monitor_nets import frameworks as _frameworks
    fw = next(f for f in _frameworks() if f.name == "torch")
    report = preflight(_with_own_backward(fw), fw.F.cross_entropy, fw.inputs(x),
                       fw.labels(np.arange(16) % 4))
    assert "MODULE_BACKWARD_IGNORED" in {f.code for f in report.findings}
