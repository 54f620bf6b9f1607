"""``AdamW``: Adam with decoupled weight decay, exactly ``torch.optim.AdamW``'s update."""
from .adam import Adam


class AdamW(Adam):
    """``p *= 1 - lr * weight_decay`` before the Adam step, instead of adding the decay to the
    gradient (Loshchilov & Hutter): the decay is not rescaled by the second moment.
    The default ``weight_decay`` is 1e-2, as in torch.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad)

    def _update(self, param, grad, group):
        if group["weight_decay"] != 0:
            param.data *= 1 - group["lr"] * group["weight_decay"]
        super()._update(param, grad, dict(group, weight_decay=0.0))
