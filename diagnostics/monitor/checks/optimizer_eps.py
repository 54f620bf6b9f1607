"""An optimizer ``eps`` that the parameters' dtype rounds to 0 or to a subnormal
(EPS_UNDERFLOWS, read off the param groups by ``probes/optimizer_eps.py``)."""
import math

from ...findings import Finding
from ..probes.optimizer_eps import EpsUnderflow


def eps_underflows(view):
    underflow = view.signal(EpsUnderflow)
    return [eps_finding(lost) for lost in underflow.lost] if underflow is not None else []


def eps_finding(lost):
    """The EPS_UNDERFLOWS finding for one ``probes.optimizer_eps.LostEps`` (also preflight's)."""
    if lost.value == 0:
        held = f"is 0 in {lost.dtype}"
        effect = "sqrt(v) + eps is exactly 0 and the update m / 0 is inf or NaN"
    else:
        held = (f"is {lost.value:.3g} in {lost.dtype} (a subnormal "
                f"{abs(lost.value - lost.eps) / lost.eps:.0%} off)")
        effect = (f"the update divides by {lost.value:.3g}, not by the eps set, and "
                  f"jumps by m / eps")
    fix = f"1e{math.ceil(math.log10(lost.tiny))}"     # float16: 1e-4
    return Finding(
        "EPS_UNDERFLOWS", "warning", "optimizer",
        f"{lost.optimizer}'s eps={lost.eps:g} {held}, the dtype of {lost.tensors} of its "
        f"parameter tensors ({lost.values:,} values): wherever v, the running mean of "
        f"squared gradients kept in {lost.dtype}, underflows to 0 (small gradients), "
        f"{effect}",
        f"set eps={fix} (at least {lost.dtype}'s smallest normal, {lost.tiny:.3g}) for pure "
        f"{lost.dtype} weights; or keep the weights in float32 and compute in "
        f"{lost.dtype} under torch.autocast (with a GradScaler for float16): the optimizer "
        f"then works in float32",
        {"optimizer": lost.optimizer, "eps": lost.eps, "dtype": lost.dtype,
         "eps_in_dtype": lost.value, "tensors": lost.tensors, "values": lost.values,
         "param_groups": list(lost.groups)})


CHECKS = (eps_underflows,)
