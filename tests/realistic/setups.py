"""Healthy training setups practitioners run every day: the measuring stick for false alarms.

Each entry of ``SETUPS`` builds, from a fixed seed, a ``Setup``: a model, its optimizer, a
``loss_fn(output, targets)``, a ``train_step(model, (inputs, targets), optimizer) -> loss``
(the protocol ``preflight(train_step=...)`` takes; schedulers, GradScalers and accumulation
live inside it) and ``batch(step) -> (inputs, targets)``. ``inputs`` is a tensor, a tuple
(positional arguments) or a dict (keyword arguments). Every setup is healthy: any warning or
error a diagnostic raises on it is a false alarm. Benchmarks and other tests can reuse them::

    setup = build("amp_fp16_scaler")
    losses = train(setup)                      # the plain run
    with Monitor(setup.model, setup.optimizer) as mon:
        train(fresh := build("amp_fp16_scaler"), monitor=mon)

``KNOWN_FALSE_ALARMS`` lists the (setup, assertion) pairs that fail today, quoting what goes
wrong; the tests mark them ``xfail(strict=True)``, so a fix must delete its entry.
"""
import math
from dataclasses import dataclass, field

import numpy as np

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # the minigrad setups still build without torch
    torch = None

import minigrad
from minigrad import functional as MF
from minigrad import nn as mnn
from minigrad import optim as moptim

ASSERTIONS = ("monitor", "sees", "identical", "hooks", "preflight", "overfit", "find_lr",
              "check_gradients")
MONITOR_EVERY = 10   # sampled more densely than the default 50: more chances to cry wolf


@dataclass
class Setup:
    """One healthy run. ``check(losses)`` says whether the plain run did what the setup claims
    (a setup that stops learning would make its quiet Monitor meaningless)."""

    name: str
    framework: str
    model: object
    optimizer: object
    loss_fn: object
    train_step: object
    batch: object
    steps: int
    check: object
    claim: str
    every: int = MONITOR_EVERY
    classes: int = None               # cross-entropy over this many classes; None: regression
    partial_optimizer: bool = False   # the optimizer holds only part of the model (frozen):
                                      # the tools get it; otherwise they use their default
    extra: dict = field(default_factory=dict)   # the scaler, the plain model under compile, ...
                                                # "eval_mode": how its user enters evaluation
                                                # (by default model.eval())

    def tool_batch(self, size=16):
        """A fixed batch for the tools (``check_gradients`` takes the first 4 rows)."""
        return _head(self.batch(0), size)


def call(model, inputs):
    """The model called as its user does: positional, several positional, or keywords."""
    if isinstance(inputs, dict):
        return model(**inputs)
    if isinstance(inputs, tuple):
        return model(*inputs)
    return model(inputs)


def train(setup, monitor=None):
    """The user's loop: ``setup.steps`` iterations; ``monitor.step(loss)`` after each."""
    losses = []
    for step in range(setup.steps):
        loss = setup.train_step(setup.model, setup.batch(step), setup.optimizer)
        if monitor is not None:
            monitor.step(loss)
        losses.append(float(loss.item() if hasattr(loss, "item") else loss))
    return losses


def active_alarms(findings):
    """Warnings and errors that still hold (a finding the lifecycle marks resolved does not)."""
    return [f for f in findings
            if f.severity in ("warning", "error") and not getattr(f, "resolved", False)]


def build(name, seed=0):
    """A fresh setup; it seeds the global generators, which dropout draws from: train it
    before building another."""
    return SETUPS[name](seed)


# ----------------------------------------------------------------- small helpers
def _head(batch, size):
    inputs, targets = batch
    return _rows(inputs, size), _rows(targets, size)


def _rows(value, size):
    if isinstance(value, dict):
        return {k: _rows(v, size) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_rows(v, size) for v in value)
    return value[:size]


def _cycle(inputs, targets, batch_size):
    """``batch(step)``: consecutive slices of a fixed data set, wrapping around."""
    n = len(targets)

    def batch(step):
        start = (step * batch_size) % n
        index = torch.arange(start, start + batch_size) % n
        return _take(inputs, index), targets[index]
    return batch


