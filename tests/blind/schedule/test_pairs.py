"""Blind pairs: a learning-rate scheduler stepped at another rate than the unit of its settings.

Root cause (the clause of the training-step contract): a scheduler's settings are in the unit it
was built for. A schedule configured in epochs (StepLR(step_size=30), MultiStepLR([30, 80]),
CosineAnnealingLR(T_max=epochs), ExponentialLR(gamma=0.95), PolynomialLR(total_iters=epochs))
whose ``scheduler.step()`` is called every batch consumes its whole decay in a small fraction of
the run: the rate collapses to ~0, or a cosine cycles up and down, and the rest of the run learns
nothing or thrashes (LR_SCHEDULE_TOO_FAST). The mirror image: a warm-up built in optimizer steps
stepped once per epoch never hands over, and the rate stays at a small fraction of its peak for
the whole run (LR_WARMUP_NEVER_ENDS). A user must be told which scheduler, that it is stepped per
batch (or per epoch) while its settings are in the other unit, what the rate did, and the fix.

Each module under this folder is a small training program written from that paragraph and the
README alone; each exposes ``EXPECTED`` and ``run(fixed=, monitor=)``. For every module:
(1) the bug is real: the fixed twin's own quality number is clearly better than the buggy one's;
(2) the Monitor's first alarm (warning or error) on the buggy program is ``EXPECTED``;
(3) the Monitor raises no warning or error on the fixed twin.

When written (before any check for these pairs): (1) held on all 7 pairs and (3) on all 7 fixed
twins; (2) held on transformer_cosine and mlp_polynomial only. cnn_steplr and lstm_multistep got
LOSS_PLATEAU + LOSS_AT_CHANCE, bow_exponential LOSS_PLATEAU, and the two warm-ups
(mlp_warmup, attention_linear_warmup) no alarm at all. The whole file takes ~40 s of CPU.
"""
from tests.blind import pairs

MODULES = [
    "cnn_steplr",
    "lstm_multistep",
    "transformer_cosine",
    "bow_exponential",
    "mlp_polynomial",
    "mlp_warmup",
    "attention_linear_warmup",
]

RUNS = pairs.Monitored(__package__)
test_bug_is_real = pairs.each(MODULES, RUNS.bug_is_real)
test_buggy_named_at_root_cause_first = pairs.each(MODULES, RUNS.named_first)
test_fixed_twin_quiet = pairs.each(MODULES, RUNS.quiet)
