"""Exercise 3: the learning-rate range test on a ResNet-18, saved to CSV, plotted, and judged.

With ``cifar10=PATH`` (a folder holding the CIFAR-10 python batches) the net is ResNet-18 on
CIFAR-10; without it, a ResNet-18-style net (the same blocks, fewer channels) on
scikit-learn's digits as 8x8 images. ``find_lr`` sweeps the learning rate for SGD with
momentum; the sweep goes to a CSV, and ``scenarios/plot_lr_csv.py`` draws the curve from that
CSV alone. The suggestion is then judged by what it does: the same initial net is trained with
it, with the other methods' suggestions and with a hand-tuned grid, and the results compared.

ResNet-18 on CIFAR-10 is a GPU workload (it runs on CUDA when available); on a CPU use
``fast=True`` (a ResNet-18-style net of width 8 on 2,000 images: minutes, not hours).
"""
from dataclasses import dataclass

import numpy as np
import torch

from diagnostics import find_lr
from diagnostics.backends import torch_threads

from . import cifar10 as cifar
from . import digits, plot_lr_csv
from .files import output_dir
from .resnet import ResNet18
from .result import ScenarioResult

NAME = "lr_finder"
TITLE = "LR range test on a ResNet-18: CSV, plot, suggestion judged by training with it"
GRID = (1e-3, 1e-2, 1e-1, 1.0)   # the hand-tuned comparison: one value per decade
MOMENTUM = 0.9
SEED = 0


@dataclass(frozen=True)
class Plan:
    """What to run: the data set, the net's width, the sweep and the judging budget."""

    data: str                 # "digits" or "CIFAR-10"
    width: int                # ResNet-18 has 64
    sweep_steps: int
    judge_epochs: int
    batch: int = 64
    judge_default_only: bool = False   # judge only the default suggestion (against the grid)
    min_accuracy: float = 0.5          # "it learns" in the judging budget: test accuracy above
    train_limit: int | None = None
    test_limit: int | None = None


def plan_for(*, fast, cifar10=None):
    if cifar10 is None:
        return Plan("digits", width=8 if fast else 16, sweep_steps=30 if fast else 100,
                    judge_epochs=2 if fast else 3, judge_default_only=fast)
    if fast:
        return Plan("CIFAR-10", width=8, sweep_steps=30, judge_epochs=1, train_limit=2000,
                    test_limit=1000, judge_default_only=True, min_accuracy=0.2)
    return Plan("CIFAR-10", width=64, sweep_steps=100, judge_epochs=1, train_limit=10000,
                test_limit=2000, min_accuracy=0.2)


def run(*, fast=False, out_dir=None, cifar10=None, device=None):
    """``cifar10``: the folder of the CIFAR-10 python batches (else digits); ``device``: a
    torch device, by default CUDA when available."""
    result = ScenarioResult(NAME, TITLE, fast)
    plan = plan_for(fast=fast, cifar10=cifar10)
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    threads = 1 if plan.data == "digits" else torch.get_num_threads()
    with result.timed(), torch_threads(threads):
        folder = output_dir(out_dir)
        x, y, x_test, y_test = _load(plan, cifar10, device)
        channels = x.shape[1]
        parameters = sum(p.numel() for p in _model(plan, channels, device).parameters())
        result.section(f"{plan.data}: {len(x)} training images {tuple(x.shape[1:])}, "
                       f"ResNet-18{'' if plan.width == 64 else '-style'} (width {plan.width}, "
                       f"{parameters:,} parameters) on {device}")
        model = _model(plan, channels, device)
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=MOMENTUM)
        sweep = find_lr(model, torch.nn.functional.cross_entropy,
                        _Batches(x, y, batch=plan.batch), optimizer=optimizer,
                        start_lr=1e-5, end_lr=10.0, steps=plan.sweep_steps)
        result.say(sweep)
        suggestion = sweep.suggestion
        result.say(f"suggested learning rate: {_lr_text(suggestion)} ({sweep.method})")
        _save(result, sweep, folder)
        _judge(result, plan, sweep, data=(x, y, x_test, y_test), device=device)
    return result


def _load(plan, cifar10, device):
    if plan.data == "digits":
        split = digits.load_split()
        arrays = (digits.as_images(split.x_train), split.y_train,
                  digits.as_images(split.x_test), split.y_test)
    else:
        arrays = (*cifar.load(cifar10, train=True, limit=plan.train_limit),
                  *cifar.load(cifar10, train=False, limit=plan.test_limit))
    x, y, x_test, y_test = arrays
    as_float = lambda a: torch.tensor(a, dtype=torch.float32, device=device)
    as_long = lambda a: torch.tensor(a, dtype=torch.int64, device=device)
    return as_float(x), as_long(y), as_float(x_test), as_long(y_test)


def _model(plan, channels, device):
    torch.manual_seed(SEED)
    return ResNet18(in_channels=channels, num_classes=10, width=plan.width).to(device)