def _take(value, index):
    if isinstance(value, dict):
        return {k: v[index] for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(v[index] for v in value)
    return value[index]


def _fell(fraction):
    """The mean of the last tenth of the losses below ``fraction`` of the first tenth's."""
    def check(losses):
        k = max(1, len(losses) // 10)
        return np.mean(losses[-k:]) < fraction * np.mean(losses[:k])
    return check


def _plain_step(loss_fn, *, scheduler=None, clip=None):
    def train_step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        loss = loss_fn(call(model, inputs), targets)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        return loss
    return train_step


def _blobs(seed, n=256, features=16, classes=4):
    """Gaussian clusters: an easy, learnable classification set (normalised inputs)."""
    g = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, features, generator=g) * 1.5
    y = torch.randint(0, classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, features, generator=g)
    x = (x - x.mean(0)) / x.std(0)
    return x, y


def _mlp(features=16, hidden=32, classes=4, dropout=0.0):
    layers = [nn.Linear(features, hidden), nn.ReLU()]
    if dropout:
        layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers, nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def _order_task(seed, n=512, length=8, vocab=8):
    """Token sequences holding one A (1) and one B (2): is A before B? Needs attention to
    positions, so attention models sit at chance for a while before they get it."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(3, vocab, (n, length), generator=g)
    positions = torch.stack([torch.randperm(length, generator=g)[:2] for _ in range(n)])
    rows = torch.arange(n)
    x[rows, positions[:, 0]] = 1
    x[rows, positions[:, 1]] = 2
    return x, (positions[:, 0] < positions[:, 1]).long()


def _warmup(optimizer, warmup):
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup))


# ----------------------------------------------------------------- torch setups
def _classifier(seed, name, claim, *, make_optimizer, scheduler=None, dropout=0.0, steps=150,
                clip=None):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = _mlp(dropout=dropout)
    optimizer = make_optimizer(model.parameters())
    sched = scheduler(optimizer) if scheduler is not None else None
    return Setup(name, "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy, scheduler=sched, clip=clip), _cycle(x, y, 32),
                 steps, _fell(0.3), claim, extra={"scheduler": sched}, classes=4)


def adam_mlp(seed):
    return _classifier(seed, "adam_mlp", "an MLP with dropout and Adam learns the clusters",
                       make_optimizer=lambda p: torch.optim.Adam(p, lr=3e-3), dropout=0.1)


def adamw_weight_decay(seed):
    return _classifier(seed, "adamw_weight_decay", "AdamW with weight decay 0.05 learns",
                       make_optimizer=lambda p: torch.optim.AdamW(p, lr=3e-3, weight_decay=0.05))


def onecycle_warmup(seed):
    steps = 150
    return _classifier(
        seed, "onecycle_warmup", "SGD+momentum under OneCycleLR (30% warm-up) learns",
        make_optimizer=lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        scheduler=lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=steps,
                                                                pct_start=0.3),
        steps=steps)


def cosine_schedule(seed):
    steps = 150
    return _classifier(
        seed, "cosine_schedule", "SGD+momentum with cosine annealing to 0 learns",
        make_optimizer=lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
        scheduler=lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=steps),
        steps=steps)


def _amp_step(loss_fn, scaler, *, dtype, unscale_clip=None):
    def train_step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=dtype):
            loss = loss_fn(call(model, inputs), targets)
        if scaler is None:
            loss.backward()
            optimizer.step()
            return loss
        scaler.scale(loss).backward()
        if unscale_clip is not None:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), unscale_clip)
        scaler.step(optimizer)
        scaler.update()
        return loss
    return train_step


def _amp(seed, name, claim, *, dtype, scaler_scale=None, unscale_clip=None, check=None):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = _mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    scaler = (torch.amp.GradScaler("cpu", init_scale=scaler_scale)
              if scaler_scale is not None else None)
    return Setup(name, "torch", model, optimizer, F.cross_entropy,
                 _amp_step(F.cross_entropy, scaler, dtype=dtype, unscale_clip=unscale_clip),
                 _cycle(x, y, 32), 150, check or _fell(0.3), claim, extra={"scaler": scaler},
                 classes=4)


def amp_bf16(seed):
    return _amp(seed, "amp_bf16", "bf16 autocast on the CPU learns", dtype=torch.bfloat16)


def amp_fp16_scaler(seed):
    return _amp(seed, "amp_fp16_scaler", "fp16 autocast + GradScaler (default scale 2**16)",
                dtype=torch.float16, scaler_scale=2.0 ** 16)


def amp_fp16_scaler_clip(seed):
    return _amp(seed, "amp_fp16_scaler_clip",
                "fp16 autocast + GradScaler, scaler.unscale_ then clip_grad_norm_(1.0)",
                dtype=torch.float16, scaler_scale=2.0 ** 16, unscale_clip=1.0)


def amp_fp16_scaler_skips(seed):
    setup = _amp(seed, "amp_fp16_scaler_skips",
                 "fp16 + GradScaler(init_scale=2**40): the first steps overflow and are skipped",
                 dtype=torch.float16, scaler_scale=2.0 ** 40)
    scaler, learns = setup.extra["scaler"], setup.check
    setup.check = lambda losses: scaler.get_scale() <= 2.0 ** 30 and learns(losses)
    return setup


def _tokens_pooled(encoder_out):
    return encoder_out.mean(dim=1)


class OrderTransformer(nn.Module):
    """A TransformerEncoder classifier over token sequences (learned positions, mean pool)."""

    def __init__(self, vocab=8, length=8, width=32, heads=2, layers=1):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(length, width) * 0.1)
        layer = nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width, dropout=0.0,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, 2)

    def forward(self, tokens):
        return self.head(_tokens_pooled(self.encoder(self.embed(tokens) + self.position)))


class OrderAttention(nn.Module):
    """One nn.MultiheadAttention self-attention block and a classifier."""

    def __init__(self, vocab=8, length=8, width=32, heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(length, width) * 0.1)
        self.attention = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 2))

    def forward(self, tokens):
        h = self.embed(tokens) + self.position
        attended, _ = self.attention(h, h, h, need_weights=False)
        return self.head(self.norm(h + attended).mean(dim=1))


def _order_setup(seed, name, claim, model_class, *, steps, warmup):
    torch.manual_seed(seed)
    x, y = _order_task(seed)
    model = model_class()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    sched = _warmup(optimizer, warmup)
    held_x, held_y = _order_task(seed + 1000, n=256)

    def learned(losses):
        with torch.no_grad():
            accuracy = (model(held_x).argmax(1) == held_y).float().mean().item()
        return accuracy > 0.9 and np.mean(losses[:warmup]) > 0.65   # at chance (log 2) first
    return Setup(name, "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy, scheduler=sched), _cycle(x, y, 32), steps,
                 learned, claim, extra={"scheduler": sched}, classes=2)


def transformer_warmup_plateau(seed):
    return _order_setup(seed, "transformer_warmup_plateau",
                        "TransformerEncoder at chance during warm-up, then >90% held-out accuracy",
                        OrderTransformer, steps=350, warmup=150)


def multihead_attention(seed):
    return _order_setup(seed, "multihead_attention",
                        "nn.MultiheadAttention at chance during warm-up, then >90% accuracy",
                        OrderAttention, steps=350, warmup=150)


class PackedRNN(nn.Module):
    """An LSTM or GRU over padded sequences of different lengths, packed as users do."""

    def __init__(self, cell, features=4, hidden=16, classes=2):
        super().__init__()
        self.rnn = cell(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x, lengths):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                   enforce_sorted=False)
        _, state = self.rnn(packed)
        h = state[0] if isinstance(state, tuple) else state
        return self.head(h[-1])


def _packed_setup(seed, name, cell):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    n, length = 256, 10
    lengths = torch.randint(3, length + 1, (n,), generator=g)
    x = torch.randn(n, length, 4, generator=g)
    valid = torch.arange(length)[None, :] < lengths[:, None]
    x = x * valid[..., None]
    y = (x[..., 0].sum(1) > 0).long()     # the sign of the sum of feature 0 over the valid steps
    model = PackedRNN(cell)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return Setup(name, "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy, clip=1.0), _cycle((x, lengths), y, 32), 150,
                 _fell(0.5), f"{cell.__name__} over packed variable-length sequences, clipped",
                 classes=2)


def lstm_packed(seed):
    return _packed_setup(seed, "lstm_packed", nn.LSTM)


def gru_packed(seed):
    return _packed_setup(seed, "gru_packed", nn.GRU)


class ResidualCNN(nn.Module):
    def __init__(self, channels=8, classes=4):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, channels, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(channels), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(channels), nn.ReLU(),
                                   nn.Conv2d(channels, channels, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(channels))
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        h = self.stem(x)
        h = self.relu(h + self.block(h))
        return self.head(self.pool(h).flatten(1))


def residual_cnn_batchnorm(seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    n = 256
    y = torch.randint(0, 4, (n,), generator=g)
    x = torch.randn(n, 1, 8, 8, generator=g) * 0.5
    for quadrant in range(4):      # a bright 4x4 quadrant names the class
        rows, cols = divmod(quadrant, 2)
        x[y == quadrant, :, rows * 4:rows * 4 + 4, cols * 4:cols * 4 + 4] += 1.0
    model = ResidualCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    return Setup("residual_cnn_batchnorm", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x, y, 32), 100, _fell(0.3),
                 "a residual CNN with BatchNorm, SGD+momentum, weight decay", classes=4)


class DictOutput(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU())
        self.classifier = nn.Linear(32, 4)

    def forward(self, x):
        features = self.body(x)
        return {"features": features, "logits": self.classifier(features)}


class TupleOutput(DictOutput):
    def forward(self, x):
        features = self.body(x)
        return features, self.classifier(features)


def dict_output(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = DictOutput()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = lambda out, y: F.cross_entropy(out["logits"], y)  # noqa: E731
    return Setup("dict_output", "torch", model, optimizer, loss_fn, _plain_step(loss_fn),
                 _cycle(x, y, 32), 150, _fell(0.3), "returns {'features', 'logits'}", classes=4)


def tuple_output(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed, features=16)
    model = TupleOutput()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = lambda out, y: F.cross_entropy(out[1], y)  # noqa: E731
    return Setup("tuple_output", "torch", model, optimizer, loss_fn, _plain_step(loss_fn),
                 _cycle(x, y, 32), 150, _fell(0.3), "returns (features, logits)", classes=4)


class KeywordModel(nn.Module):
    """``model(input_ids=..., attention_mask=...)``: a masked mean of embeddings."""

    def __init__(self, vocab=10, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 2))

    def forward(self, input_ids, attention_mask):
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1)
        return self.head(pooled)


def _contains_task(seed, n=256, length=8, vocab=10):
    """Padded token sequences; the label: does token 1 occur in the unpadded part?"""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, vocab, (n, length), generator=g)
    lengths = torch.randint(3, length + 1, (n,), generator=g)
    mask = (torch.arange(length)[None, :] < lengths[:, None]).long()
    has = torch.rand(n, generator=g) < 0.5
    where = (torch.rand(n, generator=g) * lengths).long()
    ids[has, where[has]] = 1
    return ids * mask, mask, has.long()


def keyword_input(seed):
    torch.manual_seed(seed)
    ids, mask, y = _contains_task(seed)
    model = KeywordModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return Setup("keyword_input", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy),
                 _cycle({"input_ids": ids, "attention_mask": mask}, y, 32), 150, _fell(0.5),
                 "model(**batch) with input_ids and attention_mask", classes=2)


class LogitsAndLoss(KeywordModel):
    """Hugging Face style: ``model(**batch)`` with ``labels`` returns logits and the loss."""

    def forward(self, input_ids, attention_mask, labels=None):
        logits = super().forward(input_ids, attention_mask)
        out = {"logits": logits}
        if labels is not None:
            out["loss"] = F.cross_entropy(logits, labels)
        return out


def dict_logits_and_loss(seed):
    torch.manual_seed(seed)
    ids, mask, y = _contains_task(seed)
    model = LogitsAndLoss()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loss_fn = lambda out, y: out["loss"]  # noqa: E731
    return Setup("dict_logits_and_loss", "torch", model, optimizer, loss_fn, _plain_step(loss_fn),
                 _cycle({"input_ids": ids, "attention_mask": mask, "labels": y}, y, 32), 150,
                 _fell(0.5), "returns {'logits', 'loss'}; loss_fn = lambda out, y: out['loss']",
                 classes=2)


def compiled(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    plain = _mlp()
    model = torch.compile(plain, backend=COMPILE_BACKEND)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    setup = Setup("compiled", "torch", model, optimizer, F.cross_entropy,
                  _plain_step(F.cross_entropy), _cycle(x, y, 32), 50, _fell(0.3),
                  f"torch.compile(model, backend={COMPILE_BACKEND!r})",
                  extra={"plain_model": plain}, classes=4)
    return setup


# inductor compiles here too (gcc is installed) but its first compile costs ~16 s on these
# cores; aot_eager runs the same dynamo capture and AOT autograd in ~1 s. Each hook the
# Monitor adds or removes is a recompile today, hence the short run.
COMPILE_BACKEND = "aot_eager"


class FrozenBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        with torch.no_grad():
            features = self.backbone(x)
        return self.head(features)


def frozen_backbone(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = FrozenBackbone()
    optimizer = torch.optim.Adam(model.head.parameters(), lr=1e-2)
    return Setup("frozen_backbone", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x, y, 32), 150, _fell(0.5),
                 "backbone under torch.no_grad(), the optimizer over the head only",
                 partial_optimizer=True, classes=4)


def gradient_accumulation(seed, micro=4):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = _mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)

    def train_step(model, batch, optimizer):
        inputs, targets = batch
        optimizer.zero_grad()
        total = 0.0
        for xs, ys in zip(inputs.chunk(micro), targets.chunk(micro)):
            loss = F.cross_entropy(model(xs), ys) / micro
            loss.backward()
            total = total + loss.detach()
        optimizer.step()
        return total
    return Setup("gradient_accumulation", "torch", model, optimizer, F.cross_entropy, train_step,
                 _cycle(x, y, 32), 150, _fell(0.3), "4 micro-batches of 8 per optimizer step",
                 classes=4)


def long_convergence(seed):
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(32, 4, generator=g)
    teacher = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    with torch.no_grad():
        y = teacher(x)
        y = (y - y.mean()) / y.std()     # targets at unit scale, as a practitioner scales them
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    return Setup("long_convergence", "torch", model, optimizer, F.mse_loss,
                 _plain_step(F.mse_loss), lambda step: (x, y), 2000,
                 lambda losses: np.mean(losses[-10:]) < 1e-4,
                 "2,000 steps of full-batch regression converging to ~0 loss", every=50)


class CausalLM(nn.Module):
    def __init__(self, vocab=12, length=11, width=32, heads=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(length, width) * 0.1)
        self.block = nn.TransformerEncoderLayer(width, heads, dim_feedforward=2 * width,
                                                dropout=0.0, batch_first=True)
        self.lm_head = nn.Linear(width, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(length))

    def forward(self, tokens):
        t = tokens.shape[1]
        h = self.embed(tokens) + self.position[:t]
        return self.lm_head(self.block(h, src_mask=self.mask[:t, :t], is_causal=True))


def causal_lm(seed, vocab=12):
    """Sequences t_(i+1) = t_i + k (mod V), k in 1..3 per sequence: next-token prediction."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    n, length = 256, 12
    start = torch.randint(0, vocab, (n, 1), generator=g)
    stride = torch.randint(1, 4, (n, 1), generator=g)
    seq = (start + stride * torch.arange(length)) % vocab
    model = CausalLM(vocab)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    loss_fn = lambda out, y: F.cross_entropy(out.reshape(-1, vocab), y.reshape(-1))  # noqa: E731
    return Setup("causal_lm", "torch", model, optimizer, loss_fn, _plain_step(loss_fn, clip=1.0),
                 _cycle(seq[:, :-1], seq[:, 1:], 32), 150, _fell(0.4),
                 "logits (B, T, V), labels (B, T); the loss_fn reshapes them itself", classes=12)


class SharedReLU(nn.Module):
    """One ``nn.ReLU`` module called after both hidden layers."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 4)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.out(self.act(self.fc2(self.act(self.fc1(x)))))


def shared_relu(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = SharedReLU()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup("shared_relu", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x, y, 32), 150, _fell(0.3),
                 "one nn.ReLU module shared by two layers", classes=4)


class InplaceResidual(nn.Module):
    """torchvision style: ``nn.ReLU(inplace=True)``, and a residual taken before an in-place
    ReLU (``skip = h; h.relu_()``), deterministic and healthy."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.fc1(x)
        skip = h
        h.relu_()
        return self.out(self.act(self.fc2(h)) + skip)


def inplace_relu(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = InplaceResidual()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup("inplace_relu", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x, y, 32), 150, _fell(0.3),
                 "in-place ReLUs (module and tensor.relu_()) around a residual", classes=4)


def label_smoothing(seed):
    """Cross-entropy with label smoothing 0.1: its floor is ~0.23 on 4 classes, not 0."""
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = _mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loss_fn = lambda out, y: F.cross_entropy(out, y, label_smoothing=0.1)  # noqa: E731
    return Setup("label_smoothing", "torch", model, optimizer, loss_fn, _plain_step(loss_fn),
                 _cycle(x, y, 32), 150, _fell(0.3),
                 "cross-entropy with label_smoothing=0.1 (the loss cannot reach 0)", classes=4)


def _binary_blobs(seed):
    x, y = _blobs(seed, classes=2)
    return x, y


def bce_logits_float_targets(seed):
    """The everyday binary loss: one logit, int labels cast with ``.float()`` in the loss (the
    float64 gradient check once computed it in float32 and failed every gradient)."""
    torch.manual_seed(seed)
    x, y = _binary_blobs(seed)
    model = _mlp(classes=1)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = lambda out, y: F.binary_cross_entropy_with_logits(  # noqa: E731
        out.squeeze(-1), y.float())
    return Setup("bce_logits_float_targets", "torch", model, optimizer, loss_fn,
                 _plain_step(loss_fn), _cycle(x, y, 32), 150, _fell(0.3),
                 "one logit, F.binary_cross_entropy_with_logits(out.squeeze(-1), y.float())")


def _sigmoid_focal_loss(out, y, gamma=2.0, alpha=0.25):
    """torchvision's sigmoid_focal_loss: a sigmoid for p_t beside BCE on the logits."""
    t = F.one_hot(y, out.shape[-1]).float()
    p = torch.sigmoid(out)
    ce = F.binary_cross_entropy_with_logits(out, t, reduction="none")
    p_t = p * t + (1 - p) * (1 - t)
    weight = alpha * t + (1 - alpha) * (1 - t)
    return (weight * ce * (1 - p_t) ** gamma).mean()


def focal_loss(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = _mlp()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup("focal_loss", "torch", model, optimizer, _sigmoid_focal_loss,
                 _plain_step(_sigmoid_focal_loss), _cycle(x, y, 32), 150, _fell(0.3),
                 "sigmoid focal loss: torch.sigmoid(logits) and BCE with logits, side by side",
                 classes=None)   # one-vs-all sigmoids: no softmax, no uniform guess at ln C


class HandAttention(nn.Module):
    """Multi-head self-attention written by hand: view/transpose into heads and back."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(c, dim=2))
        weights = (q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)).softmax(-1)
        return self.proj((weights @ v).transpose(1, 2).contiguous().view(b, t, c))


class TinyViT(nn.Module):
    """ViT: conv patch embedding (``flatten(2).transpose(1, 2)``), an einops-style rearrange
    (``b c (h p) (w q) -> b (h w) (p q c)`` by reshape + permute), a class token."""

    def __init__(self, width=16, patch=4, classes=4):
        super().__init__()
        self.patch = patch
        self.embed = nn.Conv2d(1, width, patch, patch)
        self.pixels = nn.Linear(patch * patch, width)
        self.position = nn.Parameter(torch.randn(1, 4, width) * 0.02)
        self.cls = nn.Parameter(torch.zeros(1, 1, width))
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = HandAttention(width, heads=2)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))
        self.head = nn.Linear(width, classes)

    def forward(self, images):
        b, c, h, w = images.shape
        p = self.patch
        patches = images.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1)
        x = self.embed(images).flatten(2).transpose(1, 2) + self.position
        x = x + self.pixels(patches.reshape(b, (h // p) * (w // p), p * p * c))
        x = torch.cat([self.cls.expand(b, -1, -1), x], dim=1)
        x = x + self.attention(self.norm1(x))
        x = x + self.mlp(self.norm2(x))
        return self.head(x[:, 0])


def _quadrant_images(seed, n=256):
    """8x8 images whose bright 4x4 quadrant names the class."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    x = torch.randn(n, 1, 8, 8, generator=g) * 0.5
    for quadrant in range(4):
        rows, cols = divmod(quadrant, 2)
        x[y == quadrant, :, rows * 4:rows * 4 + 4, cols * 4:cols * 4 + 4] += 1.0
    return x, y


def vit_patches(seed):
    torch.manual_seed(seed)
    x, y = _quadrant_images(seed)
    model = TinyViT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    return Setup("vit_patches", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x, y, 32), 150, _fell(0.3),
                 "ViT patch embedding, hand-written attention heads, a reshape+permute rearrange",
                 classes=4)


class LSTMLanguageModel(nn.Module):
    def __init__(self, vocab=12, width=24):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.rnn = nn.LSTM(width, width, batch_first=True)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens, state=None):
        out, state = self.rnn(self.embed(tokens), state)
        return self.head(out), state


