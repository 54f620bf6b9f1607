"""A data pipeline (a torch Dataset, its transforms and a DataLoader) can feed something other than the data while every batch looks fine:
(C) train and test inputs transformed differently: normalisation (mean/std) applied to the training split only, different constants per split, the /255 scaling (ToTensor-like) on one side only, a test transform that forgets a resize/crop's scaling, per-feature standardisation fitted separately on each split, channels swapped (RGB vs BGR) in one split. The model sees test inputs from another distribution. Code: "TRANSFORM_SHIFT" (message names the features/channels that differ and by how much).
(D) a random transform applied to the input but not to its target where both must move together: a random horizontal flip or crop of an image but not its segmentation mask or keypoints/box target, a random time shift of a sequence but not its per-step labels, a random permutation of tokens but not their tags, two independent random calls for image and mask. Code: "TRANSFORM_ONE_SIDED" (two draws of the same index give input/target pairs that change inconsistently).
(E) a stream ordered by its target: a regression dataset sorted by its target value (or by time with a trend) and loaded without shuffling, a classification loader that yields classes in blocks. Code: "LABELS_SORTED".

Each module under this folder is a small pipeline + training program written from that
paragraph and the README alone; each exposes ``EXPECTED``, ``build(fixed)`` ->
``dict(train=Dataset|DataLoader, test=Dataset|DataLoader|None)`` and ``train(fixed)`` ->
``dict(metric, higher_is_better, evidence)``. The check will be
``gradhunt.validate_data(train, test=test)`` on a Dataset or DataLoader (it does not take one
yet). For every pair: (1) the bug is real: the fixed twin's held-out quality is clearly better;
(2) the buggy pipeline gets a warning/error finding whose code is ``EXPECTED``; (3) the fixed
twin gets no warning or error at all. HEALTHY pipelines only get test (3).

Pairs (numbers measured when written, CPU, torch 2.13, buggy vs fixed):
(C) TRANSFORM_SHIFT
- shift_tabular_norm_train_only: MLP regressor, Dataset subclass with ``transform=``; the test
  Dataset is built without ``transform=scaler`` (raw features, means 20-300). Held-out MSE
  8.3e4 vs 0.0094.
- shift_image_scale_one_side: CNN classifier on uint8 3x16x16 textures, Compose-style
  transforms, DataLoaders (bs 64/256), ``train_step``; test transform ``AsFloat`` has no /255
  before the shared Normalize. Accuracy 0.35 vs 1.00.
- shift_bgr_test_split: CNN+BN colour classifier, TensorDataset wrapped by a dict-sample
  Dataset, Trainer class; test arrays decoded BGR and the wrapper's ``bgr_to_rgb`` left False.
  Accuracy 0.55 vs 1.00.
- shift_sensor_collate_constants: 1-D CNN on 3-axis IMU windows; normalisation in the
  DataLoaders' ``collate_fn``; the test loader's collate uses legacy constants (std 2.5x, z
  offset 0.6). The Dataset items are alike; only the collated batches differ. Accuracy 0.46 vs
  0.995.
(D) TRANSFORM_ONE_SIDED
- onesided_seg_flip_image_only: FCN segmenter, dict samples ``{"image", "mask"}``,
  ``RandomHFlip(with_mask=False)`` flips the image only. Held-out IoU 0.70 vs 0.90.
- onesided_gru_time_shift: GRU tagger, variable-length sequences, ``pad_sequence`` collate_fn,
  ``torch.roll`` of the signal only. Per-step accuracy 0.74 vs 0.89.
- onesided_keypoint_random_crop: CNN keypoint regressor, TensorDataset wrapped by a random-crop
  Dataset that does not shift the keypoint. Mean error 1.94 px vs 0.90 px.
- onesided_token_shuffle_two_draws: embedding + Transformer encoder tagger, AdamW + warm-up,
  tokens and tags each indexed by their own ``torch.randperm(L)``. Tag accuracy 0.62 vs 1.00.
(E) LABELS_SORTED
- sorted_regression_by_target: MLP+LayerNorm regressor, SGD momentum, table sorted by target,
  ``DataLoader(TensorDataset, shuffle=False)``. Held-out MSE 0.84 vs 0.040 (target var 1.30).
- sorted_class_blocks_concat: MLP+BatchNorm classifier, ``ConcatDataset`` of per-class folders,
  ``shuffle=False``, test=None. Accuracy 0.47 vs 0.997 (single-class batches: BatchNorm's batch
  statistics remove the class signal in training).
HEALTHY: healthy_seg_joint_flip (image and mask concatenated and flipped as one tensor, one
Normalize for both splits; IoU 0.86), healthy_balanced_shuffled (class-balanced shuffled batches
from a ``batch_sampler``, one shared transform module for train and test; accuracy 1.00).

Not written: (C)'s "standardisation fitted separately on each split". For it to harm an honest
held-out score the raw splits must differ (otherwise the two fits agree); then the buggy twin's
transformed splits look alike (both fitted to mean 0, std 1) and the fixed twin's differ by the
raw data's real shift, so a check that compares the transformed splits would see it backwards.
Notes for the check's author: the seg/keypoint datasets' masks are dense per-pixel targets with
~6-15% foreground (not a class imbalance); token datasets hold integer ids (not features to
normalise); in shift_sensor_collate_constants the shift lives only in the loaders' collate_fn.

When written (before any check): (1) holds on all 10 pairs; ``validate_data`` does not take a
Dataset or a ``test=`` keyword yet (today: ``TypeError: validate_data() got an unexpected keyword argument 'test'``), so (2)
and (3) cannot run (marked xfail). The whole file takes ~15-20 s of CPU.
"""
from tests.blind import pairs

MODULES = [
    "shift_tabular_norm_train_only",
    "shift_image_scale_one_side",
    "shift_bgr_test_split",
    "shift_sensor_collate_constants",
    "onesided_seg_flip_image_only",
    "onesided_gru_time_shift",
    "onesided_keypoint_random_crop",
    "onesided_token_shuffle_two_draws",
    "sorted_regression_by_target",
    "sorted_class_blocks_concat",
]
HEALTHY = [
    "healthy_seg_joint_flip",
    "healthy_balanced_shuffled",
]
MISSED = {
    "onesided_keypoint_random_crop": "the target is (row, col) coordinates, not aligned with "
    "the input position by position: TRANSFORM_ONE_SIDED judges masks, maps and per-step "
    "labels only (a regression target left unchanged by a crop may be right: a count, an age)",
}
# fixed twins / healthy pipelines validate_data alarms on: name -> why
FALSE_ALARMS = {}

RUNS = pairs.Pipelines(__package__)
test_bug_is_real = pairs.each(MODULES, RUNS.bug_is_real)
test_buggy_named = pairs.each(MODULES, RUNS.named, xfail=MISSED)
test_fixed_twin_quiet = pairs.each(MODULES + HEALTHY, RUNS.quiet, xfail=FALSE_ALARMS)
