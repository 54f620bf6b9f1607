"""Blind DISTANT pairs: a training step whose gradient is not the gradient of the objective it
claims.

Root cause (the same paragraph as tests/blind/step_equivalence/): a training step can compute a
gradient other than the gradient of the objective it claims to minimise, while the loop trains
and prints a plausible loss. Gradient accumulation that averages per-micro-batch mean losses
(each micro-batch's token-mean loss divided by the number of micro-batches) instead of
normalising by the whole window's count of scored tokens: micro-batches with few real tokens
are over-weighted (trl issue #2175, fixed in transformers PR #34191). A loss divided by the
accumulation steps twice, or summed where a mean was meant (a constant factor on the
gradient). A micro-batch loop that drops the last rows of the batch, or a split that skips a
part. A part counted twice. Also a term the step adds that the stated objective lacks, and an
objective that is not decomposable over rows (in-batch negatives) computed per micro-batch.
The user must be told that the step's gradient is not the gradient of the loss on the whole
batch, by how much, and in which pattern.

These are distant variants written after the first writer's pairs, from that paragraph, the
README and the API ``gradhunt.check_step_equivalence(model, loss_fn, inputs, targets,
train_step=..., optimizer=...)`` only (the check's code unread). Each module exposes
``EXPECTED = (code, keyword)`` (keyword "" = any STEP_NOT_OBJECTIVE warning/error counts),
``build(fixed)`` and, for the buggy ones, ``effective_loss`` (what the buggy step minimises, by
hand). "Bug is real" is measured with torch autograd alone (``_measure.py``): the gradient held
at the step's single ``optimizer.step()`` (for L-BFGS: after the closure's first evaluation)
against ``loss_fn``'s gradient on the whole batch: the buggy one differs by > 5% relative and
equals the effective objective's (rel < 1e-4); the fixed twin's equals the objective's
(rel < 1e-5).

Pairs (measured CPU torch 2.13, OMP_NUM_THREADS=1; buggy step gradient vs the objective's:
least-squares scale / rel. error / cosine; every fixed twin rel <= 3e-7):
- seq2seq_collate_mean_of_means ("weighted equally"): transformer-encoder + GRU-decoder with
  attention, keyword inputs {src, tgt_in}, -100 padded labels, length-bucketed batch; a
  DataLoader over row indices with a custom collate_fn trimming padding; token-mean CE /
  len(loader); NAdam. scale 1.111, rel 0.300, cos 0.970; reported 2.838 vs 2.829.
- conv1d_sum_over_microbatch_count ("scaled by"): 1-D CNN with GroupNorm, 30 rows in
  micro-batches of 8 (8,8,8,6) from a generator; CE(reduction="sum") / n_micro (4); plain SGD.
  scale 7.500 (cos 1.0); reported 10.76 vs 1.434.
- patch_attention_step_condition_skips_remainder ("dropped"): tiny ViT; optimizer.step()
  inside the loop behind ``(i + 1) % accum_steps == 0`` with accum_steps = n // mb = 4 for
  five micro-batches (36 rows / 8): rows 32..35 backward after the step; AdamW.
  scale 0.880, rel 0.165, cos 0.992.
- attnpool_gradscaler_divided_twice ("scaled by"): MultiheadAttention classifier with
  attention pooling; torch.amp.GradScaler("cpu"), unscale_ + clip (never acts) + scaler.step;
  compute_loss returns loss / accum and the step scales loss / accum again; Adamax.
  scale 0.250 (cos 1.0); the reported loss is right (0.742).
- tanh_mlp_lbfgs_closure_last_chunk ("dropped"): Tanh MLP surrogate, LBFGS(strong_wolfe);
  the closure is defined inside the chunk loop and step(closure) called after it: late
  binding scores only the last 16 of 64 rows. scale 0.681, rel 0.444, cos 0.911.
- multitask_rmsnorm_aux_counted_twice (""): RMSNorm residual MLP, dict outputs {logits,
  value} and dict targets; the step adds the value head's loss again on top of the total
  that already holds it; Adadelta. scale 1.970, rel 0.984, cos 0.996.
- dual_encoder_infonce_per_microbatch (""): two-tower retrieval (EmbeddingBag-like mean +
  Conv1d tower), keyword inputs {query, doc}, InfoNCE with in-batch negatives in loss_fn;
  buggy step computes it per micro-batch of 16 (15 negatives instead of 47); the fixed twin
  is GradCache (no-grad embed, whole-batch loss gradient at the embeddings, re-embed and
  backward per micro-batch); Adam. scale 0.967, rel 0.174, cos 0.985.
- mf_recommender_manual_l2_in_step (""): matrix factorisation, keyword inputs {user, item};
  an L2 penalty on the embedding tables added to the loss in the step (loss_fn lacks it);
  the fix moves it to SGD's weight_decay. scale 1.036, rel 0.822, cos 0.784.
HEALTHY (must pass):
- healthy_cnn_clip_value_acts: GroupNorm CNN, whole batch, clip_grad_value_(0.01) that clamps
  32% of the gradient's entries (the step's gradient is the objective's clamped entrywise,
  rel 0.0; against the unclipped one rel 0.716); SGD momentum.
- healthy_lstm_dropout_unequal_accum: 2-layer LSTM with inter-layer dropout + nn.Dropout, in
  train mode; DataLoader micro-batches 12,12,12,8 weighted by rows; SGD momentum (with
  p_drop=0 the step equals the objective, rel 3e-7).
- healthy_clip_style_contrastive_whole_batch: CLIP-style towers with a learnable logit scale,
  symmetric in-batch InfoNCE computed on the whole batch in the step, as loss_fn does.

Results of gradhunt.check_step_equivalence (run after the expectations were committed):
7/8 named, 0 false alarms on the 8 fixed twins and 3 healthy programs. Missed:
seq2seq_collate_mean_of_means -- a STEP_NOT_OBJECTIVE warning without the pattern ("not the
gradient of its loss on the batch: relative difference 0.3 ... most in out.weight,
dec.weight_ih_l0, out.bias"; see MISSED). The two "" pairs (multitask, dual encoder) got the
generic "not the gradient of its loss on the batch" message (relative differences 0.985 and
0.222 at the model's outputs); the L2 pair was named "a term outside loss_fn".

Expectations were frozen and committed before gradhunt's check was run on them. Where the
check misses a pair (MISSED) or alarms on a healthy program / fixed twin (FALSE_ALARMS), the
test is xfail(strict=True) with the observed output as the reason.
"""
import pytest