def lstm_tbptt(seed, vocab=12, window=10):
    """Truncated backpropagation through time: the hidden state carried from window to window,
    detached, reset at each pass over the stream; ``losses.append(loss.item())``."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    stride = torch.randint(1, 4, (16, 1), generator=g)
    stream = (torch.randint(0, vocab, (16, 1), generator=g) + stride * torch.arange(201)) % vocab
    model = LSTMLanguageModel(vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    loss_fn = lambda out, y: F.cross_entropy(out[0].reshape(-1, vocab), y.reshape(-1))  # noqa: E731
    carried, logged = {"state": None, "step": 0}, []

    def train_step(model, batch, optimizer):
        tokens, targets = batch
        if carried["step"] % 20 == 0:
            carried["state"] = None
        carried["step"] += 1
        state = carried["state"]
        if state is not None:
            state = tuple(h.detach() for h in state)
        optimizer.zero_grad()
        logits, carried["state"] = model(tokens, state)
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        logged.append(loss.item())
        return loss

    def batch(step):
        start = (step % 20) * window
        return stream[:, start:start + window], stream[:, start + 1:start + window + 1]
    return Setup("lstm_tbptt", "torch", model, optimizer, loss_fn, train_step, batch, 150,
                 _fell(0.4), "LSTM language model, truncated BPTT with the hidden state detached",
                 classes=vocab)


class NoisyTopTwo(nn.Module):
    """A mixture of experts: noisy top-2 gating (noise in training only), experts run on the
    rows routed to them."""

    def __init__(self, features=16, experts=4, classes=4):
        super().__init__()
        self.gate, self.noise = nn.Linear(features, experts), nn.Linear(features, experts)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, features))
            for _ in range(experts))
        self.head = nn.Linear(features, classes)

    def forward(self, x):
        logits = self.gate(x)
        if self.training:
            logits = logits + torch.randn_like(logits) * F.softplus(self.noise(x))
        top, index = logits.topk(2, dim=-1)
        weights = top.softmax(-1)
        mixed = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            chosen = index == e
            rows = chosen.any(-1)
            if rows.any():
                weight = (weights * chosen).sum(-1, keepdim=True)[rows]
                mixed[rows] = mixed[rows] + weight * expert(x[rows])
        return self.head(x + mixed)


def mixture_of_experts(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = NoisyTopTwo()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup("mixture_of_experts", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x, y, 32), 150, _fell(0.3),
                 "mixture of experts, noisy top-2 gating, experts on their routed rows",
                 classes=4)


def ema_weights(seed, decay=0.95):
    """An EMA copy of the weights (and BatchNorm statistics) updated by hand after each step,
    no optimizer of its own."""
    import copy
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.1),
                          nn.Linear(32, 4))
    ema = copy.deepcopy(model).requires_grad_(False).eval()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    plain = _plain_step(F.cross_entropy)

    def train_step(model, batch, optimizer):
        loss = plain(model, batch, optimizer)
        with torch.no_grad():
            for averaged, param in zip(ema.parameters(), model.parameters()):
                averaged.lerp_(param, 1 - decay)
            for averaged, buffer in zip(ema.buffers(), model.buffers()):
                averaged.copy_(buffer)
        return loss

    def learned(losses):
        with torch.no_grad():
            accuracy = (ema(x).argmax(1) == y).float().mean().item()
        return _fell(0.3)(losses) and accuracy > 0.9
    return Setup("ema_weights", "torch", model, optimizer, F.cross_entropy, train_step,
                 _cycle(x, y, 32), 150, learned, "an EMA of the weights kept by hand; it learns",
                 extra={"ema": ema}, classes=4)


class CheckpointedBlocks(nn.Module):
    """Activation checkpointing (``torch.utils.checkpoint``, non-reentrant) around two blocks,
    one with dropout (its mask is replayed in the recomputation)."""

    def __init__(self):
        super().__init__()
        self.block1 = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(0.1))
        self.block2 = nn.Sequential(nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 4)

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint
        h = checkpoint(self.block1, x, use_reentrant=False)
        return self.head(checkpoint(self.block2, h, use_reentrant=False))


def gradient_checkpointing(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = CheckpointedBlocks()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup("gradient_checkpointing", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x, y, 32), 150, _fell(0.3),
                 "torch.utils.checkpoint(use_reentrant=False) around two blocks", classes=4)


def frozen_requires_grad(seed):
    """Layers frozen with ``requires_grad_(False)``, the optimizer over the trainable rest."""
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = _mlp()
    model[0].requires_grad_(False)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    return Setup("frozen_requires_grad", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x, y, 32), 150, _fell(0.5),
                 "first layer frozen with requires_grad_(False), optimizer over the others",
                 classes=4)


def bf16_weights_adam(seed):
    """A model cast to bfloat16 trained with Adam's default eps (1e-8 is not 0 in bf16)."""
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = _mlp().to(torch.bfloat16)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup("bf16_weights_adam", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x.bfloat16(), y, 32), 150, _fell(0.3),
                 "model.to(torch.bfloat16), Adam(eps=1e-8)", classes=4)


