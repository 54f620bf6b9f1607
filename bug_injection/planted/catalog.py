"""The catalogue of plantable bugs: what each is, where it goes, and what must find it.

A ``Bug`` is a frozen record. ``bug.planted(bench)`` is a context manager that applies the bug
to a bench and always reverts it. Its ground truth: ``culprit`` (the module, ``"loss"`` or
``"data"`` a finding must point at; None when the bug lives in the loop as a whole and no one
place is right), ``path`` and ``pattern`` for gradient bugs (the gradient path and the kind of
error ``check_gradients`` must name), and ``codes``: at least one finding with one of these
codes must appear, raised by the tool ``tool`` names (a key of ``tools.TOOLS``).
"""
from dataclasses import dataclass
from collections.abc import Callable
from contextlib import AbstractContextManager

from . import data, gradient, init, numerics, training_loop, transformer
from ..reference.bench import Bench
from ..reference.models import BACKENDS
from ..tools import TOOLS

KINDS = ("gradient", "training loop", "init", "numerics", "data")


@dataclass(frozen=True, kw_only=True)
class Bug:
    """One plantable bug; see the module docstring for the fields."""

    name: str
    kind: str
    description: str
    setup: str                      # the bench it is planted in (``bench.SETUPS``)
    plant: Callable                 # plant(bench) or plant(bench, module) -> context manager
    tool: str                       # the tool that must find it (a key of ``tools.TOOLS``)
    codes: tuple[str, ...]
    culprit: str | None
    module: str | None = None       # where it is planted, when that is one module
    path: str | None = None
    pattern: str | None = None
    backends: tuple[str, ...] = BACKENDS
    unsupported: tuple[tuple[str, str], ...] = ()   # (backend, why it does not apply there)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"Bug.kind: expected one of {KINDS}, got {self.kind!r}")
        if self.tool not in TOOLS:
            raise ValueError(f"Bug.tool: expected one of {tuple(TOOLS)}, got {self.tool!r}")

    def planted(self, bench: Bench) -> AbstractContextManager:
        """A context manager that plants the bug in ``bench`` and takes it out afterwards."""
        if bench.backend not in self.backends:
            raise ValueError(f"{self.name}: does not apply to {bench.backend} "
                             f"({dict(self.unsupported).get(bench.backend, 'not catalogued')})")
        if bench.setup != self.setup:
            raise ValueError(f"{self.name}: is planted in a {self.setup!r} bench, "
                             f"got {bench.setup!r}")
        return self.plant(bench) if self.module is None else self.plant(bench, self.module)

    @property
    def expected(self) -> str:
        """The ground truth in words: "'2' input, transpose", "loss", "data", "-"."""
        where = self.culprit or "-"
        if self.path is not None:
            where += f" {self.path}"
        return f"{where}, {self.pattern}" if self.pattern else where


def _gradient(name, plant, *, setup, module, path, pattern=None, description):
    return Bug(name=name, kind="gradient", description=description, setup=setup, plant=plant,
               tool="gradcheck", codes=("GRADIENT_MISMATCH",), culprit=module, module=module,
               path=path, pattern=pattern)


_DIVERGING = ("LOSS_DIVERGING", "NAN_LOSS", "EXPLODING_GRADIENTS", "LOSS_OSCILLATING")

