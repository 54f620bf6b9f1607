"""What the corpus's reproductions are built from: data, tensors, an MLP, the plain loop.

A corpus entry's factory returns a ``Case`` (``bug_injection.case``) built in ``"torch"`` or
``"minigrad"``; the runner hands it to the tool the entry names. Everything is tiny and seeded
so that a case runs in well under a second on a CPU and gives the same findings every time.
"""
import numpy as np

from ..case import FRAMEWORKS, Case, framework_module

__all__ = ["BATCH", "FRAMEWORKS", "STEPS", "Case", "batches", "blobs", "classifier",
           "framework_module", "mlp",
           "loop_case", "nll_loss", "simple_loop", "tensors", "torch_module"]

STEPS, BATCH = 40, 16


def torch_module():
    return framework_module("torch")


def blobs(rows=128, features=8, classes=4, *, seed=0, spread=1.0):
    """Gaussian class clusters, float32 features and int64 labels, classes interleaved."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, features)) * 2.0
    labels = np.arange(rows) % classes
    rng.shuffle(labels)
    x = centers[labels] + spread * rng.standard_normal((rows, features))
    return x.astype(np.float32), labels.astype(np.int64)


def tensors(*arrays, framework="torch"):
    """The arrays as ``framework``'s tensors, dtypes kept."""
    if framework == "minigrad":
        minigrad = framework_module(framework)
        return tuple(minigrad.tensor(np.ascontiguousarray(a)) for a in arrays)
    torch = framework_module(framework)
    return tuple(torch.from_numpy(np.ascontiguousarray(a)) for a in arrays)


def batches(rows, size=BATCH, steps=STEPS):
    """``(step, start, stop)`` of consecutive minibatches, wrapping around the data."""
    for step in range(steps):
        start = (step * size) % rows
        yield step, start, start + size


def mlp(features=8, hidden=32, outputs=4, *, seed=0, dropout=0.0, framework="torch"):
    fw = framework_module(framework)
    fw.manual_seed(seed)
    layers = [fw.nn.Linear(features, hidden), fw.nn.ReLU()]
    if dropout:
        layers.append(fw.nn.Dropout(dropout))
    layers.append(fw.nn.Linear(hidden, outputs))
    return fw.nn.Sequential(*layers)


def classifier(framework, *, seed, model_seed=0):
    """The parts most reproductions start from: ``(fw, model, x, y, loss_fn)``: the framework
    module, a fresh 8-32-4 MLP (``model_seed``), 4-class blobs (``seed``) as its tensors, and
    cross-entropy."""
    fw = framework_module(framework)
    model = mlp(outputs=4, seed=model_seed, framework=framework)
    x, y = tensors(*blobs(seed=seed), framework=framework)
    return fw, model, x, y, fw.nn.CrossEntropyLoss()


def nll_loss(log_probs, targets):
    """``nn.NLLLoss()`` for minigrad, which lacks it: minus the mean target log-probability."""
    return -log_probs.gather(1, targets[:, None]).mean()


def simple_loop(model, optimizer, loss_fn, x, y, *, steps=STEPS, size=BATCH):
    """The plain loop: zero_grad, forward, loss, backward, step."""
    def train(after_step):
        for _, start, stop in batches(len(x), size, steps):
            optimizer.zero_grad()
            loss = loss_fn(model(x[start:stop]), y[start:stop])
            loss.backward()
            optimizer.step()
            after_step(loss)
    return train


def loop_case(model, optimizer, loss_fn, x, y, **fields) -> Case:
    """The usual reproduction: ``simple_loop`` over ``(x, y)``, its first batch for the
    one-batch tools (preflight, gradcheck), and any other ``Case`` ``fields``."""
    return Case(model=model, optimizer=optimizer, loss_fn=loss_fn, inputs=x[:BATCH],
                targets=y[:BATCH], train=simple_loop(model, optimizer, loss_fn, x, y), **fields)
