"""The gradient a step applies, read at its ``optimizer.step()`` (for a closure optimizer:
after the closure's first evaluation), against the gradient of ``loss_fn`` on the whole batch,
measured with plain torch autograd on deep copies. Helpers from the first writer's folder."""
from tests.blind.step_equivalence._common import call_model, compare, flat_grad, grad_of


def step_gradient(objs):
    """Run ``train_step`` once; return (the gradient held at its single optimizer.step(), the
    step's reported loss)."""
    model, opt = objs["model"], objs["optimizer"]
    snaps = []

    def pre(optimizer, args, kwargs):
        # args holds the optimizer itself first, then the closure if passed positionally
        closure = args[1] if len(args) > 1 else kwargs.get("closure")
        if closure is None:
            snaps.append(flat_grad(model).clone())
            return None

        def wrapped():
            out = closure()
            if not snaps:
                snaps.append(flat_grad(model).clone())
            return out
        if len(args) > 1:
            return (args[0], wrapped) + tuple(args[2:]), kwargs
        kw = dict(kwargs)
        kw["closure"] = wrapped
        return args, kw

    handle = opt.register_step_pre_hook(pre)
    try:
        reported = objs["train_step"](model, (objs["inputs"], objs["targets"]), opt)
    finally:
        handle.remove()
    assert len(snaps) == 1, f"expected one optimizer step, saw {len(snaps)}"
    return snaps[0], reported


def measure(objs, effective_loss=None):
    model, inputs, targets = objs["model"], objs["inputs"], objs["targets"]
    g_true, true_loss = grad_of(model, lambda m: objs["loss_fn"](call_model(m, inputs), targets))
    g_eff = None
    if effective_loss is not None:
        g_eff, _ = grad_of(model, lambda m: effective_loss(m, inputs, targets))
    g_step, reported = step_gradient(objs)
    out = {"true_loss": true_loss,
           "reported_loss": None if reported is None else float(getattr(reported, "detach", lambda: reported)()),
           "vs_true": compare(g_step, g_true), "g_step": g_step, "g_true": g_true}
    if g_eff is not None:
        out["vs_effective"] = compare(g_step, g_eff)
    return out
