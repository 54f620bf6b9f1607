"""Draw a learning-rate range test from the CSV that ``LRFinderResult.to_csv`` writes.

    python -m scenarios.plot_lr_csv sweep.csv sweep.png [--mark 0.01 --mark 0.003]

The CSV has the columns ``lr, loss, raw_loss`` (loss smoothed, raw_loss as measured). The plot
shows both against the learning rate on a log axis and marks the lowest smoothed loss and any
learning rates given with ``--mark``.
"""
import argparse
import csv
import math
import sys

import numpy as np

COLUMNS = ("lr", "loss", "raw_loss")


def read_sweep(path):
    """``{"lr": array, "loss": array, "raw_loss": array}`` from the CSV at ``path``."""
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        missing = [name for name in COLUMNS if name not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: expected the columns {', '.join(COLUMNS)}, missing "
                             f"{', '.join(missing)}")
        rows = list(reader)
    if not rows:
        raise ValueError(f"{path}: no rows")
    return {name: np.array([float(row[name]) for row in rows]) for name in COLUMNS}


def plot_sweep(sweep, path, *, marks=()):
    """Save the curve as an image at ``path`` (PNG by its extension)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    lrs, losses = sweep["lr"], sweep["loss"]
    figure = Figure(figsize=(7, 4.5))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    axes.plot(lrs, sweep["raw_loss"], color="0.75", linewidth=1, label="loss (raw)")
    axes.plot(lrs, losses, color="C0", linewidth=2, label="loss (smoothed)")
    finite = np.isfinite(losses)
    if finite.any():
        best = int(np.nanargmin(np.where(finite, losses, np.nan)))
        axes.plot([lrs[best]], [losses[best]], "v", color="C3", markersize=9,
                  label=f"lowest loss at lr {lrs[best]:.2g}")
        raw = sweep["raw_loss"][np.isfinite(sweep["raw_loss"])]
        start = losses[finite][0]
        low = min(losses[finite].min(), raw.min() if len(raw) else np.inf)
        axes.set_ylim(low - 0.05 * (start - low + 1e-12), start + 0.3 * (start - low + 1e-12))
    for number, lr in enumerate(marks):
        axes.axvline(lr, color=f"C{number + 1}", linestyle="--", linewidth=1.5,
                     label=f"lr {lr:.2g}")
    axes.set_xscale("log")
    axes.set_xlabel("learning rate")
    axes.set_ylabel("training loss")
    axes.set_title("learning-rate range test")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=100)


def plot_csv(csv_path, image_path, *, marks=()):
    """Read the sweep at ``csv_path`` and draw it to ``image_path``; returns the sweep."""
    sweep = read_sweep(csv_path)
    plot_sweep(sweep, image_path, marks=marks)
    return sweep


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m scenarios.plot_lr_csv",
                                     description="Plot an LR range test from its CSV.")
    parser.add_argument("csv", help="the CSV written by LRFinderResult.to_csv")
    parser.add_argument("image", help="the image to write (PNG)")
    parser.add_argument("--mark", type=float, action="append", default=[],
                        help="a learning rate to mark (repeatable)")
    args = parser.parse_args(argv)
    if any(not math.isfinite(lr) or lr <= 0 for lr in args.mark):
        parser.error("--mark: expected positive learning rates")
    sweep = plot_csv(args.csv, args.image, marks=args.mark)
    print(f"{args.image}: {len(sweep['lr'])} points, lr {sweep['lr'][0]:.2g} to "
          f"{sweep['lr'][-1]:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
