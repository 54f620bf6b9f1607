"""``Finding``: one diagnosis, with a code from a fixed vocabulary like a linter's rule codes."""
from dataclasses import dataclass, field

from .jsonable import to_jsonable

SEVERITIES = ("info", "warning", "error")

CODES = {
    "NAN_LOSS": "the loss is NaN or infinite",
    "LOSS_DIVERGING": "the loss grows",
    "LOSS_OSCILLATING": "the loss jumps up and down without trend",
    "LOSS_PLATEAU": "the loss stopped changing",
    "LOSS_AT_CHANCE": "the loss sits at the value of a uniform guess",
    "BAD_INIT_LOSS": "the loss at initialisation is far from -log(1/C)",
    "DEAD_UNITS": "units that never activate",
    "SATURATED_ACTIVATIONS": "sigmoid/tanh outputs pinned at their limits",
    "EXPLODING_ACTIVATIONS": "activations grow very large",
    "COLLAPSED_ACTIVATIONS": "activations with (almost) no variation",
    "VANISHING_GRADIENTS": "gradients shrink towards the input layers",
    "EXPLODING_GRADIENTS": "gradient norms blow up",
    "STALE_GRADIENTS": "gradients pile up across steps (zero_grad missing)",
    "NO_GRADIENT": "parameters that never receive a gradient",
    "PARAMS_NOT_UPDATING": "gradients present but parameters unchanged",
    "PARAMS_NOT_IN_OPTIMIZER": "parameters that get gradients but that no optimizer holds",
    "GRADIENT_MISMATCH": "analytic gradient disagrees with finite differences",
    "OVERFIT_FAILED": "the model cannot overfit a single batch",
    "TRAIN_MODE_AT_EVAL": "dropout or batch norm in train mode during evaluation",
    "SHAPE_BROADCAST": "output and target shapes broadcast silently in the loss",
    "LABEL_DTYPE": "labels of the wrong dtype for the loss",
    "UNNORMALIZED_INPUT": "inputs far from zero mean, unit variance",
    "DATA_NONFINITE": "NaN or infinite values in the data",
    "DATA_LEAKAGE": "the same examples in train and test",
    "LABEL_IMBALANCE": "one class outnumbers another by more than 10:1",
    "GRAPH_RETAINED": "the autograd graph is kept alive across steps",
    "BATCH_MIXING": "an example's output depends on other examples in the batch",
    "CAUSALITY_LEAK": "a causal model's output at position t depends on later positions",
    "BATCH_POSITION_DEPENDENT": "an example's output depends on its row in the batch",
    "PADDING_CHANGES_OUTPUT": "an example's output changes when the batch is padded longer",
    "TARGETS_MISALIGNED": "a language model's loss scores position t against another token "
                          "than t + 1 (labels not shifted, or shifted twice)",
    "LABEL_RANGE": "targets use a class the output lacks, or never use one it has",
    "IGNORED_CLASS": "a loss's ignore_index is a real class: its targets inside the content "
                     "never reach the loss",
    "PADDING_SCORED": "padding makes up most of the positions a loss scores",
    "LABELS_SORTED": "training batches hold labels sorted by class (data not shuffled)",
    "UNSEEN_LAYERS": "layers the Monitor cannot take statistics of (info)",
    "TRAINING_IN_EVAL_MODE": "training steps taken with dropout and batch norm in eval mode",
    "DROPOUT_IGNORES_EVAL": "dropout still drops in eval mode (F.dropout without training=)",
    "PROBABILITIES_AS_LOGITS": "probabilities fed to a loss that expects logits or "
                               "log-probabilities",
    "SCORES_AS_LOG_PROBABILITIES": "raw scores fed to a loss that expects log-probabilities "
                                   "(NLL, CTC, KL-divergence's input)",
    "TARGET_CARRIES_GRADIENT": "a loss's target is computed by the trained network with its "
                               "graph: the loss moves the target too",
    "TARGET_NETWORK_FROZEN": "the copy of the trained network that computes the loss's "
                             "targets (a target network, an EMA teacher) is never refreshed",
    "TERM_DETACHED": "a term of the loss reaches only another network's parameters, whose "
                     "gradient is cleared unused: the term trains nothing",
    "AMP_OVERFLOW": "fp16 gradients overflow: the GradScaler keeps skipping steps",
    "RANKS_DIVERGED": "parameters differ across the ranks of a distributed job",
    "GRADIENTS_NOT_SYNCED": "gradients not averaged across ranks (not reduced, or summed)",
    "SAME_BATCH_ON_RANKS": "every rank reads the same batches (no DistributedSampler)",
    "RANK_STOPPED": "a rank of a distributed job stopped taking part (raised or hung)",
    "BUFFERS_DIVERGED": "buffers (batch-norm statistics) differ across the ranks of a "
                        "distributed job",
    "MONITOR_ERROR": "a probe or check of the Monitor raised and was turned off (info)",
    "LR_SCHEDULE_TOO_FAST": "the learning rate's schedule is consumed in a small part of the "
                            "run, or cycles (per-epoch settings stepped per batch)",
    "LR_WARMUP_NEVER_ENDS": "a warm-up so slow it never reaches the base rate (per-step "
                            "settings stepped per epoch)",
    "ACCUMULATION_DISCARDED": "gradients of earlier micro-batches are zeroed before the step",
    "GRADIENTS_CLEARED_BEFORE_STEP": "the gradients are cleared between backward and the "
                                     "optimizer step that was to apply them",
    "CLIP_HAS_NO_EFFECT": "a gradient-clipping call that does not act on the gradients the "
                          "step applies (misplaced, or given no gradients)",
    "CLIP_BEFORE_UNSCALE": "gradients clipped while a GradScaler still scales them",
    "EPS_UNDERFLOWS": "an optimizer eps that the parameters' dtype rounds to 0",
    "VIEW_SCRAMBLES_AXES": "a view or reshape moves axes where a permute was meant",
    "UNREGISTERED_PARAMETERS": "tensors with gradients that are not parameters of the model "
                               "and never change (layers in a plain Python list)",
    "MODULE_REUSED": "one module object registered several times in one container "
                     "([module] * n): the layers share their weights",
    "MODULE_BACKWARD_IGNORED": "a module class defines backward(), which autograd never calls",
    "BATCHNORM_MOMENTUM_INVERTED": "a batch-norm momentum above 0.5 (another framework's "
                                   "convention): eval uses about the last batch's statistics",
    "FROZEN_BATCHNORM_DRIFTS": "batch-norm layers with frozen parameters that keep updating "
                               "their running statistics in train mode",
    "STEP_NOT_OBJECTIVE": "the training step applies a gradient other than the loss's on the "
                          "whole batch (a constant factor, micro-batch means weighted equally, "
                          "rows dropped, a part counted twice)",
    "LR_SWEEP_EDGE": "find_lr's lowest loss sits at an end of its sweep: the range did not "
                     "bracket a minimum",
    "PIPELINE_ROWS_MISSING": "one pass over a Dataset/DataLoader yields some examples twice "
                             "and never others (a sampler, __getitem__ or __len__ that "
                             "loses rows)",
    "TRANSFORM_SHIFT": "train and test inputs differ per channel after their transforms "
                       "(normalisation on one split only, other constants, /255, channels "
                       "swapped)",
    "TRANSFORM_ONE_SIDED": "a random flip, crop or shift applied to the input but not to "
                           "its aligned target (mask, per-step labels)",
    "OPTIMIZER_NOT_WATCHED": "gradhunt watch: an optimizer stepped whose parameters belong to "
                             "no module the script calls (built before a layer was replaced, "
                             "or over a copy): not watched",
    "STEPS_SKIPPED": "the step guard kept bad optimizer steps (NaN/inf or spiking gradients) "
                     "from being applied, or retried transient faults",
}


