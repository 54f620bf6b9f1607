"""TERM_DETACHED: a term of the loss whose graph reaches only another network's parameters,
and whose gradient there is cleared unused (a GAN generator's adversarial term on
``fake.detach()``). Named with either kind of ``zero_grad``; quiet on the fixed GAN, on the
discriminator's own step, on a joint loss stepped by two optimizers (either order), on
gradient accumulation, on a frozen network never cleared, on constants and single-term losses;
every hook is lifted at close()."""
import pytest
import torch
import torch.nn.functional as F
import torch.optim.optimizer as optimizer_module
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from diagnostics import Monitor

CODE = "TERM_DETACHED"


def _gan(*, detached, set_to_none=True, steps=16, weight=1.0, adversarial_first=True,
         monitor_d=False):
    torch.manual_seed(0)
    gen, disc = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4)), nn.Linear(4, 1)
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    mon_g = Monitor(gen, opt_g, every=3)
    mon_d = Monitor(disc, opt_d, every=3) if monitor_d else None
    try:
        for _ in range(steps):
            z, real = torch.randn(16, 4), torch.randn(16, 4) + 2
            fake = gen(z)
            opt_d.zero_grad(set_to_none=set_to_none)
            d_loss = (F.binary_cross_entropy_with_logits(disc(real), torch.ones(16, 1))
                      + F.binary_cross_entropy_with_logits(disc(fake.detach()),
                                                           torch.zeros(16, 1)))
            d_loss.backward()
            opt_d.step()
            opt_g.zero_grad(set_to_none=set_to_none)
            scored = disc(fake.detach() if detached else fake)
            adversarial = F.binary_cross_entropy_with_logits(scored, torch.ones(16, 1))
            l1 = weight * F.l1_loss(fake, real)
            g_loss = adversarial + l1 if adversarial_first else l1 + adversarial
            g_loss.backward()
            opt_g.step()
            mon_g.step(g_loss)
            if mon_d is not None:
                mon_d.step(d_loss)
    finally:
        mon_g.close()
        if mon_d is not None:
            mon_d.close()
    found = [f for f in mon_g.report().findings if f.code == CODE]
    return found, ([f for f in mon_d.report().findings if f.code == CODE] if mon_d else None)


@pytest.mark.parametrize("set_to_none", [True, False])
def test_the_generators_adversarial_term_on_a_detached_fake_is_named(set_to_none):
    found, on_d = _gan(detached=True, set_to_none=set_to_none, monitor_d=True)
    assert len(found) == 1 and found[0].severity == "error" and found[0].location == "loss"
    assert found[0].evidence["term"] == "binary_cross_entropy_with_logits"
    assert found[0].evidence["position"] == 0 and found[0].evidence["terms"] == 2
    assert on_d == []      # the discriminator's own loss reaches its optimizer's parameters


def test_the_fixed_gan_is_quiet():
    assert _gan(detached=False, monitor_d=True) == ([], [])


@settings(max_examples=8, deadline=None)
@given(detached=st.booleans(), weight=st.floats(0.01, 100.0), first=st.booleans())
def test_named_exactly_when_the_term_is_detached(detached, weight, first):
    found, _ = _gan(detached=detached, weight=weight, adversarial_first=first)
    assert bool(found) is detached
    if found:
        assert found[0].evidence["position"] == (0 if first else 1)


def _joint(*, mon_step_first, accumulate=1, steps=16):
    """An actor and a critic, one joint loss back-propagated once, two optimizers."""
    torch.manual_seed(0)
    actor, critic = nn.Linear(4, 3), nn.Linear(4, 1)
    opt_a = torch.optim.SGD(actor.parameters(), lr=1e-2)
    opt_c = torch.optim.SGD(critic.parameters(), lr=1e-2)
    with Monitor(actor, opt_a, every=3) as monitor:
        for step in range(steps):
            s = torch.randn(8, 4)
            if step % accumulate == 0:
                opt_a.zero_grad()
                opt_c.zero_grad()
            actor_loss = -F.log_softmax(actor(s), 1)[:, 0].mean()
            critic_loss = F.mse_loss(critic(s)[:, 0], torch.ones(8))
            loss = actor_loss + 0.5 * critic_loss
            loss.backward()
            if (step + 1) % accumulate:
                monitor.step(loss)
                continue
            opt_a.step()
            if mon_step_first:
                monitor.step(loss)
                opt_c.step()
            else:
                opt_c.step()
                monitor.step(loss)
    return [f for f in monitor.report().findings if f.code == CODE]