class RelativeAttention(nn.Module):
    """Attention scores against learned relative positions, aligned by Transformer-XL's shift:
    pad the last axis with one zero column, view ``(T, R + 1)`` as ``(R + 1, T)``, drop a row."""

    def __init__(self, tokens=4, width=4, hidden=16, classes=4):
        super().__init__()
        self.query, self.value = nn.Linear(width, hidden), nn.Linear(width, hidden)
        self.relative = nn.Parameter(torch.randn(tokens, hidden) * 0.1)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        b, t, _ = x.shape
        scores = F.pad(self.query(x) @ self.relative.t(), (1, 0))
        scores = scores.view(b, t + 1, t)[:, 1:].view(b, t, t)
        return self.head((scores.softmax(-1) @ self.value(x)).mean(1))


def relative_position_shift(seed):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = RelativeAttention()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup("relative_position_shift", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(x.view(-1, 4, 4), y, 32), 150, _fell(0.3),
                 "Transformer-XL's relative shift: a view of a zero-padded (T, R+1) as (R+1, T)",
                 classes=4)


# ----------------------------------------------------------------- minigrad setups
def _mg_blobs(seed):
    x, y = _blobs(seed) if torch is not None else _np_blobs(seed)
    return np.asarray(x, dtype=np.float32), np.asarray(y, dtype=np.int64)


