"""Judge find_lr's advice by training with it: scikit-learn's digits, a small MLP, in one run.

For two MLPs and two optimizers (Adam, SGD with momentum), the script trains the same initial
models with a grid of hand-tuned learning rates and with each of find_lr's suggestions
(minimum/10, steepest, valley), averages the final training loss over three seeds, and prints
the tables. The last line is the ratio of the default suggestion's final loss to the best
hand-tuned final loss, the worst of the four settings: 1.0 means as good as the best grid value.

    python benchmarks/lr_finder_advice.py
"""
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from diagnostics import find_lr

GRID = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0]
SEEDS = (0, 1, 2)
EPOCHS = 8
BATCH = 64
OPTIMIZERS = {
    "Adam": lambda params, lr: torch.optim.Adam(params, lr=lr),
    "SGD(momentum=0.9)": lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),
}


def _data():
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.3, random_state=0,
                                                        stratify=y)
    mean, std = x_train.mean(0), x_train.std(0) + 1e-8
    as_x = lambda a: torch.tensor((a - mean) / std, dtype=torch.float32)
    as_y = lambda a: torch.tensor(a, dtype=torch.int64)
    return as_x(x_train), as_y(y_train), as_x(x_test), as_y(y_test)


MODELS = {"MLP 64-64-10": (64, 64, 10), "MLP 64-64-64-10": (64, 64, 64, 10)}


def _model(sizes, seed):
    torch.manual_seed(seed)
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def _loader(x, y, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH,
                                       shuffle=True, generator=generator)


def _train(sizes, make_optimizer, lr, data, seed):
    """Final (training loss, test accuracy) after EPOCHS epochs; inf for a diverged run."""
    x_train, y_train, x_test, y_test = data
    model = _model(sizes, seed)
    optimizer = make_optimizer(model.parameters(), lr)
    for _ in range(EPOCHS):
        for inputs, targets in _loader(x_train, y_train, seed):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        train_loss = float(torch.nn.functional.cross_entropy(model(x_train), y_train))
        accuracy = float((model(x_test).argmax(1) == y_test).float().mean())
    return (train_loss if np.isfinite(train_loss) else float("inf")), accuracy


def _mean_run(sizes, make_optimizer, lr, data):
    runs = [_train(sizes, make_optimizer, lr, data, seed) for seed in SEEDS]
    return float(np.mean([r[0] for r in runs])), float(np.mean([r[1] for r in runs]))


def _suggestions(sizes, make_optimizer, data):
    """find_lr's suggestions, each averaged (geometric mean) over the seeds' initial models."""
    x_train, y_train = data[0], data[1]
    found, diverged = {}, []
    for seed in SEEDS:
        model = _model(sizes, seed)
        result = find_lr(model, torch.nn.functional.cross_entropy, _loader(x_train, y_train, seed),
                         optimizer=make_optimizer(model.parameters(), 1e-3), progress=False)
        found.setdefault("default", []).append(result.suggestion)
        for name, lr in result.suggestions.items():
            found.setdefault(name, []).append(lr)
        diverged.append(result.diverged_at)
    means = {name: _geometric_mean(lrs) for name, lrs in found.items()}
    return means, diverged


def _geometric_mean(lrs):
    known = [lr for lr in lrs if lr is not None]
    return float(np.exp(np.mean(np.log(known)))) if known else None


def main():
    data = _data()
    ratios = {}
    for model_name, sizes in MODELS.items():
        for label, make_optimizer in OPTIMIZERS.items():
            ratios[f"{model_name}, {label}"] = _judge(model_name, sizes, label, make_optimizer,
                                                      data)
    worst = max(ratios, key=ratios.get)
    print(f"find_lr default suggestion: final loss / best hand-tuned final loss = "
          f"{ratios[worst]:.2f} (worst of {len(ratios)} settings: {worst})")


def _judge(model_name, sizes, label, make_optimizer, data):
    """Print one setting's table; return the default suggestion's loss over the best grid loss."""
    print(f"== {model_name}, {label}: final training loss / test accuracy, mean of "
          f"{len(SEEDS)} seeds, {EPOCHS} epochs")
    grid = {lr: _mean_run(sizes, make_optimizer, lr, data) for lr in GRID}
    for lr, (loss, acc) in grid.items():
        print(f"  hand-tuned lr {lr:<8.2g} loss {loss:8.4f}  accuracy {acc:6.1%}")
    best_lr = min(grid, key=lambda lr: grid[lr][0])
    suggestions, diverged = _suggestions(sizes, make_optimizer, data)
    print("  find_lr sweeps (one per seed): loss diverged at lr "
          + ", ".join("-" if lr is None else f"{lr:.2g}" for lr in diverged))
    results = {}
    for name, lr in suggestions.items():
        if lr is None:
            print(f"  find_lr {name:<10} no suggestion")
            results[name] = (float("inf"), 0.0)
            continue
        results[name] = _mean_run(sizes, make_optimizer, lr, data)
        loss, acc = results[name]
        print(f"  find_lr {name:<10} lr {lr:<8.2g} loss {loss:8.4f}  accuracy {acc:6.1%}"
              f"  ratio to best hand-tuned (lr {best_lr:g}) {loss / grid[best_lr][0]:.2f}")
    return results["default"][0] / grid[best_lr][0]


if __name__ == "__main__":
    main()
