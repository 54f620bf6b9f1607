"""What a module is, as far as the checks care, told by its class names (torch and minigrad)."""

RECTIFIER = "rectifier"   # ReLU: units can die
SIGMOID = "sigmoid"       # saturates at 0 and 1
TANH = "tanh"             # saturates at -1 and 1
DROPOUT = "dropout"       # behaves differently in train mode
BATCHNORM = "batchnorm"   # behaves differently in train mode
RESHAPE = "reshape"       # passes values through unchanged: not worth a hook
EMBEDDING = "embedding"   # may legitimately give the same output for every example
OTHER = "other"

_BY_CLASS_NAME = {
    "ReLU": RECTIFIER, "ReLU6": RECTIFIER,
    "Sigmoid": SIGMOID, "Hardsigmoid": SIGMOID,
    "Tanh": TANH, "Hardtanh": TANH,
    "_DropoutNd": DROPOUT, "Dropout": DROPOUT,
    "_BatchNorm": BATCHNORM, "_NormBase": BATCHNORM,
    "Flatten": RESHAPE, "Unflatten": RESHAPE, "Identity": RESHAPE,
    "Embedding": EMBEDDING,
}

# (center, radius): an output x is saturated when |x - center| > radius
SATURATION = {SIGMOID: (0.5, 0.49), TANH: (0.0, 0.99)}


def module_kind(module):
    """The kind of ``module`` from the first class in its MRO with a known name."""
    for cls in type(module).__mro__:
        kind = _BY_CLASS_NAME.get(cls.__name__)
        if kind is not None:
            return kind
    return OTHER


def changes_with_mode(module):
    """True when train and eval mode give different outputs: dropout with p > 0, batch norm."""
    kind = module_kind(module)
    if kind == DROPOUT:
        return getattr(module, "p", 1.0) > 0
    return kind == BATCHNORM