def _np_blobs(seed, n=256, features=16, classes=4):
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((classes, features)) * 1.5
    y = rng.integers(0, classes, n)
    x = centers[y] + rng.standard_normal((n, features))
    return (x - x.mean(0)) / x.std(0), y


def _mg_cycle(x, y, batch_size):
    n = len(y)

    def batch(step):
        index = (np.arange(batch_size) + step * batch_size) % n
        return minigrad.tensor(x[index]), minigrad.tensor(y[index])
    return batch


def _mg_step(loss_fn, *, lr_at=None):
    state = {"step": 0}

    def train_step(model, batch, optimizer):
        inputs, targets = batch
        if lr_at is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr_at(state["step"])
            state["step"] += 1
        optimizer.zero_grad()
        loss = loss_fn(call(model, inputs), targets)
        loss.backward()
        optimizer.step()
        return loss
    return train_step


def mg_adam_mlp(seed):
    minigrad.manual_seed(seed)
    x, y = _mg_blobs(seed)
    model = mnn.Sequential(mnn.Linear(16, 32), mnn.ReLU(), mnn.Dropout(0.1), mnn.Linear(32, 32),
                           mnn.ReLU(), mnn.Linear(32, 4))
    optimizer = moptim.Adam(model.parameters(), lr=3e-3, weight_decay=1e-4)
    return Setup("mg_adam_mlp", "minigrad", model, optimizer, MF.cross_entropy,
                 _mg_step(MF.cross_entropy), _mg_cycle(x, y, 32), 150, _fell(0.3),
                 "minigrad MLP with dropout, Adam with weight decay", classes=4)


