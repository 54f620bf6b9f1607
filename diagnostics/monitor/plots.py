"""PNG plots of a MonitorReport: loss curve, gradient flow per layer, activations over time.

matplotlib (the ``plot`` extra) is imported only here, and only through ``Figure``: no pyplot,
so the user's backend and open figures are left alone.
"""
from pathlib import Path

import numpy as np

from ..errors import DiagnosticsError, require

_STATS = (("mean", "mean"), ("std", "standard deviation"), ("zeros", "fraction of zeros"),
          ("dead", "fraction of dead units (ReLU layers, over the window)"))


def save_plots(report, directory):
    """Write loss.png, gradient_flow.png and activations.png into ``directory``; their paths."""
    require(isinstance(directory, (str, Path)), "directory", "a folder path",
            type(directory).__name__)
    directory = Path(directory)
    require(directory.is_dir(), "directory", "an existing folder", repr(str(directory)))
    figure_class = _figure_class()
    paths = []
    for name, draw in (("loss.png", plot_loss), ("gradient_flow.png", plot_gradient_flow),
                       ("activations.png", plot_activations)):
        figure = draw(report, figure_class=figure_class)
        path = directory / name
        figure.savefig(path, dpi=110)
        paths.append(path)
    return paths


def plot_loss(report, *, figure_class=None):
    """The loss of every step, its running median, and the uniform-guess level when known."""
    figure = (figure_class or _figure_class())(figsize=(8, 4.5), layout="constrained")
    axes = figure.subplots()
    losses = report.history.losses
    steps = np.arange(losses.size)
    finite = np.isfinite(losses)
    axes.plot(steps[finite], losses[finite], color="tab:blue", alpha=0.35, lw=1,
              label="loss per step")
    if finite.sum() >= 10:
        centers, medians = _binned_median(steps[finite], losses[finite])
        axes.plot(centers, medians, color="tab:blue", lw=2, label="median per bin")
    if "chance" in report.loss:
        axes.axhline(report.loss["chance"], color="tab:red", ls="--", lw=1,
                     label=f"uniform guess, -log(1/{report.loss['classes']})")
    bad = steps[~finite]
    if bad.size:
        axes.axvline(bad[0], color="black", ls=":", lw=1, label=f"first NaN/inf (step {bad[0]})")
    positive = losses[finite]
    if positive.size and positive.min() > 0 and positive.max() / positive.min() > 100:
        axes.set_yscale("log")
    axes.set(xlabel="step", ylabel="loss", title=f"Loss ({report.model_type})")
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize=8)
    return figure


def plot_gradient_flow(report, *, figure_class=None):
    """Per layer, in model order: the median and the largest gradient RMS over the sampled steps."""
    figure = (figure_class or _figure_class())(figsize=(max(6, 0.45 * len(report.layers) + 3), 4.5),
                                               layout="constrained")
    axes = figure.subplots()
    history = report.history
    names, medians, peaks = [], [], []
    for param in report.parameters:
        if len(param.shape) < 2 or f"gradient/{param.name}/norm" not in history.columns:
            continue
        count = float(np.prod(param.shape))
        rms = history.column(f"gradient/{param.name}/norm") / np.sqrt(count)
        rms = rms[np.isfinite(rms)]
        if rms.size:
            names.append(param.name.rpartition(".")[0] or "(model)")
            medians.append(np.median(rms))
            peaks.append(rms.max())
    positions = np.arange(len(names))
    floor = min([v for v in medians + peaks if v > 0], default=1e-12) / 10
    axes.bar(positions, np.maximum(peaks, floor), color="tab:orange", alpha=0.45,
             label="largest")
    axes.bar(positions, np.maximum(medians, floor), color="tab:blue", label="median")
    axes.set_yscale("log")
    axes.set_xticks(positions, names, rotation=60 if len(names) > 8 else 0, ha="right"
                    if len(names) > 8 else "center", fontsize=8)
    axes.set(xlabel="layer (input side first)", ylabel="gradient RMS of the weight",
             title="Gradient flow per layer")
    axes.grid(alpha=0.3, axis="y")
    axes.legend(fontsize=8)
    return figure


def plot_activations(report, *, figure_class=None):
    """Mean, standard deviation, fraction of zeros and of dead units of each layer over time."""
    figure = (figure_class or _figure_class())(figsize=(11, 7), layout="constrained")
    grid = figure.subplots(2, 2, sharex=True)
    history = report.history
    steps = history.column("step")
    layers = [layer for layer in report.layers
              if f"activation/{layer.name or '(model)'}/mean" in history.columns]
    colors = _colors(len(layers))
    for axes, (stat, title) in zip(grid.flat, _STATS):
        for layer, color in zip(layers, colors):
            values = history.column(f"activation/{layer.name or '(model)'}/{stat}")
            shown = np.isfinite(values)
            if shown.any():
                axes.plot(steps[shown], values[shown], color=color, lw=1.3,
                          label=f"{layer.name or '(model)'} {layer.type_name}")
        axes.set_title(title, fontsize=10)
        axes.grid(alpha=0.3)
    for axes in grid[1]:
        axes.set_xlabel("step")
    handles, labels = grid.flat[0].get_legend_handles_labels()
    if handles:
        figure.legend(handles[:16], labels[:16], loc="outside right upper", fontsize=7,
                      title="layer (input side first)" + (", first 16" if len(labels) > 16
                                                           else ""), title_fontsize=7)
    figure.suptitle("Activations per layer over time")
    return figure


def _binned_median(steps, values, bins=60):
    """Median of the values in ``bins`` consecutive groups, at each group's middle step."""
    groups = np.array_split(np.arange(values.size), min(bins, values.size // 2))
    return (np.array([steps[g].mean() for g in groups]),
            np.array([np.median(values[g]) for g in groups]))


def _colors(count):
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    return [cmap(i / max(count - 1, 1) * 0.9) for i in range(count)]


def _figure_class():
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        raise DiagnosticsError(
            "plots: expected matplotlib to be installed (pip install 'gradhunt[plot]'); "
            f"importing it failed with {error!r}") from error
    return Figure
