"""Models with planted wrong backwards, and their healthy twins, on torch and on minigrad.

Each planted layer is an ordinary layer whose forward calls its op through ``call``: with a
``bug`` name, a Function (``torch.autograd.Function`` or ``minigrad.Function``) whose backward
spoils one right gradient with a wrong formula from ``bug_injection.planted.formulas``; with
``None``, the op itself.
``build(framework, kind, bug=..., seed=...)`` returns ``(model, loss_fn, inputs, targets)``
with NumPy inputs and targets, as a user might pass them.
"""

import numpy as np
import torch

import minigrad
from bug_injection.planted import formulas
from bug_injection.planted.functions import right_call, spoiled_function
from diagnostics.backends import torch_threads

FRAMEWORKS = ("torch", "minigrad")


def one_torch_thread():
    """torch on one thread for the block: these models are tiny."""
    return torch_threads(1)


# ------------------------------------------------------------------- bugs
# layer -> bug name -> (the gradient it spoils, the wrong formula from bug_injection)
BUGS = {
    "linear": {"input_transpose": (0, formulas.input_with_weight_transposed),
               "weight_transpose": (1, formulas.transposed),
               "bias_mean": (2, formulas.bias_mean),
               "weight_last_row": (1, formulas.last_row_zeroed)},
    "tanh": {"sign": (0, formulas.sign_flipped), "plus": (0, formulas.tanh_plus_square)},
    "conv2d": {"weight_double": (1, formulas.doubled), "input_sign": (0, formulas.sign_flipped)},
    "layer_norm": {"input_terms": (0, formulas.layer_norm_terms_dropped)},
    "mse": {"half": (0, formulas.halved)},
    "max_pool2d": {"triple": (0, formulas.tripled)},
    "add": {"skip_sign": (0, formulas.sign_flipped)},
}


def planted_op(framework, kind, bug):
    """The op ``kind`` of ``framework`` with ``bug`` planted, as a Function class."""
    index, formula = BUGS[kind][bug]
    return spoiled_function(framework, kind, index, formula)


def call(framework, kind, bug, *args):
    """The op ``kind`` on ``args`` (minigrad's argument order): planted, or right for None."""
    if bug is None:
        return right_call(framework, kind, *args)
    return planted_op(framework, kind, bug).apply(*args)


# ------------------------------------------------------------------ layers
def _layers(framework):
    """The planted layer classes of one framework, as a dict."""
    nn = torch.nn if framework == "torch" else minigrad.nn

    class PlantedLinear(nn.Linear):
        def __init__(self, n_in, n_out, bug=None):
            super().__init__(n_in, n_out)
            self.bug = bug

        def forward(self, x):
            return call(framework, "linear", self.bug, x, self.weight, self.bias)

    class PlantedTanh(nn.Module):
        def __init__(self, bug=None):
            super().__init__()
            self.bug = bug

        def forward(self, x):
            return call(framework, "tanh", self.bug, x)

    class PlantedConv2d(nn.Module):
        def __init__(self, n_in, n_out, bug=None):
            super().__init__()
            rng = np.random.default_rng(7)
            weight = rng.standard_normal((n_out, n_in, 3, 3)) / np.sqrt(9 * n_in)
            self.weight = _parameter(framework, weight)
            self.bias = _parameter(framework, 0.1 * rng.standard_normal(n_out))
            self.bug = bug

        def forward(self, x):
            return call(framework, "conv2d", self.bug, x, self.weight, self.bias, 1, 1)

    class PlantedLayerNorm(nn.Module):
        def __init__(self, size, bug=None):
            super().__init__()
            rng = np.random.default_rng(8)
            self.weight = _parameter(framework, 1 + 0.1 * rng.standard_normal(size))
            self.bias = _parameter(framework, 0.1 * rng.standard_normal(size))
            self.bug = bug

        def forward(self, x):
            return call(framework, "layer_norm", self.bug, x, tuple(self.weight.shape),
                        self.weight, self.bias, 1e-5)

    class MaxPool(nn.Module):
        def __init__(self, bug=None):
            super().__init__()
            self.bug = bug

        def forward(self, x):
            return call(framework, "max_pool2d", self.bug, x, 2, None, 0)

    class Flatten(nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1)

    class Residual(nn.Module):
        """``x + fc2(act(fc1(x)))``: ``fc1`` may carry a bug, or the block's own addition
        (``skip_sign``: the gradient of the skip path has the wrong sign)."""

        def __init__(self, size, bug=None):
            super().__init__()
            self.fc1 = PlantedLinear(size, size, None if bug == "skip_sign" else bug)
            self.act = nn.Tanh()
            self.fc2 = nn.Linear(size, size)
            self.add_bug = bug if bug == "skip_sign" else None

        def forward(self, x):
            return call(framework, "add", self.add_bug, x, self.fc2(self.act(self.fc1(x))))

    class TwiceTanh(nn.Module):
        """One activation module called twice, and a module returning a tuple."""

        def __init__(self, bug=None):
            super().__init__()
            self.fc1 = nn.Linear(6, 8)
            self.act = PlantedTanh(bug)
            self.pair = Pair()
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x):
            hidden, _ = self.pair(self.act(self.fc1(x)))
            return self.fc2(self.act(hidden))

    class Pair(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 8)

        def forward(self, x):
            y = self.fc(x)
            return y, y * 2

    return dict(PlantedLinear=PlantedLinear, PlantedTanh=PlantedTanh,
                PlantedConv2d=PlantedConv2d, PlantedLayerNorm=PlantedLayerNorm,
                MaxPool=MaxPool, Flatten=Flatten, Residual=Residual, TwiceTanh=TwiceTanh)