class _Batches:
    """Shuffled minibatches, a new seeded order on every pass (``find_lr`` cycles through it)."""

    def __init__(self, x, y, *, batch, seed=SEED):
        self.x, self.y, self.batch = x, y, batch
        self.generator = torch.Generator().manual_seed(seed)

    def __iter__(self):
        order = torch.randperm(len(self.x), generator=self.generator).to(self.x.device)
        for start in range(0, len(order) - self.batch + 1, self.batch):
            chosen = order[start:start + self.batch]
            yield self.x[chosen], self.y[chosen]


def _save(result, sweep, folder):
    csv_path, image_path = folder / "lr_sweep.csv", folder / "lr_sweep.png"
    sweep.to_csv(csv_path)
    marks = [sweep.suggestion] if sweep.suggestion is not None else []
    plot_lr_csv.plot_csv(csv_path, image_path, marks=marks)
    result.files["sweep CSV"] = str(csv_path)
    result.files["plot (drawn by scenarios/plot_lr_csv.py from the CSV)"] = str(image_path)
    read = plot_lr_csv.read_sweep(csv_path)
    result.check("the sweep saved to CSV reads back exactly",
                 np.array_equal(read["lr"], sweep.lrs)
                 and np.array_equal(read["loss"], sweep.losses)
                 and np.array_equal(read["raw_loss"], sweep.raw_losses),
                 f"{len(read['lr'])} rows")
    with open(image_path, "rb") as handle:
        signature = handle.read(8)
    result.check("the plot script drew the curve from the CSV",
                 signature == b"\x89PNG\r\n\x1a\n", str(image_path))


def _judge(result, plan, sweep, *, data, device):
    """Train the same initial net with each learning rate and compare.

    The measure is the mean minibatch loss over the last epoch (what a progress bar shows;
    steadier than the loss at one point) and the test accuracy.
    """
    x, y, x_test, y_test = data
    suggestion = sweep.suggestion
    bottom = sweep.lrs[int(np.nanargmin(sweep.losses))]
    result.check("there is a suggestion, below the learning rate of the lowest loss "
                 "(not at the edge of divergence)",
                 suggestion is not None and suggestion < bottom,
                 f"suggestion {_lr_text(suggestion)}, lowest loss at {bottom:.3g}")
    if suggestion is None:
        return
    candidates = [(f"find_lr {name}", lr) for name, lr in sweep.suggestions.items()
                  if lr is not None and (name == sweep.method or not plan.judge_default_only)]
    candidates += [("hand-tuned", lr) for lr in GRID]
    outcomes = {}
    lines = [f"training the same initial net {plan.judge_epochs} epoch(s) with each learning "
             f"rate (SGD, momentum {MOMENTUM}):"]
    for label, lr in candidates:
        loss, accuracy = _train(plan, lr, channels=x.shape[1], device=device,
                                data=(x, y, x_test, y_test))
        outcomes[(label, lr)] = (loss, accuracy)
        mark = "  <- suggestion" if label == f"find_lr {sweep.method}" else ""
        lines.append(f"  {label:<20} lr {lr:<9.3g} last-epoch loss {loss:>9.4g}  "
                     f"test accuracy {accuracy:6.1%}{mark}")
    result.say("\n".join(lines))
    loss, accuracy = outcomes[(f"find_lr {sweep.method}", suggestion)]
    best_lr, (best, _) = min(((lr, outcome) for (label, lr), outcome in outcomes.items()
                              if label == "hand-tuned"), key=lambda item: item[1][0])
    result.check(f"training with the suggestion learns (test accuracy over "
                 f"{plan.min_accuracy:.0%}, chance 10%)", accuracy > plan.min_accuracy,
                 f"test accuracy {accuracy:.1%}")
    result.check("the suggestion trains about as well as the best hand-tuned value (last-epoch "
                 "loss within 2x)", loss <= 2 * best,
                 f"suggestion {loss:.4g}, best hand-tuned (lr {best_lr:g}) {best:.4g}")


def _train(plan, lr, *, channels, device, data):
    """``(mean minibatch loss over the last epoch, test accuracy)`` after
    ``plan.judge_epochs`` epochs."""
    x, y, x_test, y_test = data
    model = _model(plan, channels, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=MOMENTUM)
    batches = _Batches(x, y, batch=plan.batch)
    for _ in range(plan.judge_epochs):
        losses = []
        for inputs, targets in batches:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
    last = float(torch.stack(losses).mean())
    model.eval()
    return (last if np.isfinite(last) else float("inf")), _accuracy(model, x_test, y_test)


def _accuracy(model, x, y, *, chunk=500):
    correct = 0
    with torch.no_grad():
        for start in range(0, len(x), chunk):
            correct += int((model(x[start:start + chunk]).argmax(1)
                            == y[start:start + chunk]).sum())
    return correct / len(x)


def _lr_text(lr):
    return "none" if lr is None else f"{lr:.3g}"
