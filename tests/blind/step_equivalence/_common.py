"""Helpers shared by the pairs: the gradient a step leaves in ``.grad`` against the gradient of
the objective (``loss_fn`` on the whole batch), measured with plain torch autograd."""
import copy

import torch


def call_model(model, inputs):
    return model(**inputs) if isinstance(inputs, dict) else model(inputs)


def flat_grad(model):
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).detach().reshape(-1)
                      for p in model.parameters()])


def grad_of(model, loss_of_model):
    """Gradient of ``loss_of_model(copy)`` on a fresh copy of ``model`` (model is untouched)."""
    ref = copy.deepcopy(model)
    ref.zero_grad(set_to_none=True)
    loss = loss_of_model(ref)
    loss.backward()
    return flat_grad(ref), float(loss.detach())


def compare(g, g_ref):
    """scale: least-squares factor g ~ scale * g_ref; rel: |g - g_ref| / |g_ref|; cos."""
    nref = g_ref.norm()
    return {
        "scale": float(g @ g_ref / (nref ** 2)),
        "rel": float((g - g_ref).norm() / nref),
        "cos": float(torch.nn.functional.cosine_similarity(g, g_ref, dim=0)),
    }


def measure_step(objs, effective_loss=None):
    """Run the user's train_step once on ``objs``' batch; return its gradient compared with the
    objective's gradient (and with the hand-written effective objective's gradient, if given)."""
    model, inputs, targets = objs["model"], objs["inputs"], objs["targets"]
    g_true, true_loss = grad_of(model, lambda m: objs["loss_fn"](call_model(m, inputs), targets))
    g_eff = None
    if effective_loss is not None:
        g_eff, _ = grad_of(model, lambda m: effective_loss(m, inputs, targets))
    reported = objs["train_step"](model, (inputs, targets), objs["optimizer"])
    g_step = flat_grad(model)
    out = {"true_loss": true_loss,
           "reported_loss": None if reported is None else float(reported),
           "vs_true": compare(g_step, g_true)}
    if g_eff is not None:
        out["vs_effective"] = compare(g_step, g_eff)
    return out