def mg_batchnorm_cosine(seed, steps=150):
    minigrad.manual_seed(seed)
    x, y = _mg_blobs(seed)
    model = mnn.Sequential(mnn.Linear(16, 32), mnn.BatchNorm1d(32), mnn.ReLU(),
                           mnn.Linear(32, 4))
    optimizer = moptim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    cosine = lambda s: 0.05 * 0.5 * (1 + math.cos(math.pi * s / steps))  # noqa: E731
    return Setup("mg_batchnorm_cosine", "minigrad", model, optimizer, MF.cross_entropy,
                 _mg_step(MF.cross_entropy, lr_at=cosine), _mg_cycle(x, y, 32), steps,
                 _fell(0.3), "minigrad BatchNorm1d MLP, SGD+momentum, cosine schedule", classes=4)


class MgSharedReLU(mnn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.out = mnn.Linear(16, 32), mnn.Linear(32, 32), mnn.Linear(32, 4)
        self.act = mnn.ReLU()

    def forward(self, x):
        return self.out(self.act(self.fc2(self.act(self.fc1(x)))))


def mg_shared_relu(seed):
    minigrad.manual_seed(seed)
    x, y = _mg_blobs(seed)
    model = MgSharedReLU()
    optimizer = moptim.Adam(model.parameters(), lr=3e-3)
    return Setup("mg_shared_relu", "minigrad", model, optimizer, MF.cross_entropy,
                 _mg_step(MF.cross_entropy), _mg_cycle(x, y, 32), 150, _fell(0.3),
                 "minigrad: one ReLU module shared by two layers", classes=4)


class MgDictOutput(mnn.Module):
    def __init__(self):
        super().__init__()
        self.body = mnn.Sequential(mnn.Linear(16, 32), mnn.ReLU())
        self.classifier = mnn.Linear(32, 4)

    def forward(self, x):
        features = self.body(x)
        return {"features": features, "logits": self.classifier(features)}


def mg_dict_output(seed):
    minigrad.manual_seed(seed)
    x, y = _mg_blobs(seed)
    model = MgDictOutput()
    optimizer = moptim.Adam(model.parameters(), lr=3e-3)
    loss_fn = lambda out, y: MF.cross_entropy(out["logits"], y)  # noqa: E731
    return Setup("mg_dict_output", "minigrad", model, optimizer, loss_fn, _mg_step(loss_fn),
                 _mg_cycle(x, y, 32), 150, _fell(0.3), "minigrad: returns a dict", classes=4)


class MgFrozenBackbone(mnn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = mnn.Sequential(mnn.Linear(16, 64), mnn.ReLU())
        self.head = mnn.Linear(64, 4)

    def forward(self, x):
        with minigrad.no_grad():
            features = self.backbone(x)
        return self.head(features)


def mg_frozen_backbone(seed):
    minigrad.manual_seed(seed)
    x, y = _mg_blobs(seed)
    model = MgFrozenBackbone()
    optimizer = moptim.Adam(model.head.parameters(), lr=1e-2)
    return Setup("mg_frozen_backbone", "minigrad", model, optimizer, MF.cross_entropy,
                 _mg_step(MF.cross_entropy), _mg_cycle(x, y, 32), 150, _fell(0.5),
                 "minigrad: backbone under minigrad.no_grad(), the optimizer over the head",
                 partial_optimizer=True, classes=4)


def mg_long_convergence(seed):
    minigrad.manual_seed(seed)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((32, 4)).astype(np.float32)
    w1, w2 = rng.standard_normal((4, 8)), rng.standard_normal((8, 1))
    y = np.tanh(x @ w1) @ w2
    y = ((y - y.mean()) / y.std()).astype(np.float32)
    model = mnn.Sequential(mnn.Linear(4, 16), mnn.Tanh(), mnn.Linear(16, 1))
    optimizer = moptim.Adam(model.parameters(), lr=1e-2)
    inputs, targets = minigrad.tensor(x), minigrad.tensor(y)
    return Setup("mg_long_convergence", "minigrad", model, optimizer, MF.mse_loss,
                 _mg_step(MF.mse_loss), lambda step: (inputs, targets), 2000,
                 lambda losses: np.mean(losses[-10:]) < 1e-4,
                 "minigrad: 2,000 full-batch steps converging to ~0 loss", every=50)


class MixtureGAN(nn.Module):
    """A tiny MLP generator and discriminator; ``forward(z, real)`` gives D's logits, one row
    per sample: on the real row, then on G(z) (not detached: D's own step detaches)."""

    def __init__(self, noise=4, hidden=32):
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(noise, hidden), nn.ReLU(),
                                       nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 2))
        self.discriminator = nn.Sequential(nn.Linear(2, hidden), nn.LeakyReLU(0.2),
                                           nn.Linear(hidden, 1))

    def forward(self, z, real):
        return torch.cat([self.discriminator(real), self.discriminator(self.generator(z))], 1)


