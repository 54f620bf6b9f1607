"""Blind pairs: programs written from a bug description and the public API alone."""
