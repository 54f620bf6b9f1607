"""Loss modules, called as ``loss(input, target)``: CrossEntropyLoss, MSELoss, BCEWithLogitsLoss."""
from .. import functional as F
from ..ops.loss import check_reduction
from .module import Module


class _Loss(Module):
    def __init__(self, *, reduction="mean"):
        super().__init__()
        check_reduction(type(self).__name__, reduction)
        self.reduction = reduction

    def extra_repr(self):
        return f"reduction={self.reduction!r}"


class CrossEntropyLoss(_Loss):
    """Log-softmax + NLL over dim 1; targets are int64 class indices or class probabilities."""

    def forward(self, input, target):
        return F.cross_entropy(input, target, reduction=self.reduction)


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, reduction=self.reduction)
