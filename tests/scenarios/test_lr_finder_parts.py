"""The CIFAR-10 loader (on fake batch files), ResNet-18, and the CSV plot script."""
import pickle

import numpy as np
import pytest
import torch

from scenarios import cifar10, lr_finder, plot_lr_csv
from scenarios.resnet import ResNet18


def _write_batch(path, images, labels):
    data = images.reshape(len(images), -1)
    with open(path, "wb") as handle:
        pickle.dump({b"batch_label": b"fake", b"labels": list(labels), b"data": data,
                     b"filenames": [b"x.png"] * len(labels)}, handle)


@pytest.fixture
def fake_cifar(tmp_path):
    """cifar-10-batches-py with data_batch_1 (6 images), data_batch_2 (4) and test_batch (3)."""
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (13, 3, 32, 32), dtype=np.uint8)
    labels = rng.integers(0, 10, 13)
    _write_batch(folder / "data_batch_1", images[:6], labels[:6])
    _write_batch(folder / "data_batch_2", images[6:10], labels[6:10])
    _write_batch(folder / "test_batch", images[10:], labels[10:])
    return tmp_path, images, labels


def test_cifar10_loader_reads_the_python_batches(fake_cifar):
    parent, images, labels = fake_cifar
    x, y = cifar10.load(parent, train=True)
    assert x.shape == (10, 3, 32, 32) and x.dtype == np.float32
    assert y.dtype == np.int64 and y.tolist() == labels[:10].tolist()
    expected = (images[:10] / 255.0 - cifar10.MEAN[:, None, None]) / cifar10.STD[:, None, None]
    np.testing.assert_allclose(x, expected, atol=1e-6)  # float32 arithmetic
    # the red plane comes first in each row of the file: pixel (0, 0) of channel 0 is byte 0
    raw, _ = cifar10.read_batch(parent / "cifar-10-batches-py" / "data_batch_1")
    assert raw[0, 0, 0, 0] == images[0].reshape(-1)[0] and raw[0, 1, 0, 0] == images[0, 1, 0, 0]
    x_test, y_test = cifar10.load(parent / "cifar-10-batches-py", train=False)
    assert x_test.shape == (3, 3, 32, 32) and y_test.tolist() == labels[10:].tolist()


def test_cifar10_loader_limit_and_errors(fake_cifar, tmp_path):
    parent, _, labels = fake_cifar
    x, y = cifar10.load(parent, limit=4)
    assert x.shape[0] == 4 and y.tolist() == labels[:4].tolist()
    with pytest.raises(FileNotFoundError, match="no CIFAR-10 python batches"):
        cifar10.load(tmp_path / "empty")
    bad = tmp_path / "bad"
    bad.mkdir()
    with open(bad / "test_batch", "wb") as handle:
        pickle.dump({b"something": 1}, handle)
    with pytest.raises(ValueError, match="not a CIFAR-10 batch"):
        cifar10.load(bad, train=False)


def test_lr_finder_uses_cifar10_when_given(fake_cifar):
    parent, _, _ = fake_cifar
    plan = lr_finder.plan_for(fast=False, cifar10=parent)
    assert plan.data == "CIFAR-10" and plan.width == 64
    assert lr_finder.plan_for(fast=True).data == "digits"
    x, y, x_test, y_test = lr_finder._load(plan, parent, torch.device("cpu"))
    assert tuple(x.shape) == (10, 3, 32, 32) and tuple(x_test.shape) == (3, 3, 32, 32)
    assert y.dtype == torch.int64


def test_resnet18_has_resnet18s_shape():
    model = ResNet18()
    # ResNet-18 for CIFAR-10 (3x3 stem, 10 classes): 11,173,962 parameters
    assert sum(p.numel() for p in model.parameters()) == 11_173_962
    convs = [m for m in model.modules()
             if isinstance(m, torch.nn.Conv2d) and m.kernel_size == (3, 3)]
    assert len(convs) + 1 == 18  # 17 3x3 convolutions + the final linear layer
    small = ResNet18(in_channels=1, width=4).eval()
    with torch.no_grad():
        assert tuple(small(torch.zeros(2, 1, 8, 8)).shape) == (2, 10)


def test_plot_script_reads_the_csv_and_draws(tmp_path, capsys):
    path = tmp_path / "sweep.csv"
    path.write_text("lr,loss,raw_loss\n0.001,2.3,2.31\n0.01,2.0,1.9\n0.1,1.5,1.6\n1.0,3.0,4.0\n")
    sweep = plot_lr_csv.read_sweep(path)
    assert sweep["lr"].tolist() == [0.001, 0.01, 0.1, 1.0]
    assert plot_lr_csv.main([str(path), str(tmp_path / "s.png"), "--mark", "0.01"]) == 0
    assert (tmp_path / "s.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "4 points" in capsys.readouterr().out


def test_plot_script_rejects_a_csv_without_the_columns(tmp_path):
    path = tmp_path / "other.csv"
    path.write_text("step,loss\n1,2.0\n")
    with pytest.raises(ValueError, match="missing lr, raw_loss"):
        plot_lr_csv.read_sweep(path)
