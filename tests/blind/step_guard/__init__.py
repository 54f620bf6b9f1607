"""Blind pairs for the step guard: one bad step (non-finite or a gradient spike) in a run."""
