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
- A module class that defines ``backward`` (a straight-through estimator, a gradient reversal,
  a custom clamp written as on ``torch.autograd.Function``): autograd never calls a module's
  method, so the gradient is autograd's own derivative of ``forward`` (zero through round or
  sign, not reversed). Found off the class; on torch the Monitor then asks the user's own
  ``backward`` at one call and reports only when the gradient autograd passes back is missing
  or points the other way (a leftover ``backward`` beside a straight-through fix made in
  ``forward`` is dead code, not a missing gradient).
"""
from dataclasses import dataclass

from .findings import Finding
from .monitor.kinds import BATCHNORM, module_kind

INVERTED_MOMENTUM = 0.5   # above it, most of each running statistic is the latest batch's
NO_GRADIENT = 1e-6        # autograd's gradient below this share of the declared one: none


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


@dataclass(frozen=True)
class IgnoredBackward:
    """A module whose class defines a ``backward`` that autograd never calls."""

    name: str                      # the module's name ("" for the root)
    type_name: str
    defined_in: str                # the class (of its bases) that defines ``backward``
    disagreement: str | None = None   # "none" or "reversed" at a call, when read


def backward_disagreement(module, inputs, output):
    """What the gradient autograd passes back through ``module`` does that ``module.backward(g)``
    says it should not, for a seeded probe ``g`` at one call (torch): ``"none"`` when autograd
    passes back no gradient where the module's backward gives one (round, sign, a codebook
    lookup), ``"reversed"`` when the two point against each other (a gradient reversal), or
    None when autograd's gradient already goes the declared way (a leftover ``backward``
    beside a straight-through fix made in ``forward``: dead code, not a missing gradient).
    Raises ``LookupError`` when this call cannot tell (no input with a graph, a ``backward``
    that does not take a gradient and return one of the input's shape)."""
    import torch

    source = next((x for x in inputs if torch.is_tensor(x) and x.requires_grad
                   and x.is_floating_point()), None)
    result = next((y for y in (output if isinstance(output, (tuple, list)) else (output,))
                   if torch.is_tensor(y) and y.is_floating_point()), None)
    if source is None or result is None or result.shape != source.shape:
        raise LookupError("no input and output of one shape with a graph")
    probe = torch.randn(result.shape, generator=torch.Generator().manual_seed(0),
                        dtype=result.dtype).to(result.device)
    actual = (torch.autograd.grad(result, source, probe, retain_graph=True, allow_unused=True)[0]
              if result.requires_grad else None)
    with torch.no_grad():
        declared = module.backward(probe.clone())
    declared = declared[0] if isinstance(declared, (tuple, list)) and declared else declared
    if not torch.is_tensor(declared) or declared.shape != source.shape:
        raise LookupError("its backward does not return a gradient of the input's shape")
    declared = declared.detach().double().reshape(-1)
    size = float(declared.norm())
    if size == 0:
        return None                        # the module means to stop the gradient
    actual = torch.zeros_like(declared) if actual is None else actual.double().reshape(-1)
    if float(actual.norm()) <= NO_GRADIENT * size:
        return "none"
    return "reversed" if float(torch.dot(actual, declared)) < 0 else None


def ignored_backwards(model) -> list[IgnoredBackward]:
    """Modules whose class (or a base below the framework's Module) defines ``backward``; one
    per class, at its first module, since one fix serves every instance."""
    found, classes = [], set()
    for name, module in _walk(model):
        owner = _backward_owner(type(module))
        if owner is not None and type(module) not in classes:
            classes.add(type(module))
            found.append(IgnoredBackward(name, type(module).__name__, owner.__name__))
    return found


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
    """MODULE_REUSED and BATCHNORM_MOMENTUM_INVERTED for ``model``, read off the tree alone
    (MODULE_BACKWARD_IGNORED needs a call of the module: the Monitor's probe)."""
    return ([reused_finding(r) for r in reused_modules(model)]
            + momentum_findings(inverted_momenta(model)))


def ignored_backward_finding(ignored: IgnoredBackward) -> Finding:
    where = ignored.name or ignored.type_name
    inherited = (f" (inherited from {ignored.defined_in})"
                 if ignored.defined_in != ignored.type_name else "")
    return Finding(
        "MODULE_BACKWARD_IGNORED", "warning", where,
        f"{ignored.type_name} defines backward(){inherited}, but autograd never calls a "
        f"module's backward: the gradient through {where} is autograd's derivative of its "
        f"forward (zero through round, sign or a threshold; a gradient reversal does not "
        f"reverse), and the custom gradient is silently unused{_measured(ignored)}",
        "write the custom gradient as a torch.autograd.Function (minigrad.Function) with "
        "static forward(ctx, ...) and backward(ctx, grad), and call Fn.apply(x) in the "
        "module's forward; for a "
        "straight-through estimator, x + (f(x) - x).detach() does the same",
        {"module": ignored.name, "type": ignored.type_name, "defined_in": ignored.defined_in})


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


HOOK_FRAMEWORKS = ("lightning", "pytorch_lightning")   # a Module whose backward() they call


def _measured(ignored):
    if ignored.disagreement == "none":
        return (" (at a call, autograd passed no gradient back through it, where its "
                "backward gives one)")
    if ignored.disagreement == "reversed":
        return (" (at a call, the gradient autograd passed back points against the one its "
                "backward gives)")
    return ""


def _backward_owner(cls):
    """The class in ``cls``'s bases (below the framework's own Module classes) whose body
    defines ``backward``, or None; None too for a trainer framework's module (Lightning calls
    ``LightningModule.backward(loss)`` itself, and an override of it is a hook)."""
    if any((base.__module__ or "").startswith(HOOK_FRAMEWORKS) for base in cls.__mro__):
        return None
    for base in cls.__mro__:
        if _framework_class(base):
            return None
        if callable(vars(base).get("backward")):
            return base
    return None


def _framework_class(cls):
    module = cls.__module__ or ""
    return module.startswith(("torch.", "minigrad.")) or cls is object


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
