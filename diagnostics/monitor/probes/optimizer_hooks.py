"""Hooks on a torch optimizer's ``step()``, for the probes that need to know when it runs."""


def add_step_hooks(optimizer, *, before=None, after=None, with_args=False):
    """A step pre-hook calling ``before()`` and a post-hook calling ``after()`` (either may be
    None), as a list of handles with ``remove()``; empty where the optimizer has no hook
    registry (minigrad's). ``with_args=True`` hands them torch's ``(optimizer, args,
    kwargs)`` and lets ``before`` return new ``(args, kwargs)`` for the step, as torch
    allows. A wrapper that does not set up torch's registry (accelerate's
    ``AcceleratedOptimizer``) is hooked through the optimizer it wraps (``.optimizer``)."""
    for candidate in (optimizer, getattr(optimizer, "optimizer", None)):
        register = getattr(candidate, "register_step_pre_hook", None)
        if not callable(register):
            continue
        handles = []
        try:
            if before is not None:
                handles.append(register(before if with_args
                                        else lambda opt, args, kwargs: before()))
        except (AttributeError, TypeError, RuntimeError):
            continue
        if after is not None:
            register_post = getattr(candidate, "register_step_post_hook", None)
            try:
                handles.append(register_post(after if with_args
                                             else lambda opt, args, kwargs: after()))
            except (AttributeError, TypeError, RuntimeError):
                pass                      # no post-hook: the caller does without
        return handles
    return []
