"""Running the realistic setups: monitored and plain runs (cached per process), the tools as a
user calls them, hook snapshots, and the xfail table turned into pytest parameters."""
import functools
import math
import sys
from dataclasses import dataclass

import numpy as np

import minigrad
from diagnostics import Monitor, check_gradients, find_lr, overfit_one_batch, preflight

from .setups import ASSERTIONS, KNOWN_FALSE_ALARMS, SETUPS, build, call, train

try:
    import torch
except ImportError:
    torch = None

TOOLS = ("preflight", "overfit", "find_lr", "check_gradients")
GRADCHECK_ROWS = 4


def cases(assertion, names=None):
    """One pytest parameter per setup; pairs in ``KNOWN_FALSE_ALARMS`` are strict xfails."""
    import pytest
    assert assertion in ASSERTIONS, assertion
    params = []
    for name in names if names is not None else SETUPS:
        reason = KNOWN_FALSE_ALARMS.get((name, assertion))
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(name, marks=marks, id=name))
    return params


# ----------------------------------------------------------------- monitored and plain runs
@dataclass
class MonitoredRun:
    losses: list
    findings: list
    report: str
    unseen: list           # layers the report lists without statistics at the last sampled step
    classes: object        # the class count the loss checks read off the output, if any
    state: dict
    hooks_before: dict
    hooks_after: dict
    output_hooks: list     # tensor hooks found on a forward pass's outputs after close()


@functools.lru_cache(maxsize=None)
def monitored_run(name):
    """``setup.steps`` iterations under ``Monitor(model, optimizer, every=setup.every)``,
    given the setup's GradScaler as a user with AMP does (``scaler=``)."""
    ran = modules_called(name)
    setup = build(name)
    hooks_before = hook_snapshot(setup)
    with Monitor(setup.model, setup.optimizer, every=setup.every,
                 scaler=setup.extra.get("scaler")) as monitor:
        losses = train(setup, monitor=monitor)
        report = monitor.report()
    return MonitoredRun(losses=losses, findings=list(report.findings), report=str(report),
                        unseen=[layer.name for layer in report.layers
                                if not math.isfinite(layer.mean) and layer.name in ran],
                        classes=report.loss.get("classes"),
                        state=model_state(setup), hooks_before=hooks_before,
                        hooks_after=hook_snapshot(setup), output_hooks=_output_hooks(setup))


def modules_called(name):
    """Names of the modules whose forward runs (MultiheadAttention's out_proj, for one, is only
    a weight holder), found with forward hooks on a fresh copy of the setup."""
    setup = build(name)
    model, prefix = setup.model, ""
    if "plain_model" in setup.extra:        # a compiled model: its modules, uncompiled
        model, prefix = setup.extra["plain_model"], "_orig_mod."
    ran = set()
    handles = [module.register_forward_hook(lambda *_, name=name: ran.add(prefix + name))
               for name, module in model.named_modules() if name]
    try:
        call(model, setup.tool_batch(4)[0])
    finally:
        for handle in handles:
            handle.remove()
    return ran


@functools.lru_cache(maxsize=None)
def plain_run(name):
    """The same run without a Monitor: ``(losses, state, claim held)``."""
    setup = build(name)
    losses = train(setup)
    return losses, model_state(setup), bool(setup.check(losses))


def model_state(setup):
    """Parameters and buffers as NumPy copies (bit-exact; bfloat16 widened to float32, which
    NumPy lacks, exactly)."""
    if setup.framework == "torch":
        return {k: _widened(v.detach().cpu().clone()).numpy()
                for k, v in setup.model.state_dict().items()}
    return {k: np.array(v.data if hasattr(v, "data") else v, copy=True)
            for k, v in setup.model.state_dict().items()}


def _widened(tensor):
    return tensor.float() if tensor.dtype == torch.bfloat16 else tensor


# ----------------------------------------------------------------- tools
def run_tool(setup, tool):
    """Run one tool on ``setup`` as a user would; ``(findings, failed verdicts)``; a crash
    propagates. preflight gets the user's optimizer and ``train_step`` (its documented use);
    overfit_one_batch and find_lr their default Adam unless the optimizer covers only part of
    the model (frozen layers), as the README calls them."""
    inputs, targets = setup.tool_batch()
    optimizer = setup.optimizer if setup.partial_optimizer else None   # README's usage
    if tool == "preflight":
        report = preflight(setup.model, setup.loss_fn, inputs, targets,
                           optimizer=setup.optimizer, train_step=setup.train_step)
        failed = [f"FAIL {item.name}: {item.summary}" for item in report.items
                  if item.status == "FAIL" and not item.findings]
        return list(report.findings), failed
    if tool == "overfit":
        result = overfit_one_batch(setup.model, setup.loss_fn, inputs, targets,
                                   optimizer=optimizer)
        return list(result.findings), ([] if result.passed else [str(result).splitlines()[0]])
    if tool == "find_lr":
        result = find_lr(setup.model, setup.loss_fn, (inputs, targets),
                         optimizer=optimizer, progress=False)
        suggestion = result.suggestion
        bad = [] if suggestion is not None and np.isfinite(suggestion) and suggestion > 0 else [
            f"no usable suggestion: {suggestion!r}"]
        # one (inputs, targets) batch, memorised faster as the rate grows, keeps its loss
        # falling to end_lr: find_lr says so (LR_SWEEP_EDGE, issue 25); that is the call's
        # form speaking, not the setup
        return [f for f in result.findings if f.code != "LR_SWEEP_EDGE"], bad
    if tool == "check_gradients":
        small_in, small_out = setup.tool_batch(GRADCHECK_ROWS)
        report = check_gradients(setup.model, setup.loss_fn, small_in, small_out)
        return list(report.findings), ([] if report.passed else [str(report).splitlines()[0]])
    raise ValueError(tool)