_CATALOG = (
    # ------------------------------------------------------------------ gradient
    _gradient("linear_input_transposed", gradient.linear_input_transposed, setup="mixed_mlp",
              module="2", path="input", pattern="transpose",
              description="Linear's input gradient multiplies by W.T where W belongs "
                          "(grad @ W.T); silent only because layer 2 is square"),
    _gradient("linear_weight_transposed", gradient.linear_weight_transposed, setup="mixed_mlp",
              module="2", path="weight", pattern="transpose",
              description="Linear's weight gradient is transposed (x.T @ grad instead of "
                          "grad.T @ x); silent only because layer 2 is square"),
    _gradient("linear_sign_flip", gradient.linear_input_sign_flipped, setup="mixed_mlp",
              module="4", path="input", pattern="sign flip",
              description="Linear's input gradient has the wrong sign (-(grad @ W))"),
    _gradient("linear_wrong_scale", gradient.linear_weight_scaled, setup="mixed_mlp",
              module="0", path="weight", pattern="scale",
              description="Linear's weight gradient carries a stray factor 2"),
    _gradient("linear_bias_mean", gradient.linear_bias_mean, setup="mixed_mlp", module="6",
              path="bias", pattern="mean instead of sum",
              description="Linear's bias gradient is the batch mean of the output gradient, "
                          "not its sum"),
    _gradient("relu_mask_dropped", gradient.relu_mask_dropped, setup="mixed_mlp", module="1",
              path="input",
              description="ReLU's backward passes the gradient everywhere, also where the "
                          "input was < 0"),
    _gradient("sigmoid_derivative", gradient.sigmoid_derivative_wrong, setup="mixed_mlp",
              module="5", path="input",
              description="sigmoid's derivative is taken as y instead of y * (1 - y)"),
    _gradient("tanh_derivative", gradient.tanh_derivative_wrong, setup="mixed_mlp", module="3",
              path="input", description="tanh's derivative is taken as 1 - y instead of 1 - y**2"),
    _gradient("conv_kernel_not_flipped", gradient.conv_kernel_not_flipped, setup="cnn",
              module="2", path="input",
              description="Conv2d's input gradient correlates with the kernel as is; it needs "
                          "the kernel flipped (a full convolution)"),
    _gradient("cross_entropy_not_divided", gradient.cross_entropy_not_divided,
              setup="mixed_mlp", module="loss", path="input", pattern="sum instead of mean",
              description="softmax cross-entropy (mean over the batch) returns softmax - onehot "
                          "without dividing by the batch size"),
    _gradient("add_broadcast_not_reduced", gradient.add_broadcast_not_reduced,
              setup="mixed_mlp", module="7", path="offset",
              description="add's backward does not sum the broadcast operand's gradient over "
                          "the batch; it keeps the first row (an unreduced gradient would raise "
                          "in minigrad and be summed by torch's engine, so the row is what stays "
                          "silent on both)"),
    _gradient("layer_norm_no_mean_term", gradient.layer_norm_no_mean_term,
              setup="layer_norm_net", module="1", path="input",
              description="LayerNorm's input gradient lacks the term from the mean, "
                          "-mean(dx_hat)"),
    _gradient("batch_norm_no_mean_term", gradient.batch_norm_no_mean_term,
              setup="batch_norm_net", module="1", path="input",
              description="BatchNorm's input gradient (training mode) lacks the term from the "
                          "batch mean"),
    # ------------------------------------------- gradient, transformer (tiny_gpt, gpt.py)
    _gradient("attention_mask_not_in_backward", transformer.plant_attention_mask_not_in_backward,
              setup="tiny_gpt", module="blocks.0.attn", path="internal",
              description="attention's backward recomputes the weights without the causal mask "
                          "(forward masks the future, backward does not)"),
    _gradient("attention_softmax_no_subtraction",
              transformer.plant_attention_softmax_no_subtraction, setup="tiny_gpt",
              module="blocks.0.attn", path="internal",
              description="attention's softmax backward lacks its subtraction term: p * g "
                          "instead of p * (g - sum(p * g))"),
    _gradient("attention_scale_forward_only", transformer.plant_attention_scale_forward_only,
              setup="tiny_gpt", module="blocks.0.attn", path="internal",
              description="the 1/sqrt(d) score scale is applied in forward only; the query and "
                          "key gradients miss it"),
    _gradient("attention_values_untransposed",
              transformer.plant_attention_values_untransposed, setup="tiny_gpt",
              module="blocks.0.attn", path="internal",
              description="the value gradient is P @ g where P.T @ g belongs (silent: "
                          "self-attention's weights are square)"),
    _gradient("embedding_grad_assigned", transformer.plant_embedding_grad_assigned,
              setup="tiny_gpt", module="wte", path="weight",
              description="the embedding backward assigns grad[idx] = g instead of adding: "
                          "a repeated token keeps one of its gradients"),
    _gradient("cross_entropy_counts_ignored", transformer.plant_cross_entropy_counts_ignored,
              setup="tiny_gpt", module="loss", path="input", pattern="scale",
              description="the next-token loss ignores padding in forward but its backward "
                          "divides by every position, padding included"),
    _gradient("tied_weight_gradient_overwritten", transformer.plant_tied_gradient_overwritten,
              setup="tiny_gpt", module="wte", path="weight",
              description="the embedding weight shared with the output head (wte.weight) gets "
                          "only the embedding's gradient: minigrad's engine overwrites the "
                          "head's with it; in torch the head's Function drops its part"),
    # ------------------------------------------------------------- training loop
    Bug(name="missing_zero_grad", kind="training loop", setup="mlp",
        plant=training_loop.missing_zero_grad, tool="monitor", codes=("STALE_GRADIENTS",),
        culprit=None,
        description="the loop never calls optimizer.zero_grad(): each backward adds to the "
                    "last one's gradients"),
    Bug(name="learning_rate_too_high", kind="training loop", setup="mlp",
        plant=training_loop.learning_rate_too_high, tool="monitor", codes=_DIVERGING,
        culprit=None, description="SGD with lr=10"),
    Bug(name="optimizer_other_parameters", kind="training loop", setup="mlp",
        plant=training_loop.optimizer_over_other_parameters, tool="monitor",
        codes=("PARAMS_NOT_UPDATING",), culprit=None,
        description="the optimizer was built over another model's parameters"),
    Bug(name="detached_graph", kind="training loop", setup="mlp",
        plant=training_loop.detached_graph, module="2", tool="monitor",
        codes=("NO_GRADIENT",), culprit="2",
        description="layer 2's output is detached in forward: layers 0 and 2 never get a "
                    "gradient"),
    Bug(name="eval_mode_forgotten", kind="training loop", setup="batch_norm_net",
        plant=training_loop.eval_mode_forgotten, tool="monitor",
        codes=("TRAIN_MODE_AT_EVAL",), culprit="1",
        description="the evaluation pass runs under no_grad but without model.eval(): batch "
                    "norm uses batch statistics and updates its running averages"),
    Bug(name="labels_shuffled", kind="training loop", setup="mlp",
        plant=training_loop.labels_shuffled, tool="monitor",
        codes=("LOSS_AT_CHANCE", "LOSS_PLATEAU"), culprit=None,
        description="the training labels were shuffled apart from their inputs"),
    Bug(name="float_labels", kind="training loop", setup="mlp",
        plant=training_loop.float_labels, tool="preflight", codes=("LABEL_DTYPE",),
        culprit="data",
        description="class labels stored as floats for cross-entropy, which wants int64 "
                    "indices"),
    Bug(name="output_target_broadcast", kind="training loop", setup="regressor",
        plant=training_loop.targets_broadcasting, tool="preflight",
        codes=("SHAPE_BROADCAST",), culprit="loss",
        description="regression targets of shape (N,) against outputs (N, 1): MSE "
                    "broadcasts to (N, N)"),
    # ---------------------------------------------------------------------- init
    Bug(name="negative_constant_init", kind="init", setup="mlp",
        plant=init.negative_constant_init, module="2", tool="monitor", codes=("DEAD_UNITS",),
        culprit="3",
        description="layer 2 initialised to the constant -1 (weights and bias): fed by a "
                    "ReLU, it outputs only negatives, so ReLU 3 never fires"),
    Bug(name="large_init_exploding", kind="init", setup="deep_net", plant=init.large_init,
        tool="monitor", codes=("EXPLODING_ACTIVATIONS", "EXPLODING_GRADIENTS"), culprit=None,
        description="every weight 3x its He value in a 10-layer ReLU net without "
                    "normalization"),
    Bug(name="zero_init", kind="init", setup="mlp", plant=init.zero_init, tool="monitor",
        codes=("COLLAPSED_ACTIVATIONS",), culprit="0",
        description="every weight matrix initialised to zero: the units of a layer are all "
                    "alike and stay so"),
    Bug(name="deep_sigmoid_vanishing", kind="init", setup="deep_net",
        plant=init.sigmoid_activations, tool="monitor", codes=("VANISHING_GRADIENTS",),
        culprit="0",
        description="a 10-layer net with sigmoid activations: the gradient shrinks at every "
                    "layer"),
    # ------------------------------------------------------------------ numerics
    Bug(name="softmax_without_max", kind="numerics", setup="confident_mlp",
        plant=numerics.softmax_without_max, tool="monitor", codes=("NAN_LOSS",),
        culprit="loss",
        description="the loss computes exp(z) / sum(exp(z)) without subtracting max(z): exp "
                    "overflows"),
    Bug(name="log_without_epsilon", kind="numerics", setup="confident_mlp",
        plant=numerics.log_without_epsilon, tool="monitor", codes=("NAN_LOSS",),
        culprit="loss",
        description="the loss takes log(softmax(z)): a probability that underflows to 0 "
                    "gives -inf"),
    # ---------------------------------------------------------------------- data
    Bug(name="unnormalized_inputs", kind="data", setup="mlp", plant=data.unnormalized_inputs,
        tool="validate_data", codes=("UNNORMALIZED_INPUT",), culprit="data",
        description="inputs in raw units (x * 1000 + 500)"),
    Bug(name="nonfinite_rows", kind="data", setup="mlp", plant=data.nonfinite_rows,
        tool="validate_data", codes=("DATA_NONFINITE",), culprit="data",
        description="three training rows hold NaN or inf"),
    Bug(name="train_test_duplicates", kind="data", setup="mlp",
        plant=data.train_test_duplicates, tool="validate_data", codes=("DATA_LEAKAGE",),
        culprit="data", description="12 test examples are copies of training examples"),
    Bug(name="label_imbalance", kind="data", setup="mlp", plant=data.label_imbalance,
        tool="validate_data", codes=("LABEL_IMBALANCE",), culprit="data",
        description="class 3 cut to 30 training examples (403:30, about 13:1)"),
)


def catalog() -> list[Bug]:
    """Every catalogued bug, in a fixed order (gradient, loop, init, numerics, data)."""
    return list(_CATALOG)


def get_bug(name: str) -> Bug:
    """The bug called ``name``; a ``KeyError`` listing the names when there is none."""
    for bug in _CATALOG:
        if bug.name == name:
            return bug
    raise KeyError(f"no bug called {name!r}; catalogued: {', '.join(b.name for b in _CATALOG)}")
