"""The scenarios by name: where each lives, what it shows, and which options it takes."""
import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    name: str
    summary: str
    options: tuple = ()   # keyword options of run() besides ``fast`` that the CLI passes on


SCENARIOS = {entry.name: entry for entry in (
    Entry("broken_networks",
          "the lesson's demo done right: lr=10, dead ReLUs, missing zero_grad, a healthy net; "
          "overfit one batch, LR finder, gradient check with CrossEntropyLoss"),
    Entry("exploding_gradients",
          "exercise 1: a 20-layer net without normalization; the detector fires, suggests a "
          "clip value, and training with that clip stays finite and learns"),
    Entry("revive_dead_units",
          "exercise 2: a net with over 70% dead ReLU units; after revival it trains again"),
    Entry("lr_finder",
          "exercise 3: LR range test on ResNet-18 (CIFAR-10 if given, else digits), CSV, plot, "
          "suggested LR judged by training with it", options=("out_dir", "cifar10")),
    Entry("data_validator",
          "exercise 4: a deliberately corrupted data set; every corruption found, the clean "
          "set clean"),
    Entry("localize_gradient_bug",
          "exercise 5: a transposed weight in a minigrad backward; module, parameter and "
          "'transpose' named, debugging log written as Markdown", options=("out_dir",)),
    Entry("minigrad_vs_torch",
          "the same net in minigrad and torch; every gradient agrees to 1e-10"),
    Entry("tiny_gpt",
          "a character-level GPT trained side by side in minigrad and torch; attention's "
          "backward forgets the causal mask, localized on both, debugging log as Markdown",
          options=("out_dir",)),
    Entry("distributed",
          "the Monitor in a 2-rank gloo DDP job: healthy, a manual all-reduce that sums, no "
          "DistributedSampler; rank 0's report merges every rank's findings"),
)}


def names():
    return list(SCENARIOS)


def load(name):
    """The scenario's module (imported on demand, so listing stays fast and torch-free)."""
    if name not in SCENARIOS:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    return importlib.import_module(f"scenarios.{name}")
