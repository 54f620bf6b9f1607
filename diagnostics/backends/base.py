"""The backend protocol: what the diagnostics need from a framework, in one small interface.

Every diagnostic talks to a model through a ``Backend`` chosen from the model's type
(``get_backend``), so one code path serves torch and minigrad. Arrays cross the boundary as
NumPy ndarrays; framework tensors stay inside the backend except where a hook hands one over.
"""
import contextlib
import copy
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np

from ..errors import DiagnosticsError
from .hooks import NotCopied


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
        """``hook(module, inputs, output)``; returns a handle with ``remove()``. A copy of the
        module (deepcopy, pickle) does not inherit it (``hooks.NotCopied``)."""
        return module.register_forward_hook(NotCopied(hook))

    def add_forward_pre_hook(self, module, hook, *, with_kwargs=False):
        """``hook(module, inputs)`` before forward (``hook(module, args, kwargs)`` with
        ``with_kwargs``); returns a handle with ``remove()``. A copy of the module does not
        inherit it (``hooks.NotCopied``)."""
        return module.register_forward_pre_hook(NotCopied(hook), with_kwargs=with_kwargs)

    def add_tensor_hook(self, tensor, hook):
        """``hook(grad)`` with the gradient arriving at ``tensor``, before it joins ``.grad``."""
        return tensor.register_hook(hook)

    def plain_chain(self, module):
        """True when ``module`` is the framework's own ``Sequential``, unchanged: its forward
        hands its input to its first child, each child's output to the next child only, and
        returns the last one (no other code can read them). False when unsure."""
        return False

    def use_recorder(self, on_use):
        """A context manager under which every call of a framework function hands the tensors
        it is given (nested in lists, tuples and dicts too) to ``on_use(tensors)``, reads of
        shape-like metadata left out; None where the framework cannot see every call."""

    def sole_consumers(self, loss):
        """``{id(node): consumer}`` for the graph nodes of the loss's graph whose first output
        exactly one edge of that graph leads into (``consumer``, the node that edge starts
        at); None where the framework's graph does not say which output an edge reads."""

    @abstractmethod
    def node_inputs(self, node):
        """The graph nodes (or None) that made one graph node's inputs (``grad_fn`` nodes)."""

    def hook_keys(self):
        """module name -> {hook dict: keys}: what ``restore`` uses to drop leftover hooks."""
        return {name: {attr: frozenset(module.__dict__.get(attr, {}).keys())
                       for attr in self.HOOK_DICTS}
                for name, module in self.named_modules()}

    def hooks_set_aside(self):
        """A context manager: every hook dict of the model emptied while the block runs (a
        replay runs without the user's hooks or the Monitor's, and hooks added inside go with
        the block), then put back as it was, also on error."""
        return _hooks_set_aside(self.model, self.HOOK_DICTS + self.HOOK_SIDE_DICTS)

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

    def outside_tensors(self, optimizer):
        """The tensors ``optimizer`` updates that are not parameters of the model (a loss's
        temperature, a prompt, or another model's weights)."""
        own = {id(param) for _, param in self.named_parameters()}
        return [tensor for group in optimizer.param_groups for tensor in group["params"]
                if id(tensor) not in own]

    def snapshot_tensor(self, tensor):
        """``(values, gradient)`` of a tensor outside the model, for ``restore_tensor``."""
        grad = getattr(tensor, "grad", None)
        return self._copy_tensor(tensor), None if grad is None else self._copy_tensor(grad)

    def restore_tensor(self, tensor, saved):
        values, grad = saved
        self._assign_tensor(tensor, values)
        tensor.grad = None if grad is None else self._copy_tensor(grad)

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
        """Run the block, then restore the model (and ``optimizer``, with the tensors it holds
        beside the model's parameters) as they were, also on error."""
        state = self.snapshot()
        optimizer_state = self.optimizer_snapshot(optimizer) if optimizer is not None else None
        extra = [] if optimizer is None else [
            (tensor, self.snapshot_tensor(tensor)) for tensor in self.outside_tensors(optimizer)]
        try:
            yield self
        finally:
            self.restore(state)
            if optimizer is not None:
                self.optimizer_restore(optimizer, optimizer_state)
            for tensor, saved in extra:
                self.restore_tensor(tensor, saved)

    @contextlib.contextmanager
    def buffers_kept(self, module):
        """Run the block, then put ``module``'s buffers back as they were, also on error (a
        replayed forward may update running statistics)."""
        kept = [(buffer, self._copy_tensor(buffer)) for _, buffer in module.named_buffers()
                if buffer is not None]
        try:
            yield
        finally:
            for buffer, saved in kept:
                self._assign_tensor(buffer, saved)

    @contextlib.contextmanager
    def generators_kept(self, module):
        """Run the block, then put back the state of every random generator of the user's own
        that it may draw from, also on error: those held as attributes of ``module`` and its
        submodules (NumPy's, Python's, the framework's) and those handed to the framework's
        functions (``generator=``, where the framework shows its calls). The global
        generators are ``rng_state``'s. A generator whose state cannot be read raises before
        it draws."""
        kept = {}

        def keep(generator):
            """Save ``generator``'s state the first time it is seen, before it draws."""
            if id(generator) not in kept:
                kept[id(generator)] = (generator, self._generator_state(generator))
        try:
            for sub in module.modules():
                for value in list(getattr(sub, "__dict__", {}).values()):
                    if self._is_generator(value):
                        keep(value)
            with self._generators_watched(keep):
                yield
        finally:
            for generator, state in kept.values():
                self._set_generator_state(generator, state)

    def _is_generator(self, value):
        return isinstance(value, (np.random.Generator, np.random.RandomState, random.Random))

    def _generator_state(self, generator):
        if isinstance(generator, np.random.Generator):
            return copy.deepcopy(generator.bit_generator.state)
        if isinstance(generator, random.Random):
            return generator.getstate()
        return copy.deepcopy(generator.get_state())   # NumPy's RandomState

    def _set_generator_state(self, generator, state):
        if isinstance(generator, np.random.Generator):
            generator.bit_generator.state = copy.deepcopy(state)
        elif isinstance(generator, random.Random):
            generator.setstate(state)
        else:
            generator.set_state(state)

    def _generators_watched(self, keep):
        """A context manager under which ``keep(generator)`` is called with each generator
        handed to a framework function, before the function draws from it; a no-op where the
        framework shows no calls."""
        return contextlib.nullcontext()

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

    def float64_casts(self):
        """A context in which the user's code casts to float64 where it casts to a lower
        floating precision (``y.float()`` in a loss) or makes a float tensor without a dtype:
        a check on a float64 copy must not run part of the loss in float32. Nothing to do
        where such casts already follow the inputs' dtype."""
        return contextlib.nullcontext()

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
    """Empty every hook dict while the block runs (so a deep copy copies no hooks, a replay
    runs none), then put them back, also those emptied before one that could not be."""
    saved = []
    try:
        for module in model.modules():
            for attr in attrs:
                hooks = module.__dict__.get(attr)
                if hooks is not None:
                    object.__setattr__(module, attr, type(hooks)())
                    saved.append((module, attr, hooks))
        yield
    finally:
        for module, attr, hooks in saved:
            object.__setattr__(module, attr, hooks)