from tests.blind import pairs
from tests.blind.step_equivalence._common import compare
from tests.blind.step_equivalence_distant._measure import measure

MODULES = [
    "seq2seq_collate_mean_of_means",
    "conv1d_sum_over_microbatch_count",
    "patch_attention_step_condition_skips_remainder",
    "attnpool_gradscaler_divided_twice",
    "tanh_mlp_lbfgs_closure_last_chunk",
    "multitask_rmsnorm_aux_counted_twice",
    "dual_encoder_infonce_per_microbatch",
    "mf_recommender_manual_l2_in_step",
]
HEALTHY = [
    "healthy_cnn_clip_value_acts",
    "healthy_lstm_dropout_unequal_accum",
    "healthy_clip_style_contrastive_whole_batch",
]
# buggy programs the check does not name: name -> observed output
MISSED = {
    "seq2seq_collate_mean_of_means": (
        "observed: [warning] STEP_NOT_OBJECTIVE: train_step's gradient is not the gradient of "
        "its loss on the batch: relative difference 0.3 from the gradient of loss_fn on the "
        "whole batch, most in out.weight, dec.weight_ih_l0, out.bias -- the difference is "
        "found but not named 'weighted equally' (no pattern; judged at the parameters, not at "
        "the outputs: the collate_fn trims padded columns, so each micro-batch's (8, t, V) "
        "logits are narrower than the batch's (24, T, V))"),
}
# fixed twins / healthy programs the check alarms on: name -> observed output
FALSE_ALARMS = {}

RUNS = pairs.StepChecks(__package__)


@pytest.mark.parametrize("name", MODULES)
def test_bug_is_real(name):
    mod = RUNS.module(name)
    buggy = measure(mod.build(False), mod.effective_loss)
    fixed = measure(mod.build(True), mod.effective_loss)
    assert buggy["vs_true"]["rel"] > 0.05, (name, buggy["vs_true"])
    assert buggy["vs_effective"]["rel"] < 1e-4, (name, buggy["vs_effective"])
    assert fixed["vs_true"]["rel"] < 1e-5, (name, fixed["vs_true"])
    if hasattr(mod, "SCALE"):
        assert buggy["vs_true"]["cos"] > 0.9999 and \
            abs(buggy["vs_true"]["scale"] / mod.SCALE - 1) < 1e-3, (name, buggy["vs_true"])


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_step_is_objective(name):
    mod = RUNS.module(name)
    m = measure(mod.build(True, **getattr(mod, "MEASURE_KW", {})))
    if hasattr(mod, "CLIP_VALUE"):   # the objective's gradient, clamped entrywise by the user
        clamped = m["g_true"].clamp(-mod.CLIP_VALUE, mod.CLIP_VALUE)
        assert float((m["g_true"].abs() > mod.CLIP_VALUE).float().mean()) > 0.1  # it acts
        assert compare(m["g_step"], clamped)["rel"] < 1e-5
        assert m["vs_true"]["rel"] > 0.05
    else:
        assert m["vs_true"]["rel"] < 1e-5, (name, m["vs_true"])


test_buggy_named = pairs.each(MODULES, RUNS.named, xfail=MISSED)
test_fixed_twin_quiet = pairs.each(MODULES + HEALTHY, RUNS.quiet, xfail=FALSE_ALARMS)
