"""The backend protocol: what the diagnostics need from a framework, in one small interface.

Every diagnostic talks to a model through a ``Backend`` chosen from the model's type
(``get_backend``), so one code path serves torch and minigrad. Arrays cross the boundary as
NumPy ndarrays; framework tensors stay inside the backend except where a hook hands one over.
"""
import contextlib
import copy
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..errors import DiagnosticsError


@dataclass
class ModelState:
    """Everything "Nothing lost" lists, captured by ``Backend.snapshot``."""

    parameters: dict          # name -> framework tensor copy (dtype and device included)
    buffers: dict             # name -> framework tensor copy
    gradients: dict           # name -> copy of .grad, or None
    requires_grad: dict       # name -> bool
    training: dict            # module name -> bool
    hook_keys: dict           # module name -> {hook dict name: frozenset of keys}
    rng: dict                 # generator name -> state


class Backend(ABC):
    """One framework's implementation of the operations the diagnostics use."""

    name = "abstract"
    UPDATE_SAMPLE = 16384  # at most this many entries per parameter measure an update's size
    SAMPLE_BLOCK = 16      # taken in runs of 16 neighbours (a 64-byte cache line of float32)

    def __init__(self, model):
        self.model = model

    # ---------------------------------------------------------------- choosing
    @staticmethod
    @abstractmethod
    def accepts(model):
        """True when ``model`` is a module of this framework."""

    # -------------------------------------------------------------- structure
    def named_parameters(self):
        """``[(name, parameter)]`` in registration order, names as the framework spells them."""
        return list(self.model.named_parameters())

    def named_modules(self):
        """``[(name, module)]`` as ``named_modules()`` spells them; the root is ``""``."""
        return list(self.model.named_modules())

    def named_buffers(self):
        return list(self.model.named_buffers())

    def parameter(self, name):
        return dict(self.model.named_parameters())[name]

    def module(self, name):
        return dict(self.model.named_modules())[name]

    @abstractmethod
    def is_tensor(self, value):
        """True for a tensor of this framework."""

    # ----------------------------------------------------------------- arrays
    @abstractmethod
    def to_numpy(self, tensor):
        """A NumPy copy of ``tensor`` (detached, on the host)."""

    @abstractmethod
    def from_numpy(self, array, *, like=None):
        """A framework tensor holding ``array`` (on ``like``'s device when given)."""

    def read_parameter(self, name):
        return self.to_numpy(self.parameter(name))

    @abstractmethod
    def write_parameter(self, name, array):
        """Overwrite a parameter's values in place (dtype and identity kept)."""

    def read_gradient(self, name):
        grad = self.parameter(name).grad
        return None if grad is None else self.to_numpy(grad)

    # ---------------------------------------------------------------- running
    def forward(self, inputs):
        """``model(*inputs)`` when ``inputs`` is a tuple, else ``model(inputs)``."""
        return self.model(*inputs) if isinstance(inputs, tuple) else self.model(inputs)

    def backward(self, loss):
        """Backpropagate a scalar loss into the parameters' ``.grad``."""
        loss.backward()

    def zero_grad(self):
        """Set every parameter's ``.grad`` to None."""
        for _, param in self.named_parameters():
            param.grad = None

    @abstractmethod
    def no_grad(self):
        """A context manager that turns off graph recording."""

    @abstractmethod
    def enable_grad(self):
        """A context manager that turns graph recording on (inside a ``no_grad`` block too)."""

    @abstractmethod
    def grad_enabled(self):
        """True when the framework records a graph now."""

    @abstractmethod
    def scalar(self, tensor):
        """The value of a one-element tensor as a Python float."""

    # ------------------------------------------------------------------ hooks
    def on_host(self, tensor):
        """True when reading ``tensor`` needs no transfer from an accelerator."""
        return True

    def add_forward_hook(self, module, hook):
        """``hook(module, inputs, output)``; returns a handle with ``remove()``."""
        return module.register_forward_hook(hook)

    def add_backward_hook(self, module, hook):
        """``hook(module, grad_input, grad_output)`` (framework gradients); returns a handle."""
        return module.register_full_backward_hook(hook)

    def add_forward_pre_hook(self, module, hook, *, with_kwargs=False):
        """``hook(module, inputs)`` before forward (``hook(module, args, kwargs)`` with
        ``with_kwargs``); returns a handle with ``remove()``."""
        return module.register_forward_pre_hook(hook, with_kwargs=with_kwargs)

    def add_tensor_hook(self, tensor, hook):
        """``hook(grad)`` with the gradient arriving at ``tensor``, before it joins ``.grad``."""
        return tensor.register_hook(hook)

    # ------------------------------------------------------------- statistics
    # Reductions run where the tensor lives and do not synchronise; ``gather`` brings a list
    # of their results to the host in one transfer (one synchronisation).
    @abstractmethod
    def activation_statistics(self, tensor, *, saturation=None):
        """``(sum, sum of squares, nonzero count, unit max, unit min)``, and the saturated count
        when ``saturation=(center, radius)`` is given (elements with |x - center| > radius).

        Units lie on axis 1 (features of (N, F), channels of (N, C, ...)); a 0-d or 1-d
        tensor is one unit. None for an empty or non-floating tensor.
        """

    @abstractmethod
    def prediction_entropy(self, tensor):
        """The mean over rows of the entropy of ``softmax(tensor)`` along the last dimension
        (nats; ln C for a uniform guess over C classes), a 0-d result. None for an empty or
        non-floating tensor, or one with fewer than 2 columns."""

    @abstractmethod
    def gradient_statistics(self, grad, *, per_unit=False):
        """``(sum of squares, sum of |g|, max |g|)``; with ``per_unit`` the last is per row
        (dim 0: a layer's output unit; for a bias, each entry's |g|)."""

    @abstractmethod
    def weight_sample(self, param, *, into=None):
        """A copy of ``param``'s entries, or for a larger one of at most ``UPDATE_SAMPLE`` of
        them: every k-th run of ``SAMPLE_BLOCK`` neighbours, spread over the whole tensor and
        cheap to read. Written into ``into`` when it fits."""

    @abstractmethod
    def update_statistics(self, param, before):
        """``(|w - before|, |w|)`` over the entries ``weight_sample`` took, ``w`` being
        ``param`` now; ``before`` (ours) may be overwritten."""

    def _sample_stride(self, numel):
        """(blocks, stride): view the first ``blocks`` runs and keep every ``stride``-th; None
        when the whole parameter fits in the sample."""
        if numel <= self.UPDATE_SAMPLE:
            return None
        blocks = numel // self.SAMPLE_BLOCK
        return blocks, -(-blocks // (self.UPDATE_SAMPLE // self.SAMPLE_BLOCK))

    @abstractmethod
    def gather(self, results):
        """The results of the methods above brought to the host in one transfer, in order:
        a float for each 0-d result, a flat float64 NumPy array for each other."""

    def copy_tensor(self, tensor):
        """A detached copy of ``tensor``, same dtype and device."""
        return self._copy_tensor(tensor)

    def release_scratch(self):
        """Free buffers kept for statistics."""

    GRAPH_NODES_PROBED = 64  # graph_buffers_alive looks no further than this many nodes

    def graph_buffers_alive(self, tensor):
        """True while the graph that made ``tensor`` still holds what backward needs (after
        ``retain_graph=True``, or before any backward); False once backward freed it; None
        when no saved tensor lies within the first nodes."""
        stack, visited = [getattr(tensor, "grad_fn", None)], 0
        while stack and visited < self.GRAPH_NODES_PROBED:
            node = stack.pop()
            if node is None:
                continue
            visited += 1
            saved = self._saved_state(node)
            if saved is not None:
                return saved
            stack.extend(self._node_inputs(node))
        return None

    def node_inputs(self, node):
        """The graph nodes (or None) that made one graph node's inputs (``grad_fn`` nodes)."""
        return self._node_inputs(node)

    @abstractmethod
    def _saved_state(self, node):
        """Of one graph node: True if it holds saved tensors, False if backward freed them,
        None if it saved nothing."""

    @abstractmethod
    def _node_inputs(self, node):
        """The nodes (or None) that made one graph node's inputs."""

    def hook_keys(self):
        """module name -> {hook dict: keys}: what ``restore`` uses to drop leftover hooks."""
        return {name: {attr: frozenset(module.__dict__.get(attr, {}).keys())
                       for attr in self.HOOK_DICTS}
                for name, module in self.named_modules()}

    HOOK_DICTS = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks")
    HOOK_SIDE_DICTS = ()  # dicts that hold extra data for a hook under the same key

    # ------------------------------------------------------------------ state
    @abstractmethod
    def _copy_tensor(self, tensor):
        """An independent copy of a tensor, same dtype and device."""

    @abstractmethod
    def _assign_tensor(self, target, saved):
        """Write ``saved`` back into ``target`` (values, dtype, shape), keeping ``target``'s
        identity."""

    @abstractmethod
    def rng_state(self):
        """The global generators' states: NumPy's, and the framework's."""

    @abstractmethod
    def set_rng_state(self, state):
        """Put back what ``rng_state`` returned."""

    def snapshot(self):
        """Capture parameters, buffers, gradients, flags, modes, hook keys and RNG states."""
        params = self.named_parameters()
        return ModelState(
            parameters={n: self._copy_tensor(p) for n, p in params},
            buffers={n: self._copy_tensor(b) for n, b in self.named_buffers() if b is not None},
            gradients={n: None if p.grad is None else self._copy_tensor(p.grad) for n, p in params},
            requires_grad={n: bool(p.requires_grad) for n, p in params},
            training={n: bool(m.training) for n, m in self.named_modules()},
            hook_keys=self.hook_keys(),
            rng=self.rng_state(),
        )

    def restore(self, state):
        """Put the model back exactly as ``state`` found it, and drop hooks added since."""
        params = dict(self.named_parameters())
        for name, saved in state.parameters.items():
            self._assign_tensor(params[name], saved)
            params[name].requires_grad = state.requires_grad[name]
            saved_grad = state.gradients[name]
            params[name].grad = None if saved_grad is None else self._copy_tensor(saved_grad)
        buffers = dict(self.named_buffers())
        for name, saved in state.buffers.items():
            self._assign_tensor(buffers[name], saved)
        modules = dict(self.named_modules())
        for name, training in state.training.items():
            modules[name].training = training
        for name, keys in state.hook_keys.items():
            kept_anywhere = frozenset().union(*keys.values())
            for attr in self.HOOK_DICTS + self.HOOK_SIDE_DICTS:
                kept = keys.get(attr, kept_anywhere)
                hooks = modules[name].__dict__.get(attr)
                for key in [k for k in (hooks or {}) if k not in kept]:
                    del hooks[key]
        self.set_rng_state(state.rng)

    @contextlib.contextmanager
    def preserved(self, optimizer=None):
        """Run the block, then restore the model (and ``optimizer``) as they were, also on error."""
        state = self.snapshot()
        optimizer_state = self.optimizer_snapshot(optimizer) if optimizer is not None else None
        try:
            yield self
        finally:
            self.restore(state)
            if optimizer is not None:
                self.optimizer_restore(optimizer, optimizer_state)

    @abstractmethod
    def new_optimizer(self, name, **options):
        """A fresh ``<framework>.optim.<name>`` (``"SGD"``, ``"Adam"``) over the model's
        parameters."""

    @abstractmethod
    def optimizer_snapshot(self, optimizer):
        """A deep copy of the optimizer's state (moments, step counts, hyperparameters)."""

    @abstractmethod
    def optimizer_restore(self, optimizer, snapshot):
        """Put back what ``optimizer_snapshot`` returned."""

    def clone(self, *, dtype=None):
        """A backend over an independent deep copy of the model, without the user's hooks."""
        with _hooks_set_aside(self.model, self.HOOK_DICTS + self.HOOK_SIDE_DICTS):
            try:
                twin = copy.deepcopy(self.model)
            except Exception as error:  # an attribute that cannot be copied: a lock, a file
                raise DiagnosticsError(
                    f"model: expected a module that copy.deepcopy can copy (the diagnostics "
                    f"work on a copy to leave yours untouched); deepcopy failed with {error!r}"
                ) from error
        if dtype is not None:
            self._convert_dtype(twin, np.dtype(dtype))
        return type(self)(twin)

    @abstractmethod
    def _convert_dtype(self, model, dtype):
        """Convert ``model``'s floating parameters and buffers to the NumPy ``dtype``, in place."""

    def floating_dtype(self):
        """The dtype of the first floating parameter (NumPy dtype)."""
        for _, param in self.named_parameters():
            array = self.to_numpy(param)
            if np.issubdtype(array.dtype, np.floating):
                return array.dtype
        return np.dtype(np.float32)


@contextlib.contextmanager
def _hooks_set_aside(model, attrs):
    """Empty every hook dict while the block runs (so a deep copy copies no hooks), then put
    them back."""
    saved = []
    for module in model.modules():
        for attr in attrs:
            hooks = module.__dict__.get(attr)
            if hooks is not None:
                saved.append((module, attr, hooks))
                object.__setattr__(module, attr, type(hooks)())
    try:
        yield
    finally:
        for module, attr, hooks in saved:
            object.__setattr__(module, attr, hooks)
