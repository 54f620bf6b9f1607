"""``Adam`` (and AMSGrad), exactly torch's update with bias correction."""
import numpy as np

from .optimizer import Optimizer


class Adam(Optimizer):
    """Moment estimates ``exp_avg``, ``exp_avg_sq`` per parameter, ``step`` counted per parameter.

    ``p -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)``, with
    ``weight_decay`` added to the gradient (L2, not decoupled), as ``torch.optim.Adam``.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for index, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise ValueError(f"Invalid beta parameter at index {index}: {beta}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                    "amsgrad": amsgrad}
        super().__init__(params, defaults)

    def _update(self, param, grad, group):
        beta1, beta2 = group["betas"]
        state = self.state.get(param)
        if not state:
            state = self.state[param] = _initial_state(param, group["amsgrad"])
        state["step"] += 1
        step = state["step"]
        if group["weight_decay"] != 0:
            grad = grad + group["weight_decay"] * param.data
        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        exp_avg *= beta1
        exp_avg += (1 - beta1) * grad
        squared = np.square(grad)
        squared *= 1 - beta2
        exp_avg_sq *= beta2
        exp_avg_sq += squared
        if group["amsgrad"]:
            np.maximum(state["max_exp_avg_sq"], exp_avg_sq, out=state["max_exp_avg_sq"])
            second = state["max_exp_avg_sq"]
        else:
            second = exp_avg_sq
        step_size = group["lr"] / (1 - beta1**step)
        denom = np.sqrt(second, out=squared)
        denom /= (1 - beta2**step) ** 0.5
        denom += group["eps"]
        update = np.divide(exp_avg, denom, out=denom)
        update *= step_size
        param.data -= update


def _initial_state(param, amsgrad):
    state = {"step": 0, "exp_avg": np.zeros_like(param.data),
             "exp_avg_sq": np.zeros_like(param.data)}
    if amsgrad:
        state["max_exp_avg_sq"] = np.zeros_like(param.data)
    return state