def _mixture_modes():
    angles = torch.arange(4) * (math.pi / 2)
    return torch.stack([torch.cos(angles), torch.sin(angles)], 1) * 2.0


def _gan(seed, name, claim, *, report):
    """A GAN on a 2-D mixture of four Gaussians, D and G each with its own Adam; D trained on
    real rows and G(z).detach(), G through D. ``report`` picks whose loss and optimizer the
    setup exposes ("discriminator" or "generator"): neither loss falls, by design."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    modes, n, batch_size, noise = _mixture_modes(), 512, 64, 4
    real = modes[torch.randint(0, 4, (n,), generator=g)] + 0.1 * torch.randn(n, 2, generator=g)
    z = torch.randn(n, noise, generator=g)
    model = MixtureGAN(noise)
    optimizers = {part: torch.optim.Adam(getattr(model, part).parameters(), lr=2e-3,
                                         betas=(0.5, 0.999))
                  for part in ("generator", "discriminator")}
    labels = torch.tensor([[1.0, 0.0]]).expand(n, 2)   # real, fake

    def d_loss(output, targets):
        return F.binary_cross_entropy_with_logits(output, targets)

    def g_loss(output, targets):   # the non-saturating loss on the fake rows
        fake = output[:, 1:]
        return F.binary_cross_entropy_with_logits(fake, torch.ones_like(fake))

    def train_step(model, batch, optimizer):
        (noise_rows, real_rows), targets = batch
        opt = dict(optimizers, **{report: optimizer})
        opt["discriminator"].zero_grad()
        fake = model.generator(noise_rows).detach()
        output = torch.cat([model.discriminator(real_rows), model.discriminator(fake)], 1)
        loss_d = d_loss(output, targets)
        loss_d.backward()
        opt["discriminator"].step()
        opt["generator"].zero_grad()
        loss_g = g_loss(model(noise_rows, real_rows), targets)
        loss_g.backward()
        opt["generator"].step()
        return loss_d if report == "discriminator" else loss_g

    def batch(step):
        start = (step * batch_size) % n
        index = torch.arange(start, start + batch_size) % n
        fresh = torch.randn(batch_size, noise, generator=torch.Generator().manual_seed(step))
        return (fresh if step else z[index], real[index]), labels[index]

    def distance():
        """The median distance of G's samples to the nearest mode."""
        with torch.no_grad():
            return torch.cdist(model.generator(z), modes).min(1).values.median().item()
    start = distance()

    def learned(losses):   # tiny GANs often collapse onto one mode: not asked for here
        return all(map(math.isfinite, losses)) and distance() < 0.7 * start
    return Setup(name, "torch", model, optimizers[report],
                 d_loss if report == "discriminator" else g_loss, train_step, batch, 300,
                 learned, claim, partial_optimizer=True, extra={"optimizers": optimizers})


def gan_discriminator(seed):
    return _gan(seed, "gan_discriminator", "a GAN on a 2-D Gaussian mixture, the discriminator's "
                "loss and Adam watched: G's samples move onto the data",
                report="discriminator")


def gan_generator(seed):
    return _gan(seed, "gan_generator", "a GAN on a 2-D Gaussian mixture, the generator's loss "
                "and Adam watched: G's samples move onto the data",
                report="generator")


