"""The model as built: its parameters (and the optimizer's hold on them), the forward pass,
and the view/reshape calls of one forward."""
from __future__ import annotations

import numpy as np

from ... import outputs
from ...findings import Finding
from ...model_structure import structure_findings

# EPS_UNDERFLOWS is a Monitor finding preflight reports before any step: these two are the
# Monitor's own probe reader and finding builder, from inside diagnostics.monitor (it has no
# public accessor for them yet). Only this file of preflight reaches into the Monitor.
from ...monitor.checks.optimizer_eps import eps_finding
from ...monitor.probes.optimizer_eps import lost_eps
from .. import _training as T
from ..reshapes import reshape_findings, watch_reshapes
from .context import Run
from .facts import Fact, Logits, Output
from .report import Outcome, failed, judged, passed, skipped


def parameters(run: Run) -> Outcome:
    """Trainable parameters, and an optimizer that holds the model's own tensors with an eps
    their dtype can hold."""
    backend = run.backend
    params = backend.named_parameters()
    sizes = {name: int(np.prod(tuple(p.shape))) for name, p in params}
    trainable = sum(sizes[name] for name, p in params if p.requires_grad)
    summary = f"{sum(sizes.values()):,} in {len(params)} tensors, {trainable:,} trainable"
    if params:
        largest = max(sizes, key=sizes.get)
        summary += f"; largest {largest} {tuple(backend.parameter(largest).shape)}"
    findings = []
    if not trainable:
        findings.append(Finding(
            "NO_GRADIENT", "error", None, "no parameter requires a gradient: nothing can learn",
            "model.requires_grad_(True), or unfreeze the layers to train",
            {"parameters": len(params)}))
    foreign = (0 if run.optimizer is None
               else T.foreign_parameter_count(backend, run.optimizer))
    if foreign and not T.unheld_parameters(backend, run.optimizer):
        # every trainable parameter is held, and more: a learnable loss temperature, a prompt
        # passed to forward; healthy (their values are restored after each item)
        summary += f"; the optimizer also holds {foreign} tensor(s) outside the model"
        foreign = 0
    if foreign:
        held = sum(len(group["params"]) for group in run.optimizer.param_groups)
        findings.append(Finding(
            "PARAMS_NOT_UPDATING", "error", None,
            f"the optimizer holds {foreign} of its {held} tensor(s) that are not this model's "
            f"parameters: optimizer.step() will not train this model (was the optimizer built "
            f"for a copy of the model, or before the model was replaced or moved?)",
            "build the optimizer from this model's parameters, after moving the model: "
            "optimizer = Optimizer(model.parameters(), ...)",
            {"foreign_tensors": foreign, "optimizer_tensors": held}))
        facts = run.facts.lacking({Fact.OPTIMIZER: "the optimizer does not hold the model's "
                                                   "parameters"})
    else:
        facts = run.facts.found(optimizer_holds_model=True)
    if run.optimizer is not None:      # an eps its parameters' dtype rounds away (fp16 Adam)
        findings += [eps_finding(lost) for lost in lost_eps(run.optimizer)]
    if findings:
        return failed(summary, findings, facts=facts)
    return passed(summary, facts=facts)


def model_structure(run: Run) -> Outcome:
    """The module tree: one module object under several names of a container, batch-norm
    momentum in another framework's convention (``diagnostics.model_structure``)."""
    findings = structure_findings(run.backend.model)
    modules = sum(1 for _ in run.backend.named_modules())
    summary = (f"{modules} modules" if not findings
               else f"{modules} modules; " + "; ".join(f.code for f in findings))
    return judged(summary, findings)


def forward(run: Run) -> Outcome:
    backend, batch = run.backend, run.batch
    with backend.no_grad():
        output = batch.forward(backend.model)
    summary = f"input {batch.describe_inputs()} -> output {outputs.describe(backend, output)}"
    facts = run.facts.found(output=Output(output))
    key = T.logits_key(backend, batch, output)
    if key is T.NO_LOGITS:
        return passed(summary, facts=facts.lacking(
            {Fact.LOGITS: "no floating tensor in the output to read as logits"}))
    logits = outputs.pick(output, key)
    facts = facts.found(logits=Logits(backend.to_numpy(logits), key))
    if not backend.is_tensor(output):
        summary += f"; logits: {_key_text(key)} {tuple(logits.shape)}"
    batch_size = batch.batch_size
    shape = tuple(logits.shape)
    if not shape or shape[0] != batch_size:
        return failed(summary + f": the logits' first dimension should be the batch size "
                                f"{batch_size}", facts=facts)
    return passed(summary, facts=facts)


def _key_text(key) -> str:
    return getattr(key, "__name__", "output=callable") if callable(key) else repr(key)


def reshapes(run: Run) -> Outcome:
    """One more forward, watching every view/reshape call: one that moves axes (a permute
    was meant) is VIEW_SCRAMBLES_AXES."""
    backend, batch = run.backend, run.batch
    if backend.name != "torch":
        return skipped("needs a torch model (torch function modes)")
    with backend.no_grad(), watch_reshapes(backend.model) as calls:
        batch.forward(backend.model)
    findings = reshape_findings(calls)
    if findings:
        return judged("; ".join(f"{c.call} {c.before} -> {c.after}" for c in calls), findings)
    return passed("no view or reshape moves an axis (a permute meant)")
