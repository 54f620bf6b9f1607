"""``SGD`` with momentum, dampening, weight decay and Nesterov, exactly torch's update rule."""
from .optimizer import Optimizer


class SGD(Optimizer):
    """``p -= lr * v`` with ``v = momentum * v + (1 - dampening) * (g + weight_decay * p)``.

    The momentum buffer starts as the first step's gradient (no dampening on that step), as in
    torch; Nesterov uses ``g + momentum * v`` instead of ``v``.
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = {"lr": lr, "momentum": momentum, "dampening": dampening,
                    "weight_decay": weight_decay, "nesterov": nesterov}
        super().__init__(params, defaults)

    def _update(self, param, grad, group):
        momentum = group["momentum"]
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * param.data
        if momentum != 0:
            state = self.state.setdefault(param, {})
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = state["momentum_buffer"] = grad.copy()
            else:
                buf *= momentum
                buf += (1 - group["dampening"]) * grad
            grad = grad + momentum * buf if group["nesterov"] else buf
        param.data -= group["lr"] * grad
