"""``Batch``: one batch and its loss, converted and checked once for every diagnostic.

``inputs`` may be a tensor of the model's framework or a NumPy array, a tuple or list of them
(positional arguments of ``forward``) or a dict of them (keyword arguments, as Hugging Face
models take them; other values in a dict, such as ``None`` or flags, pass unchanged).
``targets`` is a tensor, an array, a tuple of them, or None where the tool allows it. The
gradient check converts everything to float64 copies (``float64=True``); the training tools
keep framework tensors as given and convert NumPy floats to the model's floating dtype.
"""
from dataclasses import dataclass, replace

import numpy as np

from . import outputs
from .backends import get_backend
from .errors import DiagnosticsError, require
from .validators import check_callable


@dataclass(frozen=True)
class Batch:
    """``loss_fn(model(*args, **kwargs), targets)`` on one batch; ``selector`` is ``output=``."""

    backend: object
    loss_fn: object
    args: tuple
    kwargs: dict
    targets: object
    selector: object = None

    @classmethod
    def prepare(cls, backend, loss_fn, inputs, targets, *, output=None, float64=False,
                targets_required=True, argument="inputs", target_argument="targets"):
        """The checked batch (``DiagnosticsError`` naming the argument on misuse)."""
        check_callable(loss_fn, "loss_fn", "a callable loss_fn(output, targets)")
        if float64:
            loss_fn = _own_loss(backend, loss_fn)
        convert = _float64_copy if float64 else _model_tensor
        outputs.check_selector(output)
        if isinstance(inputs, dict):
            require(len(inputs) > 0, argument, "a tensor, a NumPy array, or a tuple of them",
                    "{}")
            kwargs = {key: (convert(backend, value, argument) if _array_like(backend, value)
                            else value) for key, value in inputs.items()}
            args = ()
        else:
            values = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
            require(len(values) > 0, argument, "a tensor, a NumPy array, or a tuple of them",
                    "()")
            args, kwargs = tuple(convert(backend, value, argument) for value in values), {}
        for value in args + tuple(kwargs.values()):
            if backend.is_tensor(value):
                shape = tuple(value.shape)
                require(len(shape) > 0 and shape[0] > 0 and 0 not in shape, argument,
                        "a non-empty batch (a leading batch dimension of size >= 1)",
                        f"shape {shape}")
        if isinstance(targets, dict):   # a multi-task loss's named targets, given whole
            require(len(targets) > 0, target_argument,
                    "a tensor, a NumPy array, or a tuple or dict of them", "{}")
            targets = {key: (convert(backend, value, target_argument)
                             if _array_like(backend, value) else value)
                       for key, value in targets.items()}
        elif isinstance(targets, (tuple, list)):
            targets = tuple(convert(backend, value, target_argument) for value in targets)
        elif targets is not None or targets_required:
            targets = convert(backend, targets, target_argument)
        return cls(backend, loss_fn, args, kwargs, targets, output)

    # ------------------------------------------------------------- running
    def forward(self, model):
        return model(*self.args, **self.kwargs)

    def loss(self, output):
        return self.loss_fn(output, self.targets)

    def output_and_loss(self, backend):
        """``(output, loss)`` of one forward pass of ``backend``'s model; a
        ``DiagnosticsError`` if the loss is not a one-element tensor."""
        output = self.forward(backend.model)
        loss = self.loss(output)
        require(backend.is_tensor(loss) and int(np.prod(tuple(loss.shape))) == 1, "loss_fn",
                "a function returning a one-element loss tensor (reduction 'mean' or 'sum')",
                f"{type(loss).__name__} of shape {tuple(getattr(loss, 'shape', ()))}")
        return output, loss

    # ------------------------------------------------------------- the logits
    def logits_key(self, backend, output):
        """Where the logits are in ``output`` (see ``diagnostics.outputs``); a LookupError
        when there are none."""
        def reads():
            with backend.enable_grad():   # rule 4 needs a backward, even under no_grad
                return outputs.loss_reads(backend, self.loss_fn, output, self.targets)
        return outputs.select_key(backend, output, selector=self.selector, reads=reads)

    def logits(self, backend, output):
        """The logits tensor of ``output``, or None when there is none."""
        try:
            return outputs.pick(output, self.logits_key(backend, output))
        except LookupError:
            return None

    # ------------------------------------------------------------- shape
    @property
    def inputs(self):
        """The inputs in the user's form: a dict of keyword inputs, one tensor, or a tuple."""
        if self.kwargs:
            return dict(self.kwargs)
        return self.args[0] if len(self.args) == 1 else self.args

    @property
    def tensors(self):
        return [v for v in self.args + tuple(self.kwargs.values())
                if self.backend.is_tensor(v)]

    @property
    def batch_size(self):
        return int(self.tensors[0].shape[0]) if self.tensors else 1

    def rows(self, count):
        """The first ``count`` rows of every input and target with the batch's leading size."""
        size = self.batch_size

        def cut(value):
            if self.backend.is_tensor(value) and tuple(value.shape)[:1] == (size,):
                return value[:count]
            return value

        if isinstance(self.targets, dict):
            targets = {key: cut(value) for key, value in self.targets.items()}
        else:
            targets = (tuple(cut(t) for t in self.targets) if isinstance(self.targets, tuple)
                       else cut(self.targets))
        return replace(self, args=tuple(cut(a) for a in self.args),
                       kwargs={k: cut(v) for k, v in self.kwargs.items()}, targets=targets)

    def target_array(self):
        """The targets as an ndarray (the first of a tuple), or None (also for a dict: which of
        its entries the logits meet is the loss's business)."""
        first = self.targets[0] if isinstance(self.targets, tuple) and self.targets \
            else self.targets
        return self.backend.to_numpy(first) if self.backend.is_tensor(first) else None

    def describe_inputs(self):
        shown = [str(tuple(v.shape)) for v in self.args]
        shown += [f"{k}={tuple(v.shape)}" for k, v in self.kwargs.items()
                  if self.backend.is_tensor(v)]
        return ", ".join(shown)


