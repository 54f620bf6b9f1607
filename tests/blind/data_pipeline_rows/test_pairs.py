"""Blind pairs: a data pipeline that feeds something other than the data.

A data pipeline (a torch Dataset, its transforms and a DataLoader) can feed something other than the data while every batch looks fine:
(A) rows duplicated or lost on the way: a `__getitem__` with an index mistake (`idx // 2`, `idx % (n//2)`, reading a list that was filtered differently from the labels), a `__len__` that is shorter or longer than the data, a sampler or a list of indices that repeats some rows and never yields others, a shuffle done by `random.choices` (with replacement) instead of a permutation, a concatenation of the same shard twice. One pass over the loader then shows some source examples several times and others never. Code: "PIPELINE_ROWS_MISSING" for rows never yielded or yielded more than once in one pass (message says how many of the source's examples one pass yields, distinct).
(B) augmented copies of one example on both sides of a split: a split made after augmentation (each source image augmented into k copies, then a random split), or a test set built by flipping/noising/cropping training images, or overlapping sliding windows of one time series split at random. Exact duplicates are caught already; these are near-duplicates. Code: "DATA_LEAKAGE" with the word "near-duplicate" in its message.

Each module under this folder is a small pipeline plus training program written from that
paragraph and the README alone; each exposes ``EXPECTED`` (and ``KEYWORD`` for B),
``build(fixed)`` -> ``dict(train=<Dataset or DataLoader>, test=<Dataset or None>)`` and
``train(fixed)`` -> ``dict(metric, higher_is_better, evidence)`` (B also ``reported`` and
``honest``). For every pair:
(1) the bug is real, without gradhunt: for A the fixed twin's held-out number is clearly better
    (accuracy +0.10, or MSE at most 70%); for B the leaky split's reported test accuracy exceeds
    the honest one (fresh examples) by at least 0.15 while the fixed split's does not exceed it
    by more than 0.07;
(2) ``gradhunt.validate_data(train, test=test)`` gives a warning/error with ``EXPECTED`` (for B
    with "near-duplicate" in its message) on the buggy pipeline;
(3) it gives no warning or error on the fixed twin (and on the HEALTHY pipelines).

Pairs (A: PIPELINE_ROWS_MISSING; held-out metric buggy -> fixed):
- cnn_flip_views_len: 1x16x16 stripe images, CNN, Dataset subclass serving each image twice
  (flip on odd index, ``images[idx // 2]``), DataLoader shuffle=True, Adam; ``__len__`` returns
  the number of images instead of views: one pass yields 200 of 400 images (classes 0-1 only).
  Accuracy 0.500 -> 1.000.
- gru_bucket_sampler_choices: token sequences, GRU, custom length-bucketing ``batch_sampler``
  with a per-epoch seed, padding collate_fn, AdamW; batches shuffled with
  ``rng.choices(batches, k=len(batches))``: 344 of 600 rows distinct per pass, same every epoch.
  Accuracy 0.578 -> 0.937.
- mlp_concat_shards_loopvar: tabular regression, MLP with BatchNorm, trainer class, four
  ``TensorDataset`` shards in ``ConcatDataset``; the comprehension reads a leftover name
  (``RegionShard(path) for p in shard_paths``): one shard four times, 300 of 1200 rows distinct.
  MSE 2.169 -> 0.041.
- transformer_stream_shuffle_buffer: token sequences, one-layer transformer encoder,
  ``IterableDataset`` with a shuffle buffer (1000) over a time-ordered log and a ``__len__``,
  ``train_step`` function, AdamW; the buffer is not drained at the end: 601 of 1600 rows per
  pass, mostly the early periods. Accuracy 0.700 -> 0.973.
Pairs (B: DATA_LEAKAGE "near-duplicate"; reported test accuracy vs honest, buggy | fixed):
- cnn_augment_then_split: 3x12x12 images with 30% label noise, CNN, SGD momentum; 4 augmented
  copies per source (shift, brightness, noise) in a TensorDataset, then ``random_split``:
  0.875 vs 0.677 (+0.198) | 0.729 vs 0.750 (-0.021).
- conv1d_windows_random_split: vibration series of 45 machines, temporal CNN, trainer class;
  a windowing Dataset (length 32, stride 4) split by shuffled window indices into ``Subset``s:
  0.830 vs 0.483 (+0.347) | 0.358 vs 0.495 (-0.137).
- embedding_jittered_test_rows: tabular (3 categorical via nn.Embedding, 6 numeric), 25% label
  noise, ``train_step``, AdamW; test = 250 training rows with numeric columns jittered by
  0.03, left in the training set: 1.000 vs 0.590 (+0.410) | 0.624 vs 0.585 (+0.039).
HEALTHY (build only): healthy_augmented_loader (random augmentation in ``__getitem__``,
DataLoader shuffle=True, drop_last=False, test from other sources), healthy_series_time_split
(AR(1) series cut in time before windowing, windows overlap within each side only).

When written, ``validate_data`` took no Dataset and no ``test=`` keyword, so (2) and (3) fail by
TypeError. With today's array/DataLoader form (``validate_data(DataLoader(train),
test_x=DataLoader(test))``) no pipeline got a warning or error (the token ones an info on
integer inputs), buggy or fixed: the same shard four times in a ConcatDataset (each row
exactly four times) raised nothing; the GRU pipeline's padded batches of varying length made
it raise ValueError (numpy concatenate), and the 3-tensor batches of
embedding_jittered_test_rows a DiagnosticsError. The whole file takes ~20-25 s of CPU.
"""
from tests.blind import pairs

MODULES = [
    "cnn_flip_views_len",
    "gru_bucket_sampler_choices",
    "mlp_concat_shards_loopvar",
    "transformer_stream_shuffle_buffer",
    "cnn_augment_then_split",
    "conv1d_windows_random_split",
    "embedding_jittered_test_rows",
]
HEALTHY = [
    "healthy_augmented_loader",
    "healthy_series_time_split",
]
# buggy pipelines validate_data does not name: name -> why
MISSED = {}
# fixed twins / healthy pipelines it alarms on: name -> why
FALSE_ALARMS = {}

RUNS = pairs.Pipelines(__package__)
test_bug_is_real = pairs.each(MODULES, RUNS.bug_is_real)
test_buggy_named = pairs.each(MODULES, RUNS.named, xfail=MISSED)
test_fixed_twin_quiet = pairs.each(MODULES + HEALTHY, RUNS.quiet, xfail=FALSE_ALARMS)