@pytest.mark.parametrize("mon_step_first", [True, False])
def test_a_joint_loss_stepped_by_two_optimizers_is_quiet(mon_step_first):
    assert _joint(mon_step_first=mon_step_first) == []


def test_gradient_accumulation_onto_the_other_network_is_quiet():
    assert _joint(mon_step_first=False, accumulate=4) == []


def _single(loss_of, *, steps=12, extra=None):
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    with Monitor(model, optimizer, every=3) as monitor:
        for _ in range(steps):
            x = torch.randn(8, 4)
            optimizer.zero_grad()
            loss = loss_of(model, x)
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    return [f for f in monitor.report().findings if f.code == CODE]


_FROZEN = nn.Linear(4, 2)    # requires grad, in no optimizer, never cleared


QUIET = {
    "constant term": lambda m, x: F.mse_loss(m(x), torch.zeros(8, 2)) + torch.tensor(3.0),
    "detached-value term": lambda m, x: (F.mse_loss(m(x), torch.zeros(8, 2))
                                         + F.l1_loss(m(x).detach(), torch.ones(8, 2))),
    "single term": lambda m, x: F.mse_loss(m(x), torch.zeros(8, 2)),
    "frozen network never cleared": lambda m, x: (F.mse_loss(m(x), torch.zeros(8, 2))
                                                  + 0.1 * _FROZEN(x).pow(2).mean()),
    "product of two graphs": lambda m, x: (m(x).pow(2).mean() * m(x).abs().mean()
                                           + m(x).mean()),
}


@pytest.mark.parametrize("name", QUIET)
def test_healthy_losses_are_quiet(name):
    assert _single(QUIET[name]) == []


def test_hooks_are_lifted_at_close():
    before = (dict(optimizer_module._global_optimizer_pre_hooks),
              dict(optimizer_module._global_optimizer_post_hooks))
    torch.manual_seed(0)
    gen, disc = nn.Linear(4, 4), nn.Linear(4, 1)
    opt_g = torch.optim.SGD(gen.parameters(), lr=1e-2)
    with Monitor(gen, opt_g, every=2) as monitor:
        for _ in range(4):
            fake = gen(torch.randn(8, 4))
            opt_g.zero_grad()
            disc.zero_grad()
            loss = disc(fake.detach()).mean() + fake.pow(2).mean()
            loss.backward()
            opt_g.step()
            monitor.step(loss)
        assert disc.weight._backward_hooks or disc.bias._backward_hooks
    assert not disc.weight._backward_hooks and not disc.bias._backward_hooks
    assert (dict(optimizer_module._global_optimizer_pre_hooks),
            dict(optimizer_module._global_optimizer_post_hooks)) == before


def test_odd_losses_and_closures_do_not_crash():
    torch.manual_seed(0)
    model = nn.Linear(4, 2)
    optimizer = torch.optim.LBFGS(model.parameters(), max_iter=2)
    with Monitor(model, optimizer, every=2) as monitor:
        for _ in range(5):
            x = torch.randn(8, 4)

            def closure():
                optimizer.zero_grad()
                loss = F.mse_loss(model(x), torch.zeros(8, 2)) + 0.0 * x.sum()
                loss.backward()
                return loss
            loss = optimizer.step(closure)
            monitor.step(loss)
        monitor.step(1.5)                     # a float: no graph
        monitor.step(torch.tensor(2.0))       # a tensor without a graph
    assert CODE not in {f.code for f in monitor.report().findings}


def test_a_head_left_out_of_the_optimizer_is_named_first_as_that():
    """The term of a head the optimizer does not hold trains nothing too; the root cause is the
    optimizer's, and the report says so first."""
    torch.manual_seed(0)
    model = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 2)})
    optimizer = torch.optim.SGD(model["a"].parameters(), lr=1e-2)
    with Monitor(model, optimizer, every=3) as monitor:
        for _ in range(16):
            x = torch.randn(8, 4)
            model.zero_grad()
            loss = F.mse_loss(model["a"](x), torch.ones(8, 2)) + F.mse_loss(model["b"](x),
                                                                           torch.ones(8, 2))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
    codes = [f.code for f in monitor.report().findings]
    assert "PARAMS_NOT_IN_OPTIMIZER" in codes and CODE in codes, codes
    assert codes.index("PARAMS_NOT_IN_OPTIMIZER") < codes.index(CODE)
    detached = next(f for f in monitor.report().findings if f.code == CODE)
    assert detached.follows_from and detached.evidence["reached"].startswith("b.")
