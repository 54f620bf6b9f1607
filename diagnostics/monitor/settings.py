"""``Thresholds``: every number a Monitor check compares against, with its reason."""
from dataclasses import dataclass

DEFAULT_EVERY = 50   # statistics on the first two iterations, then on every 50th
DEFAULT_WINDOW = 10  # sampled steps kept for the checks that look back (missing gradients,
                     # parameters that never move, gradient growth)


@dataclass(frozen=True)
class Thresholds:
    """The numbers behind the findings. The defaults stay quiet on healthy networks.

    The loss is recorded on every step, sampled or not. Loss checks start once
    ``loss_min_steps`` losses exist and look at the last ``min(loss_window, max(loss_min_steps,
    steps // 2))`` of them, comparing medians of their first and last quarter, so minibatch
    noise does not trip them.
    """

    # checks of a state (activations, gradient flow, input) take the last few sampled steps
    recent_samples: int = 3
    # DEAD_UNITS: a unit is dead when its output was exactly 0 on every value it gave in the
    # last ``dead_samples`` sampled steps
    dead_samples: int = 5
    dead_fraction: float = 0.5          # warning when this share of a ReLU layer's units is dead
    dead_fraction_error: float = 0.8    # error from here on
    dead_min_examples: int = 64         # values per unit needed before a unit is judged...
    dead_min_samples: int = 3           # ...from this many sampled steps (not one batch)
    # SATURATED_ACTIVATIONS: sigmoid output within 0.01 of 0 or 1, tanh within 0.01 of ±1
    saturated_fraction: float = 0.3
    # EXPLODING_ACTIVATIONS: root mean square of a layer's output
    activation_rms: float = 100.0
    # COLLAPSED_ACTIVATIONS: every unit's range over the batch below this share of its magnitude
    collapse_tolerance: float = 1e-6
    # VANISHING_GRADIENTS: a layer's gradient RMS below this share of the largest layer's
    vanishing_ratio: float = 1e-4
    # EXPLODING_GRADIENTS: total gradient norm above this, or grown by this factor in the window
    gradient_norm: float = 1e4
    gradient_growth: float = 1e3
    clip_percentile: float = 10.0       # the suggested clip value: this percentile of the history
    # loss health
    loss_min_steps: int = 50
    loss_window: int = 200
    diverging_factor: float = 2.0       # recent median above this times the earlier median
    # ...or above twice the best level, having given back this share of the progress from the
    # first loss to the best: a loss that converged to near 0 doubles on noise alone
    diverging_rebound_share: float = 0.25
    # a loss that has been below 0 has no floor at 0 (a policy-gradient surrogate, a Gaussian
    # NLL): ratios to its level mean nothing, so it diverges only when its recent median rose
    # above the earlier one by this many times the spread (median absolute deviation) of the
    # earlier quarter, and is not judged for oscillation or plateau
    signed_diverging_spread: float = 50.0
    oscillation_amplitude: float = 0.5  # median step-to-step jump, relative to the loss level
    plateau_change: float = 0.01        # relative change of the loss level across the window
    plateau_progress: float = 0.1       # a plateau is reported while progress since start is below
    # ...and while the trainable weights moved less than this share of their norm across the
    # flat window (probes/travel.py): weights that travel that far while the loss stays level
    # are in a phase of training (terms of the loss trading off), not stalled
    plateau_travel: float = 0.1
    chance_tolerance: float = 0.05      # LOSS_AT_CHANCE: within 5% of -log(1/C)...
    chance_entropy: float = 0.9         # ...with the softmax's mean entropy >= 90% of ln C
    # UNNORMALIZED_INPUT: root mean square of the model's input outside [low, high]
    input_rms_high: float = 5.0
    input_rms_low: float = 1e-3
    # a loss that does not move, with at least this share of the model's values frozen
    # (requires_grad=False): the finding says so
    frozen_share: float = 0.5
    # AMP_OVERFLOW with a GradScaler: at least ``amp_skipped_share`` of the last
    # ``amp_recent_steps`` steps skipped, or the scale fallen ``amp_scale_fall`` times below
    # its reference (finding a scale halves it a few times: 2**10 is far past that)
    amp_recent_steps: int = 64
    amp_skipped_share: float = 0.5
    amp_scale_fall: float = 2.0 ** 10
    # ... without one: ``amp_skipped_samples`` sampled steps skipped in a row over at least
    # ``amp_skipped_span`` steps (more than finding a scale takes)
    amp_skipped_samples: int = 3
    amp_skipped_span: int = 64
    # TRAINING_IN_EVAL_MODE: eval-mode training steps in a row before it is a finding, not a
    # moment (a validation pass whose model.train() comes a step late)
    eval_mode_min_steps: int = 5
    # EXPLODING_GRADIENTS of the per-step tier: the norm against the median of the last
    # ``spike_history`` steps, judged once ``spike_min_history`` are known; a spike is above
    # ``spike_factor`` times the median and above exp(``spike_spread`` * MAD of the log norms)
    # times it (a run whose norm wanders needs a larger jump)
    spike_history: int = 50
    spike_min_history: int = 10
    spike_factor: float = 100.0
    spike_spread: float = 10.0
    # TERM_DETACHED: sampled steps at which a term's gradient was seen cleared unused before
    # it is reported (one is a moment: a loop that skips one network's step once)
    detached_term_verdicts: int = 2
    # UNREGISTERED_PARAMETERS: sampled steps a tensor outside the model and the optimizer is
    # seen at, unchanged, before it is reported (a tensor edited by hand changes once)
    unregistered_sightings: int = 3
    # a moving target (another optimizer trains what the loss depends on): the tensor changed
    # at this many sampled steps: trained, not edited once
    moving_target_changes: int = 2
    # TARGET_NETWORK_FROZEN: optimizer steps a target network may stay bit for bit unchanged
    # before a refresh that never runs is reported: the longest published hard period (the
    # Nature DQN's target update every 10,000 parameter updates)
    target_refresh_period: int = 10_000

    def loss_window_steps(self, steps):
        """How many of the last losses the loss checks judge once ``steps`` of them exist."""
        return min(self.loss_window, max(self.loss_min_steps, steps // 2))
