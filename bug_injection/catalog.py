"""The catalogue of plantable bugs: what each is, where it goes, and what must find it.

A ``Bug`` is a frozen record. ``bug.planted(bench)`` is a context manager that applies the bug
to a bench and always reverts it. Its ground truth: ``culprit`` (the module, ``"loss"`` or
``"data"`` a finding must point at; None when the bug lives in the loop as a whole and no one
place is right), ``path`` and ``pattern`` for gradient bugs (the gradient path and the kind of
error ``check_gradients`` must name), and ``codes``: at least one finding with one of these
codes must appear, raised by the diagnostic ``probe`` names.
"""
from dataclasses import dataclass
from typing import Callable

from . import data, gradient, init, numerics, training_loop
from .models import BACKENDS

KINDS = ("gradient", "training loop", "init", "numerics", "data")
PROBES = ("gradcheck", "monitor", "preflight", "validate_data")


@dataclass(frozen=True)
class Bug:
    """One plantable bug; see the module docstring for the fields."""

    name: str
    kind: str
    description: str
    setup: str                      # the bench it is planted in (``bench.SETUPS``)
    plant: Callable                 # plant(bench) or plant(bench, module) -> context manager
    probe: str
    codes: tuple
    culprit: str | None
    module: str | None = None       # where it is planted, when that is one module
    path: str | None = None
    pattern: str | None = None
    backends: tuple = BACKENDS
    unsupported: tuple = ()         # (backend, why it does not apply there)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Bug.kind: expected one of {KINDS}, got {self.kind!r}")
        if self.probe not in PROBES:
            raise ValueError(f"Bug.probe: expected one of {PROBES}, got {self.probe!r}")

    def planted(self, bench):
        """A context manager that plants the bug in ``bench`` and takes it out afterwards."""
        if bench.backend not in self.backends:
            raise ValueError(f"{self.name}: does not apply to {bench.backend} "
                             f"({dict(self.unsupported).get(bench.backend, 'not catalogued')})")
        if bench.setup != self.setup:
            raise ValueError(f"{self.name}: is planted in a {self.setup!r} bench, "
                             f"got {bench.setup!r}")
        return self.plant(bench) if self.module is None else self.plant(bench, self.module)

    @property
    def expected(self):
        """The ground truth in words: "'2' input, transpose", "loss", "data", "-"."""
        where = self.culprit or "-"
        if self.path is not None:
            where += f" {self.path}"
        return f"{where}, {self.pattern}" if self.pattern else where


def _gradient(name, setup, module, path, pattern, plant, description):
    return Bug(name, "gradient", description, setup, plant, "gradcheck", ("GRADIENT_MISMATCH",),
               culprit=module, module=module, path=path, pattern=pattern)


_DIVERGING = ("LOSS_DIVERGING", "NAN_LOSS", "EXPLODING_GRADIENTS", "LOSS_OSCILLATING")