def _parameter(framework, values):
    if framework == "torch":
        return torch.nn.Parameter(torch.tensor(values, dtype=torch.float32))
    return minigrad.nn.Parameter(np.asarray(values, dtype=np.float32))


def _seed(framework, seed):
    torch.manual_seed(seed) if framework == "torch" else minigrad.manual_seed(seed)


def cross_entropy(framework):
    return torch.nn.CrossEntropyLoss() if framework == "torch" else minigrad.nn.CrossEntropyLoss()


def planted_mse(framework, bug=None):
    return lambda output, target: call(framework, "mse", bug, output, target)


# ------------------------------------------------------------------ models
def build(framework, kind, *, bug=None, seed=0, batch=5):
    """``(model, loss_fn, inputs, targets)`` for one of the model kinds below."""
    _seed(framework, seed)
    layers = _layers(framework)
    nn = torch.nn if framework == "torch" else minigrad.nn
    rng = np.random.default_rng(seed + 100)
    labels = rng.integers(0, 3, batch)
    if kind == "mlp":                       # Linear-act-PlantedLinear(square)-act-Linear
        model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), layers["PlantedLinear"](8, 8, bug),
                              nn.ReLU(), nn.Linear(8, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    if kind == "tanh":                      # the activation carries the bug
        model = nn.Sequential(nn.Linear(6, 8), layers["PlantedTanh"](bug), nn.Linear(8, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    if kind == "residual":                  # the bug sits in "1.fc1"
        model = nn.Sequential(nn.Linear(6, 8), layers["Residual"](8, bug), nn.Linear(8, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    if kind == "cnn":                       # conv-ReLU-maxpool-conv-flatten-linear
        pool_bug = bug if bug == "triple" else None
        model = nn.Sequential(layers["PlantedConv2d"](1, 3), nn.ReLU(), layers["MaxPool"](pool_bug),
                              layers["PlantedConv2d"](3, 2, None if pool_bug else bug),
                              layers["Flatten"](), nn.Linear(2 * 3 * 3, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 1, 6, 6)), labels
    if kind == "layernorm":
        model = nn.Sequential(nn.Linear(6, 8), layers["PlantedLayerNorm"](8, bug), nn.Tanh(),
                              nn.Linear(8, 3))
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    if kind == "loss":                      # a regression net whose loss carries the bug
        model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
        targets = _inputs(rng, (batch, 2))
        return model, planted_mse(framework, bug), _inputs(rng, (batch, 6)), targets
    if kind == "twice":                     # a module called twice, one returning a tuple
        model = layers["TwiceTanh"](bug)
        return model, cross_entropy(framework), _inputs(rng, (batch, 6)), labels
    raise ValueError(f"unknown model kind {kind!r}")


def _inputs(rng, shape):
    return rng.standard_normal(shape).astype(np.float32)


# ------------------------------------------------ a decoder whose mask the forward makes
MASKS = ("full", "full_float32", "numpy", "attribute", "bool", "none")
STEPS = 40   # long enough for torch's blocked CPU attention kernel


class MaskedDecoder(torch.nn.Module):
    """One self-attention layer whose causal mask its forward makes in float32 (without a
    dtype, with ``dtype=torch.float32``, from NumPy, or kept as a plain attribute), or as a
    bool mask; ``"none"`` leaves it out (the real bug). ``attention``: ``"sdpa"``
    (F.scaled_dot_product_attention) or ``"hand"`` (scores + mask, softmax)."""

    def __init__(self, mask, attention="sdpa", vocab=11, width=16, heads=2):
        super().__init__()
        self.mask, self.attention, self.heads = mask, attention, heads
        self.embed = torch.nn.Embedding(vocab, width)
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.head = torch.nn.Linear(width, vocab)
        self.kept = torch.triu(torch.full((STEPS, STEPS), float("-inf")), diagonal=1)

    def _mask(self, steps):
        if self.mask == "full":
            return torch.triu(torch.full((steps, steps), float("-inf")), diagonal=1)
        if self.mask == "full_float32":
            return torch.full((steps, steps), float("-inf"), dtype=torch.float32).triu(1)
        if self.mask == "numpy":
            return torch.from_numpy(np.triu(np.full((steps, steps), -np.inf, np.float32), 1))
        if self.mask == "attribute":
            return self.kept[:steps, :steps]
        if self.mask == "bool":
            return torch.ones(steps, steps, dtype=torch.bool).tril()
        return None

    def forward(self, ids):
        x = self.embed(ids)
        batch, steps, width = x.shape
        q, k, v = (t.reshape(batch, steps, self.heads, -1).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        mask = self._mask(steps)
        if self.attention == "sdpa":
            h = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            scores = q @ k.transpose(-1, -2) / (width // self.heads) ** 0.5
            if mask is not None:
                scores = (scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool
                          else scores + mask)
            h = scores.softmax(dim=-1) @ v
        return self.head(h.transpose(1, 2).reshape(batch, steps, width))


def decoder_batch(seed=0, rows=2):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 11, (rows, STEPS)))
