"""Structural mistakes that train without an error, read off the module tree once (by the
Monitor when it attaches, and by preflight): torch and minigrad alike, through ``_modules``,
which keeps every registration (``named_modules()`` drops repeats).

- One module object registered several times in one container (``nn.ModuleList([Block()] *
  n)``, ``nn.Sequential(*[layer] * n)``, a loop appending one instance, ``ModuleDict(dict.
  fromkeys(names, head))``): every "layer" is the same weights. Sharing across different
  parents (T5's ``shared`` embedding as ``encoder.embed_tokens`` and ``decoder.embed_tokens``)
  and tied parameters (an output projection's weight set to the embedding's) are deliberate
  and are not reported; nor are repeats of modules without parameters (one ``nn.ReLU()`` used
  twice computes the same either way).
- BatchNorm momentum in another framework's convention: Keras, TensorFlow and Flax keep
  ``momentum`` of the running statistics per batch (0.9, 0.99); PyTorch takes ``momentum`` of
  them *from the batch*. Above one half, the running statistics are mostly the last batch's,
  and evaluation uses them.
"""
from dataclasses import dataclass

from .findings import Finding
from .monitor.kinds import BATCHNORM, module_kind

INVERTED_MOMENTUM = 0.5   # above it, most of each running statistic is the latest batch's


@dataclass(frozen=True)
class ReusedModule:
    """One module object registered under several names of one container."""

    container: str                 # the container's name ("" for the root)
    names: tuple[str, ...]         # the full names it is registered under
    type_name: str
    parameters: int                # parameter tensors it holds (shared by every name)


@dataclass(frozen=True)
class InvertedMomentum:
    """A batch-norm layer whose momentum reads as another framework's convention."""

    name: str
    type_name: str
    momentum: float


def reused_modules(model) -> list[ReusedModule]:
    """Module objects with parameters that one container registers more than once."""
    found = []
    for container, module in _walk(model):
        by_object = {}
        for child_name, child in getattr(module, "_modules", {}).items():
            if child is not None:
                by_object.setdefault(id(child), (child, []))[1].append(child_name)
        for child, names in by_object.values():
            count = _parameter_count(child)
            if len(names) > 1 and count:
                prefix = f"{container}." if container else ""
                found.append(ReusedModule(container, tuple(prefix + n for n in names),
                                          type(child).__name__, count))
    return found


def inverted_momenta(model) -> list[InvertedMomentum]:
    """Batch-norm layers that keep running statistics with a momentum above one half."""
    found = []
    for name, module in _walk(model):
        if module_kind(module) != BATCHNORM:
            continue
        momentum = getattr(module, "momentum", None)
        tracking = getattr(module, "track_running_stats", True)
        if tracking and isinstance(momentum, (int, float)) and momentum > INVERTED_MOMENTUM:
            found.append(InvertedMomentum(name, type(module).__name__, float(momentum)))
    return found


def structure_findings(model) -> list[Finding]:
    """MODULE_REUSED and BATCHNORM_MOMENTUM_INVERTED for ``model``."""
    return ([reused_finding(r) for r in reused_modules(model)]
            + momentum_findings(inverted_momenta(model)))


def reused_finding(reused: ReusedModule) -> Finding:
    names = ", ".join(reused.names)
    where = reused.container or reused.names[0]
    return Finding(
        "MODULE_REUSED", "warning", where,
        f"{names} are one {reused.type_name} object, registered {len(reused.names)} times: "
        f"they are all the same {reused.parameters} parameter "
        f"tensor{'s' if reused.parameters > 1 else ''}, so the model has "
        f"1/{len(reused.names)} of the capacity its code describes (a list built as "
        f"[module] * n, dict.fromkeys(names, module), or one instance appended in a loop)",
        f"make a fresh module per entry: nn.ModuleList([{reused.type_name}(...) for _ in "
        f"range(n)]) (or copy.deepcopy(module) per entry); if the sharing is meant, register "
        f"the module once and call it several times in forward",
        {"container": reused.container, "names": list(reused.names),
         "type": reused.type_name, "shared_parameter_tensors": reused.parameters})


def momentum_findings(layers) -> list[Finding]:
    """One finding for every inverted layer (named together: one convention, one fix)."""
    if not layers:
        return []
    first = layers[0]
    names = ", ".join(f"{layer.name} ({layer.momentum:g})" for layer in layers)
    keep = 1 - first.momentum
    return [Finding(
        "BATCHNORM_MOMENTUM_INVERTED", "warning", first.name,
        f"{len(layers)} batch-norm layer{'s' if len(layers) > 1 else ''} with momentum above "
        f"{INVERTED_MOMENTUM:g}: {names}; in PyTorch the momentum is the share of each running "
        f"statistic taken from the current batch ({first.momentum:g} keeps only {keep:.2g} of "
        f"the past), the opposite of Keras' and TensorFlow's convention, so model.eval() "
        f"normalizes with roughly the last batch's statistics",
        f"use PyTorch's convention: momentum={keep:.2g} for a Keras momentum of "
        f"{first.momentum:g} (or the default 0.1)",
        {"layers": [{"name": layer.name, "type": layer.type_name, "momentum": layer.momentum}
                    for layer in layers], "threshold": INVERTED_MOMENTUM})]


def _walk(model):
    """``(name, module)`` for every module object once, parents before children."""
    seen, stack = set(), [("", model)]
    while stack:
        name, module = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        yield name, module
        children = [(f"{name}.{child_name}" if name else child_name, child)
                    for child_name, child in getattr(module, "_modules", {}).items()
                    if child is not None]
        stack.extend(reversed(children))


def _parameter_count(module):
    parameters = getattr(module, "parameters", None)
    return sum(1 for _ in parameters()) if callable(parameters) else 0
