"""The patches a planted bug is made of; each is a context manager that always puts things back.

``patched_attribute`` is the one primitive: it sets an attribute and, in ``finally``, restores
exactly what was there (the same object in the owner's own ``__dict__``, or nothing, so an
inherited attribute is inherited again). Everything else is built from it.
"""
import contextlib
import types

_MISSING = object()


@contextlib.contextmanager
def patched_attribute(owner, name, value):
    """Set ``owner.<name> = value`` for the block; afterwards the owner's own ``__dict__`` entry is
    back (the same object), or absent if there was none. Restored also when the block raises."""
    saved = vars(owner).get(name, _MISSING)
    setattr(owner, name, value)
    try:
        yield
    finally:
        if saved is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, saved)


def patched_backward(function_class, wrong, *, marker=None):
    """Swap ``function_class.backward`` (a minigrad ``Function``) for ``wrong(right, ctx, grad)``.

    ``right`` is the original backward, so ``wrong`` can compute the true gradients and spoil
    one of them. With ``marker``, only calls that received a tensor carrying that attribute
    (see ``marked``) get the wrong formula; other calls of the op stay right.
    """
    right = function_class.backward

    def backward(ctx, grad):
        if marker is not None and not any(getattr(x, marker, False) for x in ctx.inputs):
            return right(ctx, grad)
        return wrong(right, ctx, grad)

    return patched_attribute(function_class, "backward", staticmethod(backward))


def patched_forward(function_class, wrong):
    """Swap ``function_class.forward`` (a minigrad ``Function``) for ``wrong(right, ctx, *args)``,
    ``right`` being the original forward."""
    right = function_class.forward

    def forward(ctx, *args):
        return wrong(right, ctx, *args)

    return patched_attribute(function_class, "forward", staticmethod(forward))


def marked(tensor, marker):
    """Tag ``tensor`` (a parameter) with ``marker`` for the block; a deep copy of the model
    keeps the tag, so a patch scoped by ``patched_backward(marker=...)`` follows the copy."""
    return patched_attribute(tensor, marker, True)


def swapped_forward(module, forward):
    """Replace ``module.forward`` with ``forward(module, *args)`` for the block.

    It is bound as a method of the module, so a deep copy of the model (the diagnostics work
    on copies) binds it to the copied module and its own parameters.
    """
    return patched_attribute(module, "forward", types.MethodType(forward, module))


@contextlib.contextmanager
def swapped_modules(container, replacements):
    """Put ``replacements`` (child name -> module) into ``container`` for the block."""
    with contextlib.ExitStack() as stack:
        for name, module in replacements.items():
            stack.enter_context(_swapped_child(container, name, module))
        yield


@contextlib.contextmanager
def _swapped_child(container, name, module):
    saved = container._modules[name]
    container._modules[name] = module
    try:
        yield
    finally:
        container._modules[name] = saved
