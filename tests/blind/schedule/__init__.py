"""Blind pairs for learning-rate schedulers stepped at the wrong rate."""
