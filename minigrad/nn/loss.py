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
    """Log-softmax + NLL over dim 1; targets are int64 class indices or class probabilities.

    ``ignore_index`` and ``label_smoothing`` as in torch (see ``functional.cross_entropy``).
    """

    def __init__(self, *, ignore_index=-100, reduction="mean", label_smoothing=0.0):
        super().__init__(reduction=reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, reduction=self.reduction)
