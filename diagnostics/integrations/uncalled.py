"""A model an optimizer steps that was never called as ``model(x)``: its ``forward()`` is
called directly (``layer.forward(x)``, as forward-forward nets write it), so torch's module
hooks never see it and no top-level module holds the optimizer's parameters.

It is found where the optimizer steps instead: among the modules the calling code holds (a
frame's variables, their attributes and the lists kept in those, such as a plain list of
layers), the smallest that holds every parameter the optimizer does. The Monitor on it
watches what needs no module hook (gradients, updates, the loss, the optimizer's steps) and
says what is missing (UNSEEN_LAYERS, info).
"""
import sys


def module_holding(held, *, libraries, depth=40):
    """The smallest module the code up the stack holds whose parameters include every id in
    ``held``; None when there is none. Frames of ``libraries`` (torch's, gradhunt's) are
    passed over."""
    import torch

    best, frame = None, sys._getframe(1)
    for _ in range(depth):
        if frame is None:
            break
        module = str(frame.f_globals.get("__name__", ""))
        if module.split(".")[0] not in libraries:
            for candidate in _modules_in(frame.f_locals, torch.nn.Module):
                try:
                    params = {id(p) for p in candidate.parameters()}
                except Exception:   # a module that cannot list them is not the one
                    continue
                if held <= params and (best is None or len(params) < best[0]):
                    best = (len(params), candidate)
        frame = frame.f_back
    return None if best is None else best[1]


def _modules_in(namespace, module_type):
    """The modules among ``namespace``'s values, their attributes, and the lists and tuples
    held in those attributes (one level each)."""
    for value in list(namespace.values()):
        if isinstance(value, module_type):
            yield value
        attributes = getattr(value, "__dict__", None)
        if not isinstance(attributes, dict) or isinstance(value, type):
            continue
        for inner in list(attributes.values()):
            if isinstance(inner, module_type):
                yield inner
            elif isinstance(inner, (list, tuple)):
                yield from (item for item in inner if isinstance(item, module_type))
