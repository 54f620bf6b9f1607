"""One patch of the ``torch.nn.functional`` losses whose inputs and targets the Monitor reads.

``LossInputsProbe`` reads what reaches a loss that expects logits or log-probabilities;
``TargetsProbe`` reads the targets of the class losses. Both listen on this one patch, so a
function is wrapped once however many probes and Monitors read it, and the original is back
when the last listener goes (two patches of one function, lifted in the other order, would
leave a wrapper behind). ``nn.CrossEntropyLoss``, ``nn.NLLLoss``, ``nn.BCEWithLogitsLoss`` and
``nn.KLDivLoss`` call these functions through the module, so they are seen; a function imported
by name before the Monitor was made is not.

A listener's ``note_loss(function, args, kwargs)`` is told of each call before the original
runs; it must not raise (each probe keeps its own error for its next ``contribute``).
"""
import functools

from .shared_patch import SharedPatch, restore_attributes

FUNCTIONS = ("binary_cross_entropy_with_logits", "kl_div", "nll_loss", "cross_entropy")

_LISTENERS = []
_INSTALLED = []      # (owner, name, original, wrapper)


def _install():
    import torch.nn.functional as F

    try:
        for name in FUNCTIONS:
            original = getattr(F, name, None)
            if callable(original):
                wrapper = _wrap(name, original)
                setattr(F, name, wrapper)
                _INSTALLED.append((F, name, original, wrapper))
    except BaseException:
        _uninstall()
        raise


def _uninstall():
    restore_attributes(_INSTALLED)


def _wrap(function, original):
    @functools.wraps(original)
    def loss(*args, **kwargs):
        if _LISTENERS:
            for listener in tuple(_LISTENERS):
                listener.note_loss(function, args, kwargs)
        return original(*args, **kwargs)
    return loss


PATCH = SharedPatch(_LISTENERS, install=_install, uninstall=_uninstall)
