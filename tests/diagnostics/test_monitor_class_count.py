"""The uniform-guess level -log(1/C) is read off the output only for a loss that scores
classes: regressions and BCE over independent outputs have no class count (a VAE, a GAN, a
multi-label head), so no chance-based finding can be raised from it."""
import numpy as np
import pytest

from diagnostics.monitor import Monitor

from .monitor_nets import CLASSES, FEATURES, batches, frameworks, mlp, teacher_data
from .monitor_nets import one_torch_thread  # noqa: F401 (a fixture)

FRAMEWORKS = frameworks()
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _watched(fw, loss_of, *, steps=12, lr=0.05, as_number=False):
    """A closed Monitor(every=1) over ``steps`` of an MLP trained with ``loss_of``; the loss
    handed to ``step`` as a number with ``as_number``."""
    x, y = teacher_data(0)
    model = mlp(fw, (FEATURES, 32, CLASSES))
    optimizer = fw.optim.SGD(model.parameters(), lr=lr)
    with Monitor(model, optimizer, every=1) as monitor:
        for xb, yb in batches(x, y, steps=steps):
            optimizer.zero_grad()
            loss = loss_of(fw, model(fw.inputs(xb)), yb)
            loss.backward()
            optimizer.step()
            monitor.step(loss.item() if as_number else loss)
    return monitor


def _classes_read(fw, loss_of):
    return _watched(fw, loss_of).report().loss.get("classes")


def _cross_entropy(fw, out, y):
    return fw.F.cross_entropy(out, fw.labels(y))


def _regression(fw, out, y):
    return fw.F.mse_loss(out, fw.inputs(np.eye(CLASSES)[y] * 3.0))


def _multi_label(fw, out, y):
    return fw.F.binary_cross_entropy_with_logits(out, fw.inputs(np.eye(CLASSES)[y]))


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
def test_a_cross_entropy_reads_the_classes_off_the_output(fw):
    assert _classes_read(fw, _cross_entropy) == CLASSES


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
@pytest.mark.parametrize("loss_of", [_regression, _multi_label], ids=["mse", "bce"])
def test_a_loss_without_softmax_has_no_class_count(fw, loss_of):
    assert _classes_read(fw, loss_of) is None


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
def test_a_loss_passed_as_a_number_keeps_the_output_width(fw):
    """Without a graph nothing says what the loss is: the output is read as before."""
    monitor = _watched(fw, _regression, as_number=True)
    assert monitor.report().loss.get("classes") == CLASSES


@pytest.mark.parametrize("fw", FRAMEWORKS, ids=lambda fw: fw.name)
def test_the_prediction_entropy_is_measured_only_while_the_loss_is_near_chance(fw):
    """LOSS_AT_CHANCE alone reads the entropy, and only with the loss within 5% of ln C: it is
    measured on the first sample and then only while the latest loss lies near ln C."""
    def entropies(scale):
        monitor = _watched(fw, lambda fw, out, y: fw.F.cross_entropy(out * scale, fw.labels(y)),
                           steps=6, lr=0.0)
        return monitor.history.losses, [s.output_entropy for s in monitor._view().samples]
    confident, far = entropies(200.0)        # huge logits: a loss far above ln C
    assert min(confident) > 1.5 * np.log(CLASSES)
    assert far[0] is not None and far[1:] == [None] * 5
    guessing, near = entropies(0.01)         # near-uniform predictions: the loss is ln C
    assert np.allclose(guessing, np.log(CLASSES), rtol=0.01)
    assert all(e is not None and 0 < e <= np.log(CLASSES) + 1e-6 for e in near)
