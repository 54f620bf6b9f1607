"""One patch of ``torch.nn.functional``'s losses, shared by every probe that reads their calls.

``nn.MSELoss``, ``nn.BCEWithLogitsLoss``, ``nn.KLDivLoss`` and the rest call these functions
through the module, so a wrapper laid on the module sees every loss module's call too (a loss
function imported by name before the Monitor was made is not seen). Two probes wrapping one
function each would stack wrappers whose lifting order decides which one stays behind; one
patch over the union of the functions, with a listener per probe, lifts cleanly when the last
listener goes (``SharedPatch``).

A listener has ``loss_called(function, args, kwargs, result)``: called after the original
returned, with the arguments as the user passed them; it must not raise (the wrapper shields
the user's call from it anyway).
"""
import functools

from .shared_patch import SharedPatch, restore_attributes

FUNCTIONS = ("binary_cross_entropy_with_logits", "binary_cross_entropy", "cross_entropy",
             "kl_div", "nll_loss", "ctc_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
             "huber_loss")

# how a message names each function: itself and the module that calls it
MODULES = {"binary_cross_entropy_with_logits": "BCEWithLogitsLoss",
           "binary_cross_entropy": "BCELoss", "cross_entropy": "CrossEntropyLoss",
           "kl_div": "KLDivLoss", "nll_loss": "NLLLoss", "ctc_loss": "CTCLoss",
           "mse_loss": "MSELoss", "l1_loss": "L1Loss", "smooth_l1_loss": "SmoothL1Loss",
           "huber_loss": "HuberLoss"}

_LISTENERS = []
_INSTALLED = []      # (owner, name, original, wrapper)


def loss_name(function):
    """``nll_loss (NLLLoss)``: the function a loss call went through, and its module."""
    return f"{function} ({MODULES[function]})"


def argument(args, kwargs, index, name):
    """The argument a loss function got at position ``index`` or by keyword ``name``."""
    return args[index] if len(args) > index else kwargs.get(name)


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
        result = original(*args, **kwargs)
        for listener in tuple(_LISTENERS):
            try:
                listener.loss_called(function, args, kwargs, result)
            except Exception:     # noqa: BLE001,S112 - never into the user's loss call
                continue
        return result
    return loss


LOSS_CALLS = SharedPatch(_LISTENERS, install=_install, uninstall=_uninstall)