class TinyVAE(nn.Module):
    """An MLP VAE: ``forward(x) -> (reconstruction, mu, logvar)``, z sampled by
    reparameterisation in training, its mean in evaluation."""

    def __init__(self, features=16, hidden=32, latent=4):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(features, hidden), nn.ReLU())
        self.mu = nn.Linear(hidden, latent)
        self.logvar = nn.Linear(hidden, latent)
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.ReLU(),
                                     nn.Linear(hidden, features))

    def forward(self, x):
        h = self.encoder(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu) if self.training else mu
        return self.decoder(z), mu, logvar


def _vae_loss(output, targets):
    """Reconstruction (summed over features) plus KL to N(0, I), averaged over the batch."""
    reconstruction, mu, logvar = output
    recon = F.mse_loss(reconstruction, targets, reduction="sum") / len(targets)
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / len(targets)
    return recon + kl


def vae(seed):
    """A VAE on 16-D data lying near a 2-D manifold: the loss falls to a floor that the KL term
    and the sampling noise hold up."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    n, features = 256, 16
    latent = torch.randn(n, 2, generator=g)
    x = torch.tanh(latent @ torch.randn(2, features, generator=g)) \
        + 0.05 * torch.randn(n, features, generator=g)
    x = (x - x.mean(0)) / x.std(0)
    model = TinyVAE(features)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    return Setup("vae", "torch", model, optimizer, _vae_loss, _plain_step(_vae_loss),
                 _cycle(x, x, 32), 300, _fell(0.5),
                 "a VAE (reparameterised z, reconstruction + KL) learns the 2-D manifold")


class WordBag(nn.Module):
    """fastText-style: the mean of the words' embeddings, then a linear classifier."""

    def __init__(self, vocab, width, classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, classes)

    def forward(self, words):
        return self.head(self.embedding(words).mean(dim=1))


def large_vocabulary(seed, vocab=20_000, topics=64, n=256):
    """Three words per text from a 20,000-word vocabulary; the label is the class of its
    first word, one of 64 topic words. A batch of 4 texts touches 12 of 20,000 embedding
    rows: a sparse gradient, and an update measured on a sample of the rows."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    first = torch.randint(0, topics, (n, 1), generator=g)
    words = torch.cat([first, torch.randint(topics, vocab, (n, 2), generator=g)], dim=1)
    model = WordBag(vocab, 16, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=2.0)
    return Setup("large_vocabulary", "torch", model, optimizer, F.cross_entropy,
                 _plain_step(F.cross_entropy), _cycle(words, first[:, 0] % 4, 4), 400,
                 _fell(0.6), "a 20,000-word embedding seen 12 words at a time (SGD)", classes=4)


class MCDropoutMLP(nn.Module):
    """An MLP for Monte Carlo dropout (Gal & Ghahramani 2016): dropout stays on at evaluation,
    and predictions averaged over several passes give an uncertainty. Written the two ways
    people write it: ``F.dropout(..., training=True)`` in ``forward`` (``functional``), or
    ``nn.Dropout`` modules switched back on after ``model.eval()`` (see ``_mc_eval_mode``)."""

    def __init__(self, functional, features=16, hidden=64, classes=4, p=0.1):
        super().__init__()
        self.functional, self.p = functional, p
        self.hidden = nn.Linear(features, hidden)
        self.middle = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, classes)
        self.drop1, self.drop2 = nn.Dropout(p), nn.Dropout(p)

    def forward(self, x):
        h = F.relu(self.hidden(x))
        h = F.dropout(h, self.p, training=True) if self.functional else self.drop1(h)
        h = F.relu(self.middle(h))
        h = F.dropout(h, self.p, training=True) if self.functional else self.drop2(h)
        return self.out(h)


def _mc_eval_mode(model):
    """The usual recipe: evaluation mode, then every dropout module back in train mode."""
    model.eval()
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.train()


def _mc_dropout(seed, name, claim, *, functional):
    torch.manual_seed(seed)
    x, y = _blobs(seed)
    model = MCDropoutMLP(functional)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    extra = {} if functional else {"eval_mode": _mc_eval_mode}
    return Setup(name, "torch", model, optimizer, F.cross_entropy, _plain_step(F.cross_entropy),
                 _cycle(x, y, 32), 150, _fell(0.3), claim, classes=4, extra=extra)


def mc_dropout_functional(seed):
    return _mc_dropout(seed, "mc_dropout_functional", "an MLP with Monte Carlo dropout "
                       "(F.dropout(training=True), on at evaluation too) learns the clusters",
                       functional=True)


def mc_dropout_modules(seed):
    return _mc_dropout(seed, "mc_dropout_modules", "an MLP with Monte Carlo dropout (nn.Dropout "
                       "switched back on after model.eval()) learns the clusters",
                       functional=False)


TORCH_SETUPS = {f.__name__: f for f in (
    adam_mlp, adamw_weight_decay, onecycle_warmup, cosine_schedule, amp_bf16, amp_fp16_scaler,
    amp_fp16_scaler_clip, amp_fp16_scaler_skips, transformer_warmup_plateau,
    multihead_attention, lstm_packed, gru_packed, residual_cnn_batchnorm, dict_output,
    tuple_output, keyword_input, dict_logits_and_loss, compiled, frozen_backbone,
    gradient_accumulation, long_convergence, causal_lm, shared_relu, inplace_relu,
    label_smoothing, bce_logits_float_targets, focal_loss, vit_patches, lstm_tbptt,
    mixture_of_experts, ema_weights, gradient_checkpointing, frozen_requires_grad,
    bf16_weights_adam, relative_position_shift, gan_discriminator, gan_generator, vae,
    large_vocabulary, mc_dropout_functional, mc_dropout_modules)}
MINIGRAD_SETUPS = {f.__name__: f for f in (
    mg_adam_mlp, mg_batchnorm_cosine, mg_shared_relu, mg_dict_output, mg_frozen_backbone,
    mg_long_convergence)}
SETUPS = {**(TORCH_SETUPS if torch is not None else {}), **MINIGRAD_SETUPS}


# (setup, assertion) -> what goes wrong today, quoted. The tests mark each pair
# xfail(strict=True): the fix that makes it pass must delete its entry.
KNOWN_FALSE_ALARMS = {}