@dataclass(frozen=True)
class Finding:
    """A diagnosis: what (``code``), how bad, where, in words, what to try, and the numbers.

    A training Monitor also says when: ``first_step`` and ``last_step`` the condition was seen
    (the steps whose checks found it), and ``resolved_at``, the step from which it no longer
    held (None while it holds). ``follows_from`` names the finding in the same report that
    causes this one (``diagnostics.causes``). These do not take part in equality: the same
    diagnosis seen at other steps is the same finding.
    """

    code: str
    severity: str
    location: str | None
    message: str
    suggestion: str = ""
    evidence: dict = field(default_factory=dict)
    first_step: int | None = field(default=None, compare=False)
    last_step: int | None = field(default=None, compare=False)
    resolved_at: int | None = field(default=None, compare=False)
    follows_from: str | None = field(default=None, compare=False)   # "CODE at location"

    def __post_init__(self):
        if self.code not in CODES:
            raise ValueError(f"Finding.code: unknown code {self.code!r}; known: {sorted(CODES)}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"Finding.severity: expected one of {SEVERITIES}, "
                             f"got {self.severity!r}")

    @property
    def is_alarm(self) -> bool:
        """A warning or an error: what fails a check and leads a report (an info never does)."""
        return self.severity != "info"

    @property
    def resolved(self):
        """True once the condition stopped holding (a Monitor's history keeps it)."""
        return self.resolved_at is not None

    def to_dict(self):
        steps = {name: getattr(self, name)
                 for name in ("first_step", "last_step", "resolved_at", "follows_from")
                 if getattr(self, name) is not None}
        return to_jsonable({"code": self.code, "severity": self.severity,
                            "location": self.location, "message": self.message,
                            "suggestion": self.suggestion, "evidence": self.evidence, **steps})

    @property
    def where(self):
        """The location in words, for a line of your own (``f"{f.code} {f.where}"``): the
        module, parameter, ``loss`` or ``data``; ``the model`` for its root module (``""``);
        ``model-wide`` for a finding about no one place (``location`` None)."""
        if self.location is None:
            return "model-wide"
        return self.location or "the model"

    def __str__(self):
        where = f" at {self.location}" if self.location else ""
        text = f"[{self.severity}] {self.code}{where}: {self.message}"
        if self.follows_from:
            text += f" (follows from {self.follows_from})"
        return f"{text}\n    try: {self.suggestion}" if self.suggestion else text