_CATALOG = (
    # ------------------------------------------------------------------ gradient
    _gradient("linear_input_transposed", "mixed_mlp", "2", "input", "transpose",
              gradient.linear_input_transposed,
              "Linear's input gradient multiplies by W.T where W belongs (grad @ W.T); silent "
              "only because layer 2 is square"),
    _gradient("linear_weight_transposed", "mixed_mlp", "2", "weight", "transpose",
              gradient.linear_weight_transposed,
              "Linear's weight gradient is transposed (x.T @ grad instead of grad.T @ x); "
              "silent only because layer 2 is square"),
    _gradient("linear_sign_flip", "mixed_mlp", "4", "input", "sign flip",
              gradient.linear_input_sign_flipped,
              "Linear's input gradient has the wrong sign (-(grad @ W))"),
    _gradient("linear_wrong_scale", "mixed_mlp", "0", "weight", "scale",
              gradient.linear_weight_scaled,
              "Linear's weight gradient carries a stray factor 2"),
    _gradient("linear_bias_mean", "mixed_mlp", "6", "bias", "mean instead of sum",
              gradient.linear_bias_mean,
              "Linear's bias gradient is the batch mean of the output gradient, not its sum"),
    _gradient("relu_mask_dropped", "mixed_mlp", "1", "input", None, gradient.relu_mask_dropped,
              "ReLU's backward passes the gradient everywhere, also where the input was < 0"),
    _gradient("sigmoid_derivative", "mixed_mlp", "5", "input", None,
              gradient.sigmoid_derivative_wrong,
              "sigmoid's derivative is taken as y instead of y * (1 - y)"),
    _gradient("tanh_derivative", "mixed_mlp", "3", "input", None,
              gradient.tanh_derivative_wrong,
              "tanh's derivative is taken as 1 - y instead of 1 - y**2"),
    _gradient("conv_kernel_not_flipped", "cnn", "2", "input", None,
              gradient.conv_kernel_not_flipped,
              "Conv2d's input gradient correlates with the kernel as is; it needs the kernel "
              "flipped (a full convolution)"),
    _gradient("cross_entropy_not_divided", "mixed_mlp", "loss", "input", "sum instead of mean",
              gradient.cross_entropy_not_divided,
              "softmax cross-entropy (mean over the batch) returns softmax - onehot without "
              "dividing by the batch size"),
    _gradient("add_broadcast_not_reduced", "mixed_mlp", "7", "offset", None,
              gradient.add_broadcast_not_reduced,
              "add's backward does not sum the broadcast operand's gradient over the batch; it "
              "keeps the first row (an unreduced gradient would raise in minigrad and be summed "
              "by torch's engine, so the row is what stays silent on both)"),
    _gradient("layer_norm_no_mean_term", "layer_norm_net", "1", "input", None,
              gradient.layer_norm_no_mean_term,
              "LayerNorm's input gradient lacks the term from the mean, -mean(dx_hat)"),
    _gradient("batch_norm_no_mean_term", "batch_norm_net", "1", "input", None,
              gradient.batch_norm_no_mean_term,
              "BatchNorm's input gradient (training mode) lacks the term from the batch mean"),
    # ------------------------------------------------------------- training loop
    Bug("missing_zero_grad", "training loop",
        "the loop never calls optimizer.zero_grad(): each backward adds to the last one's "
        "gradients", "mlp", training_loop.missing_zero_grad, "monitor", ("STALE_GRADIENTS",),
        culprit=None),
    Bug("learning_rate_too_high", "training loop", "SGD with lr=10", "mlp",
        training_loop.learning_rate_too_high, "monitor", _DIVERGING, culprit=None),
    Bug("optimizer_other_parameters", "training loop",
        "the optimizer was built over another model's parameters", "mlp",
        training_loop.optimizer_over_other_parameters, "monitor", ("PARAMS_NOT_UPDATING",),
        culprit=None),
    Bug("detached_graph", "training loop",
        "layer 2's output is detached in forward: layers 0 and 2 never get a gradient", "mlp",
        training_loop.detached_graph, "monitor", ("NO_GRADIENT",), culprit="2", module="2"),
    Bug("eval_mode_forgotten", "training loop",
        "the evaluation pass runs under no_grad but without model.eval(): batch norm uses "
        "batch statistics and updates its running averages", "batch_norm_net",
        training_loop.eval_mode_forgotten, "monitor", ("TRAIN_MODE_AT_EVAL",), culprit="1"),
    Bug("labels_shuffled", "training loop",
        "the training labels were shuffled apart from their inputs", "mlp",
        training_loop.labels_shuffled, "monitor", ("LOSS_AT_CHANCE", "LOSS_PLATEAU"),
        culprit=None),
    Bug("float_labels", "training loop",
        "class labels stored as floats for cross-entropy, which wants int64 indices", "mlp",
        training_loop.float_labels, "preflight", ("LABEL_DTYPE",), culprit="data"),
    Bug("output_target_broadcast", "training loop",
        "regression targets of shape (N,) against outputs (N, 1): MSE broadcasts to (N, N)",
        "regressor", training_loop.targets_broadcasting, "preflight", ("SHAPE_BROADCAST",),
        culprit="loss"),
    # ---------------------------------------------------------------------- init
    Bug("negative_constant_init", "init",
        "layer 2 initialised to the constant -1 (weights and bias): fed by a ReLU, it outputs "
        "only negatives, so ReLU 3 never fires", "mlp", init.negative_constant_init, "monitor",
        ("DEAD_UNITS",), culprit="3", module="2"),
    Bug("large_init_exploding", "init",
        "every weight 3x its He value in a 10-layer ReLU net without normalization",
        "deep_net", init.large_init, "monitor", ("EXPLODING_ACTIVATIONS", "EXPLODING_GRADIENTS"),
        culprit=None),
    Bug("zero_init", "init",
        "every weight matrix initialised to zero: the units of a layer are all alike and stay "
        "so", "mlp", init.zero_init, "monitor", ("COLLAPSED_ACTIVATIONS",), culprit="0"),
    Bug("deep_sigmoid_vanishing", "init",
        "a 10-layer net with sigmoid activations: the gradient shrinks at every layer",
        "deep_net", init.sigmoid_activations, "monitor", ("VANISHING_GRADIENTS",), culprit="0"),
    # ------------------------------------------------------------------ numerics
    Bug("softmax_without_max", "numerics",
        "the loss computes exp(z) / sum(exp(z)) without subtracting max(z): exp overflows",
        "confident_mlp", numerics.softmax_without_max, "monitor", ("NAN_LOSS",),
        culprit="loss"),
    Bug("log_without_epsilon", "numerics",
        "the loss takes log(softmax(z)): a probability that underflows to 0 gives -inf",
        "confident_mlp", numerics.log_without_epsilon, "monitor", ("NAN_LOSS",),
        culprit="loss"),
    # ---------------------------------------------------------------------- data
    Bug("unnormalized_inputs", "data", "inputs in raw units (x * 1000 + 500)", "mlp",
        data.unnormalized_inputs, "validate_data", ("UNNORMALIZED_INPUT",), culprit="data"),
    Bug("nonfinite_rows", "data", "three training rows hold NaN or inf", "mlp",
        data.nonfinite_rows, "validate_data", ("DATA_NONFINITE",), culprit="data"),
    Bug("train_test_duplicates", "data", "12 test examples are copies of training examples",
        "mlp", data.train_test_duplicates, "validate_data", ("DATA_LEAKAGE",), culprit="data"),
    Bug("label_imbalance", "data", "class 3 cut to 2 training examples (16:1)", "mlp",
        data.label_imbalance, "validate_data", ("LABEL_IMBALANCE",), culprit="data"),
)


def catalog():
    """Every catalogued bug, in a fixed order (gradient, loop, init, numerics, data)."""
    return list(_CATALOG)


def get_bug(name):
    """The bug called ``name``; a ``KeyError`` listing the names when there is none."""
    for bug in _CATALOG:
        if bug.name == name:
            return bug
    raise KeyError(f"no bug called {name!r}; catalogued: {', '.join(b.name for b in _CATALOG)}")