def _array_like(backend, value):
    return backend.is_tensor(value) or isinstance(value, np.ndarray)


def _rejected(backend, value, argument):
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    raise DiagnosticsError(f"{argument}: expected a {backend.name} tensor, a NumPy array, or a "
                           f"tuple of them{' or a dict' if 'target' in argument else ''}, "
                           f"got {kind}")


def _float64_copy(backend, value, argument):
    """A float64 copy for the gradient check (integer and bool arrays keep their dtype)."""
    if backend.is_tensor(value):
        array = backend.to_numpy(value)
    elif isinstance(value, np.ndarray):
        array = value
    else:
        _rejected(backend, value, argument)
    if array.dtype.kind == "f":
        array = array.astype(np.float64)
    elif array.dtype.kind not in "iub":
        raise DiagnosticsError(f"{argument}: expected numbers (float, int or bool), "
                               f"got dtype {array.dtype}")
    return backend.from_numpy(np.array(array, copy=True), like=first_parameter(backend))


def _model_tensor(backend, value, argument):
    tensor = model_tensor(backend, value)
    if tensor is None:
        _rejected(backend, value, argument)
    return tensor


def model_tensor(backend, value):
    """Framework tensors unchanged; NumPy arrays converted, floating ones to the model's
    floating dtype (so float64 data meets a float32 model); None for anything else."""
    if backend.is_tensor(value):
        return value
    if isinstance(value, np.ndarray):
        if np.issubdtype(value.dtype, np.floating):
            value = value.astype(backend.floating_dtype(), copy=False)
        return backend.from_numpy(value, like=first_parameter(backend))
    return None


def first_parameter(backend):
    """The model's first parameter (its device is where converted data goes), or None."""
    parameters = backend.named_parameters()
    return parameters[0][1] if parameters else None


def _own_loss(backend, loss_fn):
    """A loss module of the model's framework, copied in float64 without hooks; others as given."""
    try:
        loss_backend = get_backend(loss_fn, argument="loss_fn")
    except DiagnosticsError:
        return loss_fn
    require(type(loss_backend) is type(backend), "loss_fn",
            f"a loss of the model's framework ({backend.name})",
            f"a {loss_backend.name} module")
    return loss_backend.clone(dtype=np.float64).model

