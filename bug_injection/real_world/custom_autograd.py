"""Real-world bugs in custom autograd Functions: backward passes that drop grad_output.

Each Function is written for torch (``torch.autograd.Function``: tensors in ``forward``) and,
for its minigrad twin, for minigrad (``minigrad.Function``: NumPy arrays in ``forward`` and
``backward``); the backward, where the bug sits, is the same line in both.
"""
import numpy as np

from .case import Case, blobs, framework_module, nll_loss, tensors
from .entry import BACKENDS, DIAGNOSED, Entry


def _function_base(framework):
    fw = framework_module(framework)
    return fw.autograd.Function if framework == "torch" else fw.Function


def _isrlu_model(bug, framework):
    fw = framework_module(framework)
    nn = fw.nn
    on_torch = framework == "torch"

    class ISRLUFunction(_function_base(framework)):
        """ISRLU(x) = x / sqrt(1 + alpha x^2) for x < 0, x otherwise."""

        @staticmethod
        def forward(ctx, x, alpha=1.0):
            nisr = (fw.rsqrt(1.0 + alpha * fw.clamp(x, max=0) ** 2) if on_torch
                    else 1.0 / np.sqrt(1.0 + alpha * np.minimum(x, 0) ** 2))
            ctx.save_for_backward(nisr)
            return x * nisr

        @staticmethod
        def backward(ctx, grad_out):
            (nisr,) = ctx.saved_tensors
            return (nisr ** 3 if bug else grad_out * nisr ** 3), None

    class ISRLU(nn.Module):
        def forward(self, x):
            return ISRLUFunction.apply(x, 1.0)

    fw.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), ISRLU(), nn.Linear(16, 4))
    x, y = tensors(*blobs(seed=22), framework=framework)
    return Case(model=model, loss_fn=nn.CrossEntropyLoss(), inputs=x[:8], targets=y[:8])


def _product_model(bug, framework):
    fw = framework_module(framework)
    nn = fw.nn
    on_torch = framework == "torch"

    def row_product(x):
        return x.prod(dim=1, keepdim=True) if on_torch else x.prod(axis=1, keepdims=True)

    class ProdFunction(_function_base(framework)):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return row_product(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            others = row_product(x) / x
            return others if bug else grad * others

    class Gate(nn.Module):
        """A multiplicative gate: the product of a few squashed features."""

        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 3)

        def forward(self, x):
            return ProdFunction.apply(self.proj(x).sigmoid() + 0.5)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = Gate()
            self.body = nn.Linear(8, 4)

        def forward(self, x):
            return self.body(x) * -self.gate(x)

    fw.manual_seed(0)
    x, y = tensors(*blobs(seed=23), framework=framework)
    return Case(model=Net(), loss_fn=nn.CrossEntropyLoss(), inputs=x[:8], targets=y[:8])


def _total_scores_model(bug, framework):
    fw = framework_module(framework)
    nn = fw.nn
    on_torch = framework == "torch"

    class TotScores(_function_base(framework)):
        """The total score log(sum(exp(arc scores))); its derivative is the arc posterior."""

        @staticmethod
        def forward(ctx, scores):
            if on_torch:
                total = fw.logsumexp(scores, dim=1)
            else:
                top = scores.max(axis=1)
                total = top + np.log(np.exp(scores - top[:, None]).sum(axis=1))
            ctx.save_for_backward(scores, total)
            return total

        @staticmethod
        def backward(ctx, grad):
            scores, total = ctx.saved_tensors
            posterior = (scores - total[:, None]).exp() if on_torch else np.exp(
                scores - total[:, None])
            return posterior if bug else grad[:, None] * posterior

    class Normalise(nn.Module):
        """Scores minus their total: log-probabilities through the custom total."""

        def forward(self, scores):
            return scores - TotScores.apply(scores)[:, None]

    fw.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4), Normalise())
    x, y = tensors(*blobs(seed=29), framework=framework)
    return Case(model=model, loss_fn=nn.NLLLoss() if on_torch else nll_loss, inputs=x[:8],
                targets=y[:8])


def _mul_constant_model(bug, framework):
    fw = framework_module(framework)
    nn = fw.nn

    class MulConstant(_function_base(framework)):
        """The handbook's example: multiply by a constant that is not a tensor."""

        @staticmethod
        def forward(ctx, x, constant):
            ctx.constant = constant
            return x * constant

        @staticmethod
        def backward(ctx, grad_output):
            return (grad_output if bug else grad_output * ctx.constant), None

    class Scale(nn.Module):
        def forward(self, x):
            return MulConstant.apply(x, 5.0)

    fw.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), Scale(), nn.Linear(16, 4))
    x, y = tensors(*blobs(seed=43), framework=framework)
    return Case(model=model, loss_fn=nn.CrossEntropyLoss(), inputs=x[:8], targets=y[:8])


ENTRIES = (
    Entry(name="backward_ignores_grad_output",
          source="pytorch/pytorch#4355",
          category="custom autograd",
          root_cause="my ISRLU Function's backward returns the local derivative nisr**3 and "
                     "forgets to multiply it by grad_output",
          reproduce=_isrlu_model,
          tool="gradcheck", codes=("GRADIENT_MISMATCH",),
          expected="GRADIENT_MISMATCH at '1', the ISRLU module (check_gradients)",
          location="1", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="prod_backward_drops_sign",
          source="pytorch/pytorch#995",
          category="custom autograd",
          root_cause="the backward of prod does not multiply by grad_output, so the gradient of "
                     "-x.prod() comes out with the wrong sign",
          reproduce=_product_model,
          tool="gradcheck", codes=("GRADIENT_MISMATCH",),
          expected="GRADIENT_MISMATCH at 'gate' (check_gradients)",
          location="gate", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="total_score_backward_ignores_gradient",
          source="k2-fsa/k2#341",
          category="custom autograd",
          root_cause="the backward of get_tot_scores returns the arc posteriors without "
                     "multiplying by the gradient at the output, so the update has the wrong "
                     "sign when the loss is minus the total score",
          reproduce=_total_scores_model,
          tool="gradcheck", codes=("GRADIENT_MISMATCH",),
          expected="GRADIENT_MISMATCH at '3', the normalising module (check_gradients)",
          location="3", status=DIAGNOSED, backends=BACKENDS),
    Entry(name="mul_constant_backward_drops_constant",
          source="zergtant/pytorch-handbook#69",
          category="custom autograd",
          root_cause="the MulConstant example's backward returns grad_output as it is; it "
                     "should be grad_output * ctx.constant, as the built-in multiplication "
                     "gives",
          reproduce=_mul_constant_model,
          tool="gradcheck", codes=("GRADIENT_MISMATCH",),
          expected="GRADIENT_MISMATCH at '2', the MulConstant module (check_gradients)",
          location="2", status=DIAGNOSED, backends=BACKENDS),
)
