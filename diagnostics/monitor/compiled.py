"""Compiled models (``torch.compile``): how the Monitor sees the layers inside them.

Forward hooks on the modules inside a compiled graph do not run: dynamo traced those modules
once, and a hook added later is not in the graph (torch 2.x does not guard on module hooks; a
hook present at the first call is traced in, and removing it costs a recompile). So the
Monitor never hooks the modules of a compiled model. On a sampled iteration it replays the
first training call on the module underneath (``_orig_mod``), eagerly and without gradients,
with its layer hooks on for that replay only: the same weights, inputs, dropout masks (the
random generators are put back after the replay) and batch statistics (buffers put back), so
the statistics are those of the compiled call that follows, up to the compiler's rounding.
The cost: one forward pass without gradients per sampled iteration, none in between, and no
recompile. Gradients and updates need no replay (parameter hooks run outside the graph).
The replay gets copies of the input tensors; what it cannot undo is a forward that changes
Python state of its own (a call counter), and the user's own hooks see the extra call.
``replaying`` and ``input_copies`` also serve the replays of evaluation passes
(``probes/eval_randomness.py``).
"""
import contextlib


def module_underneath(model):
    """The module that ``torch.compile`` wrapped, or None for a model that is not compiled."""
    if type(model).__name__ != "OptimizedModule":
        return None
    return getattr(model, "_orig_mod", None)


def replay(backend, module, args, kwargs):
    """``module(*args, **kwargs)`` without gradients; the random generators and ``module``'s
    buffers (BatchNorm's running statistics and counts) are as before afterwards, also when it
    raises."""
    with replaying(backend, module):
        module(*input_copies(backend, args), **keyword_copies(backend, kwargs))


@contextlib.contextmanager
def replaying(backend, module):
    """A block of replays of ``module``'s forward: without gradients, and afterwards the random
    generators (the global ones, and the user's own that the forward draws from) and
    ``module``'s buffers are as before, also when it raises. Replays inside one block draw one
    random stream: the second does not repeat the first's dropout masks."""
    with backend.buffers_kept(module), backend.generators_kept(module):
        state = backend.rng_state()
        try:
            with backend.no_grad():
                yield
        finally:
            backend.set_rng_state(state)


def keyword_copies(backend, kwargs):
    """``kwargs`` with its tensors copied as ``input_copies`` does."""
    return dict(zip(kwargs, input_copies(backend, kwargs.values())))


def input_copies(backend, values):
    """``values`` with each tensor, also one inside a top-level tuple, list or dict, copied:
    a forward that changes its input in place (``x.relu_()``) must not change the real call's."""
    def copy(value):
        if backend.is_tensor(value):
            return value.detach().clone()
        if isinstance(value, dict):
            return {k: v.detach().clone() if backend.is_tensor(v) else v
                    for k, v in value.items()}
        if type(value) in (tuple, list):
            return type(value)(v.detach().clone() if backend.is_tensor(v) else v for v in value)
        return value
    return [copy(value) for value in values]
