"""Real-world bugs in custom autograd Functions: backward passes that drop grad_output."""
from .case import Case, blobs, tensors, torch_module
from .entry import Entry


def _isrlu_model(bug):
    torch = torch_module()
    nn = torch.nn

    class ISRLUFunction(torch.autograd.Function):
        """ISRLU(x) = x / sqrt(1 + alpha x^2) for x < 0, x otherwise."""

        @staticmethod
        def forward(ctx, x, alpha=1.0):
            nisr = torch.rsqrt(1.0 + alpha * torch.clamp(x, max=0) ** 2)
            ctx.save_for_backward(nisr)
            return x * nisr

        @staticmethod
        def backward(ctx, grad_out):
            (nisr,) = ctx.saved_tensors
            return (nisr ** 3 if bug else grad_out * nisr ** 3), None

    class ISRLU(nn.Module):
        def forward(self, x):
            return ISRLUFunction.apply(x)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), ISRLU(), nn.Linear(16, 4))
    x, y = tensors(*blobs(seed=22))
    return Case(model=model, loss_fn=nn.CrossEntropyLoss(), inputs=x[:8], targets=y[:8])


def _product_model(bug):
    torch = torch_module()
    nn = torch.nn

    class ProdFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.prod(dim=1, keepdim=True)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            partial = x.prod(dim=1, keepdim=True) / x
            return partial if bug else grad * partial

    class Gate(nn.Module):
        """A multiplicative gate: the product of a few squashed features."""

        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 3)

        def forward(self, x):
            return ProdFunction.apply(torch.sigmoid(self.proj(x)) + 0.5)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.gate = Gate()
            self.body = nn.Linear(8, 4)

        def forward(self, x):
            return self.body(x) * -self.gate(x)

    torch.manual_seed(0)
    x, y = tensors(*blobs(seed=23))
    return Case(model=Net(), loss_fn=nn.CrossEntropyLoss(), inputs=x[:8], targets=y[:8])


def _total_scores_model(bug):
    torch = torch_module()
    nn = torch.nn

    class TotScores(torch.autograd.Function):
        """The total score log(sum(exp(arc scores))); its derivative is the arc posterior."""

        @staticmethod
        def forward(ctx, scores):
            total = torch.logsumexp(scores, dim=1)
            ctx.save_for_backward(scores, total)
            return total

        @staticmethod
        def backward(ctx, grad):
            scores, total = ctx.saved_tensors
            posterior = (scores - total[:, None]).exp()
            return posterior if bug else grad[:, None] * posterior

    class Normalise(nn.Module):
        """Scores minus their total: log-probabilities through the custom total."""

        def forward(self, scores):
            return scores - TotScores.apply(scores)[:, None]

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4), Normalise())
    x, y = tensors(*blobs(seed=29))
    return Case(model=model, loss_fn=nn.NLLLoss(), inputs=x[:8], targets=y[:8])


ENTRIES = (
    Entry(name="backward_ignores_grad_output",
          source="pytorch/pytorch#4355",
          category="custom autograd",
          root_cause="my ISRLU Function's backward returns the local derivative nisr**3 and "
                     "forgets to multiply it by grad_output",
          buggy=lambda _: _isrlu_model(True), fixed=lambda _: _isrlu_model(False),
          tool="check_gradients", codes=("GRADIENT_MISMATCH",),
          expected="GRADIENT_MISMATCH at '1', the ISRLU module (check_gradients)",
          location="1",
          status="diagnosed"),
    Entry(name="prod_backward_drops_sign",
          source="pytorch/pytorch#995",
          category="custom autograd",
          root_cause="the backward of prod does not multiply by grad_output, so the gradient of "
                     "-x.prod() comes out with the wrong sign",
          buggy=lambda _: _product_model(True), fixed=lambda _: _product_model(False),
          tool="check_gradients", codes=("GRADIENT_MISMATCH",),
          expected="GRADIENT_MISMATCH at 'gate' (check_gradients)",
          location="gate", status="diagnosed"),
    Entry(name="total_score_backward_ignores_gradient",
          source="k2-fsa/k2#341",
          category="custom autograd",
          root_cause="the backward of get_tot_scores returns the arc posteriors without "
                     "multiplying by the gradient at the output, so the update has the wrong "
                     "sign when the loss is minus the total score",
          buggy=lambda _: _total_scores_model(True), fixed=lambda _: _total_scores_model(False),
          tool="check_gradients", codes=("GRADIENT_MISMATCH",),
          expected="GRADIENT_MISMATCH at '3', the normalising module (check_gradients)",
          location="3",
          status="diagnosed"),
)
