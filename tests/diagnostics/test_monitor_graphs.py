"""What the Monitor sees through the loss's autograd graph, on torch and on minigrad:
GRAPH_RETAINED for graphs held through a running total, UNREGISTERED_PARAMETERS for layers
kept in a plain Python list; and their healthy twins, quiet."""
import gc
import itertools
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from diagnostics import Monitor
from diagnostics.backends import torch_threads
from diagnostics.monitor.settings import Thresholds
from tests.diagnostics.monitor_nets import FEATURES, batches, frameworks, mlp, teacher_data
from tests.diagnostics.monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

SIGHTINGS = Thresholds().unregistered_sightings

pytestmark = pytest.mark.usefixtures("one_torch_thread")
FRAMEWORKS = frameworks()


@pytest.fixture(params=FRAMEWORKS, ids=lambda fw: fw.name)
def fw(request):
    request.param.seed(0)
    return request.param


def alarms(monitor, code):
    return [f for f in monitor.report().findings if f.code == code]


# ------------------------------------------------------------ GRAPH_RETAINED
def _running_total(fw, *, keep_tensor, steps=12, every=1, hold=None):
    """The plain loop with a running total of the loss for the log; returns the Monitor and
    the total (kept alive, as the user's code keeps it)."""
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    total = 0.0
    with Monitor(model, optimizer, every=every) as monitor:
        for xb, yb in batches(x, y, steps=steps):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            total = total + (loss if keep_tensor else loss.item())
            monitor.step(loss)
            if hold is not None:
                hold(monitor)
    return monitor, total


@pytest.mark.parametrize("every", [1, 50])
def test_a_running_total_of_loss_tensors_keeps_every_graph(fw, every):
    monitor, _ = _running_total(fw, keep_tensor=True, steps=60, every=every)
    finding, = alarms(monitor, "GRAPH_RETAINED")
    assert finding.severity == "warning" and finding.location == "loss"
    assert finding.evidence["held_graphs"] >= 2 and finding.evidence["first_step"] == 0
    assert "total += loss.item()" in finding.suggestion
    if fw.name == "torch":   # a torch node holds no input tensor: only the graph is alive
        assert "total += loss instead of loss.item()" in finding.message
        assert "kept_losses" not in finding.evidence
    else:                    # a minigrad node holds its inputs: the loss tensors too
        assert finding.evidence["kept_losses"] >= 2


def test_a_running_total_of_numbers_is_quiet(fw):
    monitor, total = _running_total(fw, keep_tensor=False, steps=60)
    assert isinstance(total, float)
    assert not alarms(monitor, "GRAPH_RETAINED")


def test_kept_loss_tensors_keep_their_own_message(fw):
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    kept = []
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x, y, steps=8):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            kept.append(loss)
    finding, = alarms(monitor, "GRAPH_RETAINED")
    assert finding.evidence["kept_losses"] >= 2 and finding.evidence["held_graphs"] >= 1
    assert "loss tensors from earlier steps" in finding.message


def test_truncated_bptt_with_the_hidden_state_detached_is_quiet(fw):
    """An RNN trained on chunks of a long sequence: the hidden state goes on from chunk to
    chunk, detached, so each step's graph dies with its loss."""
    nn = fw.nn
    rng = np.random.default_rng(3)
    cell_in, cell_h, head = nn.Linear(4, 16), nn.Linear(16, 16), nn.Linear(16, 1)
    model = nn.Sequential(cell_in, cell_h, head)      # registers the three layers
    optimizer = fw.optim.SGD(model.parameters(), lr=0.05)
    h = fw.inputs(np.zeros((8, 16)))
    with Monitor(model, optimizer, every=1) as monitor:
        for _ in range(12):
            optimizer.zero_grad()
            loss = 0.0
            for _ in range(5):   # one chunk of 5 time steps
                x = fw.inputs(rng.standard_normal((8, 4)))
                h = (cell_in(x) + cell_h(h)).tanh()
                loss = loss + ((head(h) - fw.inputs(rng.standard_normal((8, 1)))) ** 2).mean()
            loss.backward()
            optimizer.step()
            h = h.detach()
            monitor.step(loss)
    assert not alarms(monitor, "GRAPH_RETAINED")


