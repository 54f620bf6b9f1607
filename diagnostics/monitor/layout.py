"""``Layout``: what the Monitor learns about a model and its optimizer before training starts."""
from dataclasses import dataclass, field

from ..errors import DiagnosticsError
from .kinds import EMBEDDING, RESHAPE, SATURATION, changes_with_mode, module_kind


@dataclass(frozen=True)
class LayerInfo:
    """A leaf module whose output the Monitor measures."""

    name: str                       # as named_modules() spells it; "" for a model without children
    kind: str
    type_name: str
    module: object = field(repr=False, compare=False)

    @property
    def saturation(self):
        return SATURATION.get(self.kind)


@dataclass(frozen=True)
class ParamInfo:
    """A parameter: its name, owner module, shape, and whether anyone means to train it."""

    name: str
    module_name: str
    shape: tuple
    trainable: bool                 # requires_grad
    in_optimizer: bool | None       # None when the Monitor was given no optimizer
    tensor: object = field(repr=False, compare=False)

    @property
    def numel(self):
        count = 1
        for size in self.shape:
            count *= size
        return count

    @property
    def is_weight(self):
        """A matrix or kernel (2-D or more): what gradient flow is measured on."""
        return len(self.shape) >= 2


class Layout:
    """Layers in the model's own order (registration order), parameters, mode-dependent modules."""

    def __init__(self, backend, optimizer=None):
        modules = backend.named_modules()
        self.root_type = type(backend.model).__name__
        self.layers = [LayerInfo(name, module_kind(module), type(module).__name__, module)
                       for name, module in modules
                       if not any(True for _ in module.children())
                       and module_kind(module) != RESHAPE]
        held = optimizer_parameter_ids(optimizer)
        self.params = [ParamInfo(name, name.rpartition(".")[0], tuple(param.shape),
                                 bool(param.requires_grad),
                                 None if held is None else id(param) in held, param)
                       for name, param in backend.named_parameters()]
        # the optimizer steps parameters that are not the model's (built over another model,
        # a copy, or before a layer was replaced): its zero_grad() clears none of the others
        self.optimizer_holds_others = held is not None and bool(
            held - {id(p.tensor) for p in self.params})
        self.mode_modules = [(name, module) for name, module in modules
                             if changes_with_mode(module)]
        modules_by_name = dict(modules)
        self.type_names = {name: type(module).__name__ for name, module in modules}
        # weights whose rows are output units (Linear, Conv): a row without gradient in every
        # batch is a unit whose output never reaches the loss (an embedding's rows are words)
        shapes = {p.name: p.shape for p in self.params}
        trainable = {p.name for p in self.trainable}
        self.unit_weights = [p.name for p in self.weights
                             if p.name.rpartition(".")[2] == "weight"
                             and _rows_are_units(modules_by_name.get(p.module_name), p.shape,
                                                 shapes.get(_bias_of(p.name)))]
        self.unit_biases = {name: _bias_of(name) for name in self.unit_weights
                            if _bias_of(name) in trainable}

    def call_layer(self, layer, call):
        """The layer that stands for the ``call``-th call (2, 3, ...) of ``layer``'s module
        within one model call: named ``name#call``, listed after the module's earlier calls;
        made on first use (a module's calls are known only once the model runs)."""
        name = f"{layer.name}#{call}"
        for known in self.layers:
            if known.name == name:
                return known
        before = layer if call == 2 else self.call_layer(layer, call - 1)
        made = LayerInfo(name, layer.kind, layer.type_name, layer.module)
        self.layers.insert(self.layers.index(before) + 1, made)
        return made

    @property
    def trainable(self):
        return [p for p in self.params if p.trainable]

    @property
    def weights(self):
        """Trainable matrices and kernels in model order: one per layer for gradient flow."""
        return [p for p in self.params if p.trainable and p.is_weight]


# layers whose weight is (out, in, ...): rows are output units whatever the bias says
_ROWS_ARE_OUTPUTS = {"Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d"}


def _rows_are_units(module, weight_shape, bias_shape):
    """True when the rows of a module's weight are its output units. A known Linear/Conv has
    that layout; another module only when its bias has one entry per row (transformers'
    ``Conv1D`` stores (in, out), a transposed convolution (in, out, ...), an embedding's rows
    are words): anything else gets no per-unit check rather than a wrong one."""
    if module is None or module_kind(module) == EMBEDDING:
        return False
    names = {cls.__name__ for cls in type(module).__mro__}
    if any(name.startswith("ConvTranspose") or name == "Conv1D" for name in names):
        return False
    if bias_shape is not None:
        return len(bias_shape) == 1 and bias_shape[0] == weight_shape[0]
    return bool(names & _ROWS_ARE_OUTPUTS)


def _bias_of(weight_name):
    """``"fc1.weight"`` -> ``"fc1.bias"``."""
    return weight_name[:-len("weight")] + "bias"


def display_name(name):
    return name if name else "(model)"


def optimizer_parameter_ids(optimizer):
    """Ids of the tensors in the optimizer's ``param_groups`` as they are now; None without an
    optimizer (a DiagnosticsError for an object without param groups)."""
    if optimizer is None:
        return None
    groups = getattr(optimizer, "param_groups", None)
    if not isinstance(groups, list) or not all(isinstance(g, dict) and "params" in g
                                               for g in groups):
        raise DiagnosticsError(
            f"optimizer: expected a torch.optim or minigrad.optim optimizer (an object with "
            f"param_groups) or None, got {type(optimizer).__module__}."
            f"{type(optimizer).__qualname__}")
    return {id(param) for group in groups for param in group["params"]}


def learning_rates(optimizer):
    """The current learning rate of each parameter group (schedulers change them)."""
    if optimizer is None:
        return []
    return [group["lr"] for group in optimizer.param_groups if "lr" in group]
