"""Small CPU versions of the classic pytorch/examples programs, written here from scratch.

Each module is a plain training script: ``python reinforce.py`` trains and prints its own
metric, unchanged, as a user would run it under ``gradhunt watch``. Each also exposes
``main(seed=0) -> dict`` (its metrics) and ``healthy(metrics) -> bool`` (whether the run did
what the program is for: reward rising, reconstruction falling, accuracy above chance), so
``tests/realistic/test_examples_watched.py`` can run them in-process under a
``TrainingWatch`` and hold the Monitor to silence only where the program is healthy.
"""
