"""A language model in training: which input token each position is scored against, and whether
the model is causal (TARGETS_MISALIGNED, CAUSALITY_LEAK, as ``preflight(causal=True)`` judges
them on one batch), read from the training loop itself, with nothing declared.

A model call whose inputs hold integer tokens ``(B, T)`` (``input_ids``, else the first such
input) and whose output holds logits ``(B, T, V)`` (the rule of ``diagnostics.outputs``: a
model that computes its loss from ``labels=`` returns it beside them) is read on a sampled
step: a hook on the logits receives the gradient the user's own backward brings them,
whatever computed the loss (a ``loss_fn`` outside, or the model's own loss inside forward),
and four reductions over the vocabulary say which class each position is pulled towards
(``diagnostics.tools.next_token``). The reading needs no second forward or backward and
changes nothing the user's backward computes.

When the positions are scored against input tokens near t, the model is trained as a language
model, and one ``check_batch_independence(causal=True)`` on a copy of a few rows of that batch
says whether it is causal. Causality decides what the reading means: a causal model scored
against token t + 1 is healthy; against t itself (it copies), t + 2 or t - 1 it is
TARGETS_MISALIGNED; a model scored against t + 1 whose output at t depends on later inputs is
CAUSALITY_LEAK. A model that is not causal and is scored against its own input tokens (a
denoising autoencoder) is no language model: nothing is said. Once both are read, the probe
stops; a call that reads as no language model is retried on a few later sampled steps.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from ... import outputs as output_rule
from ...findings import Finding
from ...tools.next_token import judge, scored_from
from .base import Probe, Signal, floating

ROWS_COPIED = 4          # rows of the batch the causality check's copy runs on: it compares an
                         # example with another (2 suffice); a few keep the copy's pass small
READS = 3                # sampled steps read before a model that is no language model is left
                         # (no token input, no logits beside it, or targets none of its tokens)
MAX_PARAMETERS = 100_000_000   # the causality check runs on a float64 copy with gradients:
                               # about 16 bytes a parameter beside the model; above this it is
                               # left to preflight(causal=True) or check_batch_independence


@dataclass(frozen=True)
class TargetsRead:
    """The class the loss pulls each position towards (-1: unscored) and the input tokens,
    ``(B, T)`` each; ``inside_model``: the model returned its own loss beside the logits."""

    step: int
    scored: np.ndarray
    tokens: np.ndarray
    inside_model: bool


@dataclass(frozen=True)
class CausalRead:
    """``check_batch_independence(causal=True)``'s findings on a copy; None (with ``reason``)
    where it could not run."""

    step: int
    findings: tuple[Finding, ...] | None
    reason: str = ""


@dataclass(frozen=True)
class LanguageModelReads(Signal):
    """Both reads of a model trained as a language model."""

    targets: TargetsRead
    causal: CausalRead


class NextTokenProbe(Probe):

    publishes = (LanguageModelReads,)

    def __init__(self, ctx):
        super().__init__(ctx)
        self._call = None      # (sample, tokens, the copy's inputs) of a sampled training call
        self._seen = None      # the sample whose first training call was looked at
        self._read = None      # (step, gradient reductions, tokens, inside) from the backward
        self._targets = None
        self._causal = None
        self._tries = 0
        self._handles = []

    @property
    def _done(self):
        return self._causal is not None or self._tries >= READS

    def attach(self):
        return [self.ctx.backend.add_forward_hook(self.ctx.backend.model, self._on_output)]

    def begin(self):
        self._drop_handles()

    def on_forward(self, args, kwargs, grad_enabled):
        ctx = self.ctx
        if (self._done or ctx.sample is None or not grad_enabled
                or ctx.backend.name != "torch" or self._seen is ctx.sample):
            return
        self._seen = ctx.sample   # the first training call of a sampled iteration only
        tokens = _tokens(ctx.backend.torch, args, kwargs)
        if tokens is None:
            self._tries += 1      # no token input: a few sampled calls, then left alone
            return
        self._call = (ctx.sample, tokens, _copied_inputs(ctx.backend.torch, args, kwargs,
                                                         tokens.shape[0]))

    def _on_output(self, module, args, output):
        ctx, call = self.ctx, self._call
        if call is None or call[0] is not ctx.sample or self._done:
            return None
        self._call = None
        tokens = call[1]
        try:
            logits = output_rule.pick(output, output_rule.select_key(
                ctx.backend, output, selector=ctx.output))
        except Exception:   # noqa: BLE001  (no logits in this output: nothing to read)
            self._tries += 1
            return None
        torch = ctx.backend.torch
        if not (isinstance(logits, torch.Tensor) and logits.dim() == 3 and floating(logits)
                and tuple(logits.shape[:2]) == tuple(tokens.shape) and logits.shape[2] >= 2
                and logits.requires_grad):
            self._tries += 1
            return None
        inside = any(isinstance(value, torch.Tensor) and value.dim() == 0
                     and value.requires_grad for _, value in output_rule.entries(output))
        step, inputs = ctx.step, call[2]
        received = []

        def on_gradient(grad):
            if received:
                return None
            received.append(True)
            grad = grad.detach()
            lowest, lowest_class = grad.min(dim=-1)
            parts = (lowest_class, lowest, grad.abs().amax(), grad.sum(dim=-1).abs().amax(),
                     tokens)

            def receive(arrays):   # the gather hands flat float64 arrays back
                shape = tuple(tokens.shape)
                lowest_class, lowest, scale, row_sum, ids = arrays
                self._read = (step, (np.reshape(lowest_class, shape), np.reshape(lowest, shape),
                                     scale, row_sum, np.reshape(ids, shape)), inside, inputs)
            ctx.collector.add(parts, receive)
            return None
        self._handles.append(ctx.backend.add_tensor_hook(logits, on_gradient))
        return None

    def finish(self, sample):
        read, self._read = self._read, None
        if read is None or self._done:
            return
        step, (lowest_class, lowest, scale, row_sum, tokens), inside, inputs = read
        scored = scored_from(lowest_class, lowest, scale, row_sum)
        judged = scored is not None and judge(scored, tokens)[0]
        if not judged:
            self._tries += 1
            return
        self._targets = TargetsRead(step, scored, np.asarray(tokens, dtype=np.int64), inside)
        self._causal = self._causality(step, inputs)

    def _causality(self, step, inputs):
        from ...tools.batch_independence import check_batch_independence

        if inputs is None:
            return CausalRead(step, None, "inputs other than one tensor or keyword tensors")
        model = self.ctx.backend.model
        size = sum(int(p.numel()) for p in model.parameters())
        if size > MAX_PARAMETERS:
            return CausalRead(step, None, f"{size:,} parameters: a float64 copy is too large")
        try:
            with (self.ctx.hooks_quiet or contextlib.nullcontext)():
                found = check_batch_independence(model, inputs, causal=True)
        except Exception as error:  # noqa: BLE001  (the copy's forward is the user's code)
            return CausalRead(step, None, f"{type(error).__name__}: {error}")
        return CausalRead(step, tuple(found))

    def signals(self):
        if self._targets is None or self._causal is None:
            return ()
        return (LanguageModelReads(self._targets, self._causal),)

    def _drop_handles(self):
        handles, self._handles = self._handles, []
        for handle in handles:
            handle.remove()

    def close(self):
        self._drop_handles()
        self._call = self._read = self._seen = None


def _tokens(torch, args, kwargs):
    """The integer ``(B, T)`` input: the keyword ``input_ids`` first, else the first such one."""
    values = [kwargs["input_ids"]] if "input_ids" in kwargs else []
    values += list(args) + [v for k, v in kwargs.items() if k != "input_ids"]
    for value in values:
        if (isinstance(value, torch.Tensor) and value.dim() == 2 and value.shape[0] >= 2
                and not value.is_floating_point() and not value.is_complex()
                and value.dtype != torch.bool):
            return value.detach()
    return None


def _copied_inputs(torch, args, kwargs, rows):
    """The call's inputs as ``check_batch_independence`` takes them (one tensor, or the keyword
    inputs), their first ``ROWS_COPIED`` rows copied; None for other calls."""
    def cut(value):
        if isinstance(value, torch.Tensor):
            value = value.detach()
            return value[:ROWS_COPIED].clone() if value.dim() and value.shape[0] == rows \
                else value.clone()
        return value
    if kwargs and not args:
        return {key: cut(value) for key, value in kwargs.items()}
    if not kwargs and len(args) == 1 and isinstance(args[0], torch.Tensor):
        return cut(args[0])
    return None
