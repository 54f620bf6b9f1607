"""Blind pairs: loss terms and targets whose gradient reaches the wrong parameters."""