def test_the_monitor_holds_no_loss_and_no_graph_across_steps():
    """With every probe on at every step, a loss tensor and its graph die once the loop lets
    go of them: the Monitor keeps neither (a marker in the graph's metadata shows it)."""
    import torch

    x, y = teacher_data(0)
    model = mlp(FRAMEWORKS[0], [FEATURES, 16, 4])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    tensors, graphs = [], []

    class Marker:
        pass

    with Monitor(model, optimizer, every=1, per_step_gradients=True) as monitor:
        for xb, yb in batches(x, y, steps=6):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(torch.tensor(xb)), torch.tensor(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            marker = Marker()
            loss.grad_fn.metadata["test_marker"] = marker
            tensors.append(weakref.ref(loss))
            graphs.append(weakref.ref(marker))
            del marker
        del loss
        assert [r() for r in tensors] == [None] * 6
        assert [r() for r in graphs] == [None] * 6


def test_the_loss_graph_is_walked_once_per_sampled_step(fw):
    """The probes that read the loss's graph (softmax fed to cross-entropy, unregistered
    layers) share one walk of it per sampled step, and the walk is dropped with the step."""
    x, y = teacher_data(0)
    model = mlp(fw, [FEATURES, 16, 4])
    optimizer = fw.optim.SGD(model.parameters(), lr=0.1)
    with Monitor(model, optimizer, every=3) as monitor:
        kernels, walks = monitor._kernels, []
        walk_graph = kernels.walk_graph
        kernels.walk_graph = lambda tensor: walks.append(monitor._ctx.step) or walk_graph(tensor)
        for xb, yb in batches(x, y, steps=8):
            optimizer.zero_grad()
            loss = fw.F.cross_entropy(model(fw.inputs(xb)), fw.labels(yb))
            loss.backward()
            optimizer.step()
            monitor.step(loss)
            assert monitor._ctx.walked is None
    assert walks == [0, 1, 3, 6]


def test_no_mark_is_left_in_a_kept_graph_after_close():
    from diagnostics.monitor.kernels.torch_kernels import _NoOpHook

    def hooks_alive():
        gc.collect()
        return sum(type(o) is _NoOpHook for o in gc.get_objects())

    seen = []
    monitor, total = _running_total(FRAMEWORKS[0], keep_tensor=True, steps=6,
                                    hold=lambda m: seen.append(hooks_alive()))
    assert max(seen) >= 2                   # marks on the graphs while the Monitor ran
    assert total.grad_fn is not None       # the user's total still keeps every graph
    assert hooks_alive() == 0              # but none of the Monitor's marks
    monitor.close()                        # idempotent
    assert alarms(monitor, "GRAPH_RETAINED")


# --------------------------------------------------- UNREGISTERED_PARAMETERS
def _listed_net(fw, registered):
    nn = fw.nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            hidden = [nn.Linear(FEATURES, 32), nn.Linear(32, 32)]
            self.hidden = nn.ModuleList(hidden) if registered else hidden
            self.head = nn.Linear(32, 4)

        def forward(self, x):
            for layer in self.hidden:
                x = fw.F.relu(layer(x))
            return self.head(x)
    return Net()


def _train(fw, model, *, steps=8, every=1, optimizer=None, inputs=None, after=None):
    x, y = teacher_data(0)
    optimizer = optimizer or fw.optim.Adam(model.parameters(), lr=1e-2)
    with Monitor(model, optimizer, every=every) as monitor:
        for step, (xb, yb) in enumerate(batches(x, y, steps=steps)):
            optimizer.zero_grad()
            xb = fw.inputs(xb) if inputs is None else inputs(xb)
            loss = fw.F.cross_entropy(model(xb), fw.labels(yb))
            loss.backward()
            optimizer.step()
            if after is not None:
                after(step)
            monitor.step(loss)
    return monitor


@pytest.mark.parametrize("every", [1, 50])
def test_layers_in_a_plain_list_are_unregistered_parameters(fw, every):
    monitor = _train(fw, _listed_net(fw, registered=False), steps=60 if every > 1 else 8,
                     every=every)
    finding, = alarms(monitor, "UNREGISTERED_PARAMETERS")
    assert finding.severity == "warning"
    assert sorted(map(tuple, finding.evidence["shapes"])) == [(32,), (32,), (32, 16), (32, 32)]
    assert "4 tensors that receive gradients" in finding.message
    assert "32x16" in finding.message and "32x32" in finding.message
    assert "nn.ModuleList" in finding.suggestion


def test_layers_in_a_module_list_are_quiet(fw):
    assert not alarms(_train(fw, _listed_net(fw, registered=True)), "UNREGISTERED_PARAMETERS")


def test_too_few_sightings_are_not_enough(fw):
    monitor = _train(fw, _listed_net(fw, registered=False), steps=SIGHTINGS - 1)
    assert not alarms(monitor, "UNREGISTERED_PARAMETERS")


def test_inputs_that_require_grad_are_not_parameters(fw):
    """An adversarial or input-gradient loop: a fresh input tensor with requires_grad per
    batch, and a full-batch run on one input tensor that requires grad."""
    def fresh(xb):
        return fw.module.tensor(np.asarray(xb, dtype=np.float32), requires_grad=True)
    monitor = _train(fw, mlp(fw, [FEATURES, 16, 4]), inputs=fresh)
    assert not alarms(monitor, "UNREGISTERED_PARAMETERS")
    x, _ = teacher_data(0)
    full = fresh(x[:64])
    monitor = _train(fw, mlp(fw, [FEATURES, 16, 4]), inputs=lambda xb: full)
    assert not alarms(monitor, "UNREGISTERED_PARAMETERS")


def test_a_tensor_updated_by_hand_is_quiet(fw):
    """A scale the user trains with their own SGD step, outside the model and the optimizer."""
    model = mlp(fw, [FEATURES, 16, 4])
    scale = fw.module.tensor(np.ones(FEATURES, dtype=np.float32), requires_grad=True)

    def step_scale(step):
        with fw.no_grad():
            scale.data -= 0.01 * scale.grad
        scale.grad = None

    monitor = _train(fw, model, inputs=lambda xb: fw.inputs(xb) * scale, after=step_scale)
    assert not alarms(monitor, "UNREGISTERED_PARAMETERS")


def test_a_second_network_with_its_own_optimizer_is_quiet(fw):
    """A GAN-like loop: the watched model's loss runs through a second network that its own
    optimizer trains (the discriminator)."""
    model, critic = mlp(fw, [FEATURES, 16, FEATURES]), mlp(fw, [FEATURES, 8, 4])
    critic_optimizer = fw.optim.SGD(critic.parameters(), lr=0.05)

    class Through(fw.nn.Module):
        def __init__(self):
            super().__init__()
            self.generator = model

        def forward(self, x):
            return critic(self.generator(x))

    def step_critic(step):
        critic_optimizer.step()
        critic_optimizer.zero_grad()

    wrapped = Through()
    monitor = _train(fw, wrapped, optimizer=fw.optim.Adam(model.parameters(), lr=1e-2),
                     after=step_critic)
    assert not alarms(monitor, "UNREGISTERED_PARAMETERS")


def test_a_parameter_group_added_later_is_quiet():
    import torch

    fw = FRAMEWORKS[0]
    model = _listed_net(fw, registered=False)
    optimizer = torch.optim.Adam(model.head.parameters(), lr=1e-2)
    calls = []

    def add_group(step):
        if step == 0:
            calls.append(step)
            optimizer.add_param_group({"params": [p for layer in model.hidden
                                                  for p in layer.parameters()]})
    monitor = _train(fw, model, optimizer=optimizer, after=add_group)
    assert calls and not alarms(monitor, "UNREGISTERED_PARAMETERS")


def test_the_monitor_keeps_no_unregistered_tensor_alive(fw):
    model = _listed_net(fw, registered=False)
    refs = [weakref.ref(p) for layer in model.hidden for p in layer.parameters()]
    monitor = _train(fw, model)
    model.hidden = []          # the user lets go of the listed layers (the model is held)
    gc.collect()
    assert [r() for r in refs] == [None] * 4
    assert alarms(monitor, "UNREGISTERED_PARAMETERS")   # report() after close still has it


def test_a_buffer_that_requires_grad_is_registered(fw):
    """A registered buffer made from a tensor with requires_grad: odd, but the model holds it."""
    nn = fw.nn

    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = mlp(fw, [FEATURES, 16, 4])
            self.register_buffer("scale", fw.module.tensor(
                np.full(FEATURES, 0.5, dtype=np.float32), requires_grad=True))

        def forward(self, x):
            return self.body(x * self.scale)

    assert not alarms(_train(fw, Scaled()), "UNREGISTERED_PARAMETERS")


@settings(max_examples=6, deadline=None)
@given(listed=st.lists(st.booleans(), min_size=1, max_size=3))
def test_exactly_the_listed_layers_are_reported(listed):
    """Hidden layers of widths 8, 12, 16, each either in a plain list or registered: the
    finding lists the weights and biases of exactly the listed ones."""
    import torch

    nn = torch.nn
    torch.manual_seed(0)
    widths = [FEATURES] + [8, 12, 16][:len(listed)]
    layers = [nn.Linear(a, b) for a, b in itertools.pairwise(widths)]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.registered = nn.ModuleList(l for l, kept in zip(layers, listed) if not kept)
            self.head = nn.Linear(widths[-1], 4)

        def forward(self, x):
            for layer in layers:
                x = torch.relu(layer(x))
            return self.head(x)

    expected = sorted(tuple(p.shape) for l, kept in zip(layers, listed) if kept
                      for p in l.parameters())
    with torch_threads(1):
        found = alarms(_train(FRAMEWORKS[0], Net(), steps=SIGHTINGS), "UNREGISTERED_PARAMETERS")
    assert sorted(tuple(s) for f in found for s in f.evidence["shapes"]) == expected
    assert len(found) == (1 if expected else 0)