def first_line(finding):
    return f"{finding.code} [{finding.severity}] {finding.message.splitlines()[0]}"


# ----------------------------------------------------------------- hooks
_MODULE_HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
                      "_backward_pre_hooks", "_forward_hooks_with_kwargs",
                      "_forward_hooks_always_called", "_forward_pre_hooks_with_kwargs",
                      "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks",
                      "_load_state_dict_post_hooks")
_TENSOR_HOOK_ATTRS = ("_backward_hooks", "_post_accumulate_grad_hooks", "_hooks")
_OPTIMIZER_HOOK_DICTS = ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                         "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                         "_optimizer_load_state_dict_pre_hooks",
                         "_optimizer_load_state_dict_post_hooks")
_TORCH_GLOBAL_HOOKS = ("_global_backward_pre_hooks", "_global_backward_hooks",
                       "_global_forward_pre_hooks", "_global_forward_hooks",
                       "_global_forward_hooks_always_called", "_global_forward_hooks_with_kwargs",
                       "_global_buffer_registration_hooks", "_global_module_registration_hooks",
                       "_global_parameter_registration_hooks")


def hook_snapshot(setup):
    """Every hook reachable from the model, its parameters, its optimizer and the framework's
    globals, plus the identity of the functions a diagnostic might patch."""
    snap = {}
    for name, module in setup.model.named_modules():
        for attr in _MODULE_HOOK_DICTS:
            hooks = getattr(module, attr, None)
            if hooks:
                snap[f"module {name!r}.{attr}"] = sorted(map(str, hooks))
    for name, param in setup.model.named_parameters():
        for attr in _TENSOR_HOOK_ATTRS:
            hooks = getattr(param, attr, None)
            if hooks:
                snap[f"parameter {name!r}.{attr}"] = sorted(map(str, hooks))
    for attr in _OPTIMIZER_HOOK_DICTS:
        hooks = getattr(setup.optimizer, attr, None)
        if hooks:
            snap[f"optimizer.{attr}"] = sorted(map(str, hooks))
    snap["optimizer.step"] = _identity(getattr(setup.optimizer, "step"))
    snap["optimizer.zero_grad"] = _identity(getattr(setup.optimizer, "zero_grad"))
    if setup.framework == "torch":
        module_globals = sys.modules["torch.nn.modules.module"]
        for attr in _TORCH_GLOBAL_HOOKS:
            hooks = getattr(module_globals, attr, None)
            if hooks:
                snap[f"torch global {attr}"] = sorted(map(str, hooks))
        optim_globals = sys.modules["torch.optim.optimizer"]
        for attr in ("_global_optimizer_pre_hooks", "_global_optimizer_post_hooks"):
            if getattr(optim_globals, attr, None):
                snap[f"torch global {attr}"] = sorted(map(str, getattr(optim_globals, attr)))
        snap["patched"] = _patched(torch.nn.functional, torch.nn.Module, torch.Tensor,
                                   torch.autograd, torch.nn.utils, torch.nn.utils.clip_grad)
        scaler = setup.extra.get("scaler")
        if scaler is not None:
            snap["scaler"] = [_identity(getattr(scaler, m))
                              for m in ("scale", "unscale_", "step", "update")]
    else:
        snap["patched"] = _patched(minigrad.functional, minigrad.nn.Module, minigrad.Tensor)
    return snap


def _identity(method):
    return f"{getattr(method, '__qualname__', method)}@{id(_unbound(method))}"


def _unbound(method):
    """A bound method is a new object at each lookup; its function is not."""
    return getattr(method, "__func__", method)


def _patched(*namespaces):
    return {f"{getattr(ns, '__name__', ns)}.{attr}": id(_unbound(getattr(ns, attr)))
            for ns in namespaces for attr in dir(ns)
            if not attr.startswith("__") and callable(getattr(ns, attr, None))}


def _output_hooks(setup):
    """Run one forward and backward after close(); any tensor hook on the outputs is a leftover."""
    inputs, targets = setup.tool_batch(4)
    output = call(setup.model, inputs)
    found = []
    for path, value in _tensors(output):
        for attr in _TENSOR_HOOK_ATTRS:
            hooks = getattr(value, attr, None)
            if hooks:
                found.append(f"output{path}.{attr}: {len(hooks)}")
    setup.loss_fn(output, targets).backward()
    if setup.framework == "torch":
        setup.model.zero_grad(set_to_none=True)
    else:
        setup.model.zero_grad()
    return found


def _tensors(value, path=""):
    if isinstance(value, dict):
        return [t for k, v in value.items() for t in _tensors(v, f"{path}[{k!r}]")]
    if isinstance(value, (tuple, list)):
        return [t for i, v in enumerate(value) for t in _tensors(v, f"{path}[{i}]")]
    return [(path, value)] if hasattr(value, "shape") else []
