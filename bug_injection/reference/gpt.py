"""A character-level GPT, written once for both frameworks: ``gpt_classes(minigrad.nn)`` and
``gpt_classes(torch.nn)`` are twins with the same parameter and module names.

Token and position embeddings, ``layers`` pre-LayerNorm blocks (causal self-attention with
``heads`` heads, a GELU MLP, residual connections), a final LayerNorm and an output head that
shares its weight with the token embedding (weight tying: one Parameter, named
``wte.weight``, whose gradient is the sum of both uses). Names follow nanoGPT: ``wte``,
``wpe``, ``blocks.0.attn.c_attn``, ``blocks.0.mlp.c_proj``, ``ln_f``, ``lm_head``.
"""
import functools
import math
from dataclasses import dataclass

import numpy as np

import minigrad


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int
    block_size: int = 16      # the longest sequence (positions embedded)
    width: int = 32
    heads: int = 4
    layers: int = 2
    dropout: float = 0.0
    init_std: float | None = 0.02   # nanoGPT's initialisation; None keeps the layers' defaults


@functools.cache
def gpt_classes(nn):
    """The GPT's module classes for the framework ``nn`` (``minigrad.nn`` or ``torch.nn``)."""
    F = nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_attn = nn.Linear(config.width, 3 * config.width)
            self.c_proj = nn.Linear(config.width, config.width)
            self.resid_dropout = nn.Dropout(config.dropout)
            self.heads, self.dropout = config.heads, config.dropout

        def forward(self, x):
            batch, length, width = x.shape
            qkv = self.c_attn(x)
            q, k, v = (self._split_heads(qkv[..., i * width:(i + 1) * width]) for i in range(3))
            y = self.attend(q, k, v).transpose(1, 2).reshape(batch, length, width)
            return self.resid_dropout(self.c_proj(y))

        def attend(self, q, k, v):
            """Causal attention over (batch, heads, length, head width); the one place a planted
            attention bug replaces."""
            return F.scaled_dot_product_attention(
                q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)

        def _split_heads(self, x):
            batch, length, width = x.shape
            return x.reshape(batch, length, self.heads, width // self.heads).transpose(1, 2)

    class MLP(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.c_fc = nn.Linear(config.width, 4 * config.width)
            self.gelu = nn.GELU(approximate="tanh")   # GPT-2's
            self.c_proj = nn.Linear(4 * config.width, config.width)
            self.dropout = nn.Dropout(config.dropout)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.ln_1 = nn.LayerNorm(config.width)
            self.attn = CausalSelfAttention(config)
            self.ln_2 = nn.LayerNorm(config.width)
            self.mlp = MLP(config)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.config = config
            self.wte = nn.Embedding(config.vocab_size, config.width)
            self.wpe = nn.Embedding(config.block_size, config.width)
            self.drop = nn.Dropout(config.dropout)
            self.blocks = nn.ModuleList([Block(config) for _ in range(config.layers)])
            self.ln_f = nn.LayerNorm(config.width)
            self.lm_head = nn.Linear(config.width, config.vocab_size, bias=False)
            self.lm_head.weight = self.wte.weight          # weight tying
            if config.init_std is not None:
                _init_weights(nn, self, config)

        def forward(self, idx):
            length = idx.shape[1]
            x = self.drop(self.wte(idx) + self.wpe(_arange(nn, length)))
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    class NextTokenLoss(nn.Module):
        """Cross-entropy of logits (batch, length, vocab) against next-token targets (batch,
        length); targets equal to ``ignore_index`` (padding) are left out."""

        def __init__(self, ignore_index=-100):
            super().__init__()
            self.ignore_index = ignore_index

        def forward(self, logits, targets):
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                   ignore_index=self.ignore_index)

    return _Classes(GPT, Block, CausalSelfAttention, MLP, NextTokenLoss)


@dataclass(frozen=True)
class _Classes:
    GPT: type
    Block: type
    CausalSelfAttention: type
    MLP: type
    NextTokenLoss: type


def _init_weights(nn, model, config):
    """nanoGPT's: N(0, init_std) weights and embeddings, zero biases, residual projections
    scaled down by sqrt(2 * layers)."""
    for name, param in model.named_parameters():
        if name.endswith("bias"):
            nn.init.zeros_(param)
        elif param.ndim == 2:
            std = config.init_std
            if name.endswith("c_proj.weight"):
                std /= math.sqrt(2 * config.layers)
            nn.init.normal_(param, mean=0.0, std=std)


def _arange(nn, length):
    if nn is minigrad.nn:
        return minigrad.arange(length)
    import torch

    return torch.arange(length)


def build_twins(config, *, seed=0, dtype=np.float64):
    """A minigrad GPT and its torch twin with the same weights (drawn by minigrad at ``seed``,
    its generator put back afterwards), both in ``dtype``."""
    import torch

    saved = minigrad.get_rng_state()
    minigrad.manual_seed(seed)
    try:
        model = gpt_classes(minigrad.nn).GPT(config).to(dtype)
    finally:
        minigrad.set_rng_state(saved)
    with torch.random.fork_rng(devices=[]):
        twin = gpt_classes(torch.nn).GPT(config).to(_torch_dtype(dtype))
    twin.load_state_dict({name: torch.from_numpy(np.array(value.data)) for name, value in
                          model.state_dict().items()})
    return model, twin


def _torch_dtype(dtype):
    import torch

    return torch.float64 if np.dtype(dtype) == np.float64 else torch.float32
