"""Blind pairs: BatchNorm layers of a frozen network still updating their running statistics.

Root cause: Freezing a pretrained network (or part of it) by setting `requires_grad_(False)` on
its parameters does not freeze its BatchNorm layers: in train mode they keep updating their
running mean and variance from every batch, so the 'frozen' features drift away from the
statistics they were trained with (and, on a new domain or with small batches, away from
anything useful), and evaluation in eval mode uses those drifted statistics. The usual fixes are
to keep the frozen BatchNorm layers in eval mode during training (override `train()` or call
`.eval()` on them after `model.train()`), or to replace them with a frozen BatchNorm. A user must
be told which BatchNorm layers have frozen parameters but still update their running statistics
in train mode, and the fix. Deliberately adapting BatchNorm statistics to a new domain (AdaBN:
running statistics re-estimated with the parameters frozen, on purpose, usually with
momentum=None or under no_grad passes only) is a design choice, not this bug — but it still is
what the check would see, so the healthy programs should instead show the common healthy idioms:
frozen backbone with its BatchNorms in eval mode; a fully trainable network with BatchNorm.

Each program "pretrains" a model on domain/task A inside itself (no gradhunt), freezes it (or
part of it), and trains a new head/branch for task B on a new domain (other scale and offset);
the metric covers the old task too, which a frozen model is meant to keep:
- cnn_new_head: CNN (Conv2d-BatchNorm2d), plain loop, SGD+momentum, batch 16,
  ``model.features.requires_grad_(False)`` then ``model.train()``; fix ``model.features.eval()``.
  Mean accuracy A/B: buggy 0.588 (A 0.512), fixed 0.817 (A 0.984).
- mlp_backbone_trainer: MLP regressor (Linear-BatchNorm1d) as timm-style ``model.backbone``,
  Trainer class, Adam, batch 32, ``p.requires_grad = False`` loop; fix: ``train()`` overridden to
  keep the frozen backbone in eval mode. Mean MSE A/B: buggy 1.04 (A 1.75), fixed 0.189 (A 0.006).
- conv1d_partial_freeze: 1-D CNN (Conv1d-BatchNorm1d) on signals, ``train_step`` function, AdamW,
  batch 8, only the stem + old branch frozen (new branch has its own trainable BatchNorm); fix:
  the stem's BatchNorm replaced by a FrozenBatchNorm1d. Mean accuracy: buggy 0.617 (A 0.266),
  fixed 0.971 (A 0.974).
- lightning_embedding_bag: bag-of-words encoder (EmbeddingBag + BatchNorm1d) in a
  LightningModule, RMSprop, batch 16, ``self.encoder.requires_grad_(False)`` in ``__init__``;
  fix: ``on_train_epoch_start`` puts the encoder in eval mode. Mean accuracy: buggy 0.652
  (reviews 0.352), fixed 0.905 (reviews 0.856).
HEALTHY (quiet test only): healthy_full_finetune, a pretrained BatchNorm CNN fine-tuned end to
end, every parameter trainable (accuracy 0.978).

When written (before any check): (1) holds on all 4 pairs, (3) on all 4 fixed twins and the
healthy program; (2) fails on all 4: the Monitor reports NO warning or error on any buggy
program today (all in MISSED). The whole file takes ~30 s of CPU (Lightning start-up included).
"""
from tests.blind import pairs

MODULES = [
    "cnn_new_head",
    "mlp_backbone_trainer",
    "conv1d_partial_freeze",
    "lightning_embedding_bag",
]
HEALTHY = ["healthy_full_finetune"]
MISSED: set = set()

RUNS = pairs.Monitored(__package__)
test_bug_is_real = pairs.each(MODULES, RUNS.bug_is_real)
test_buggy_named_at_root_cause_first = pairs.each(MODULES, RUNS.named_first, xfail=MISSED)
test_fixed_twin_quiet = pairs.each(MODULES + HEALTHY, RUNS.quiet)
