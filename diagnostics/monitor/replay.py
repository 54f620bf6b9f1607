"""Replaying a bad step (``Monitor(guard="skip", guard_replay=True)``): is the fault the data's
or the model's, and does it come back?

While replay is on, every training forward of the model is recorded: its arguments (the
tensors themselves, not copies), the random generators' state before it, and the gradient
that reached each tensor of its output in the backward pass. A bad step with one forward in
its window is replayed from the same parameters, the same random state and the same inputs:
the forward again (every module's output read, to name the first that is NaN or inf), then the
backward from the recorded output gradients (what the loss sent the model), which gives the
parameters' gradients again. Gradients that come out finite, where the step's were not (or at
the run's usual size, where the step's spiked), mean a transient fault: the step is retried
with them. A fault that made the forward's own output NaN or inf and does not come back is
transient too, but the loss's gradient of that pass is not usable and the loss is the
user's code: that step is dropped (and counted as transient). The Monitor's hooks are quiet
during the replay; the user's hooks run, the buffers (BatchNorm statistics) and every random
generator are put back afterwards.
"""
import math
from dataclasses import dataclass, field

from .compiled import input_copies, keyword_copies


@dataclass
class ForwardRecord:
    """One training forward of the model, as the replay needs it (filled while the step
    runs: not a value passed between probes and checks)."""

    args: tuple
    kwargs: dict
    rng: dict
    output_grads: list = field(default_factory=list)   # [(output index, gradient)]
    output_finite: bool = True   # the forward's own output held no NaN or inf


@dataclass(frozen=True)
class ReplayResult:
    """What the replay of one step found."""

    gradients: dict | None      # parameter name -> replayed gradient (None: not computed)
    nonfinite_output_gradient: bool
    first_nonfinite_module: str | None
    error: str | None           # the user's forward or backward raised in the replay


def output_tensors(torch, output):
    """The tensors of a model output (nested tuples, lists, dicts, dataclass-like outputs),
    in a fixed order."""
    leaves, _ = torch.utils._pytree.tree_flatten(output)
    if not leaves and hasattr(output, "__dict__"):
        leaves, _ = torch.utils._pytree.tree_flatten(dict(vars(output)))
    return [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]


def record_output_gradients(backend, record, output, add_tensor_hook):
    """Hooks on ``output``'s tensors that keep the gradient each receives in ``record``, and
    whether the output itself is finite."""
    torch = backend.torch
    for index, tensor in enumerate(output_tensors(torch, output)):
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor.detach()).all()):
            record.output_finite = False
        if tensor.requires_grad:
            add_tensor_hook(tensor, lambda grad, index=index: record.output_grads.append(
                (index, grad.detach())))


def replay(backend, model, record, named_params, *, hooks_quiet):
    """The step of ``record`` again (see the module docstring); a ``ReplayResult``."""
    torch = backend.torch
    grads_by_index = dict(record.output_grads)
    nonfinite_grad = any(not bool(torch.isfinite(g).all()) for g in grads_by_index.values())
    first = []
    with hooks_quiet(), backend.buffers_kept(model), backend.generators_kept(model):
        now = backend.rng_state()
        handles = [module.register_forward_hook(_first_nonfinite(torch, name, first))
                   for name, module in model.named_modules()]
        try:
            backend.set_rng_state(record.rng)
            with torch.enable_grad():
                output = model(*input_copies(backend, record.args),
                               **keyword_copies(backend, record.kwargs))
                tensors = output_tensors(torch, output)
                pairs = [(tensors[i], g) for i, g in grads_by_index.items()
                         if i < len(tensors) and tensors[i].requires_grad]
                params = [(name, p) for name, p in named_params if p.requires_grad]
                if not pairs or not params:
                    return ReplayResult(None, nonfinite_grad, _name(first), None)
                grads = torch.autograd.grad([t for t, _ in pairs], [p for _, p in params],
                                            grad_outputs=[g for _, g in pairs],
                                            allow_unused=True)
        except Exception as error:   # noqa: BLE001 - the user's model, any failure
            return ReplayResult(None, nonfinite_grad, _name(first),
                                f"{type(error).__name__}: {error}")
        finally:
            for handle in handles:
                handle.remove()
            backend.set_rng_state(now)
    return ReplayResult({name: g for (name, _), g in zip(params, grads)}, nonfinite_grad,
                        _name(first), None)


def total_norm(torch, gradients):
    """The total 2-norm of ``gradients`` (a dict of tensors or None), in float64."""
    squares = [float(torch.linalg.vector_norm(g.detach().double())) ** 2
               for g in gradients.values() if g is not None]
    return math.sqrt(sum(squares)) if squares else 0.0


def _first_nonfinite(torch, name, found):
    def hook(module, args, output):
        if found:
            return
        for tensor in output_tensors(torch, output):
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                found.append(name or "(model)")
                return
    return hook


def _name(found):
    return found[0] if found else None
