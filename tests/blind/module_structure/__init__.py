"""Blind pairs for structural mistakes: one module object under several names, inverted BatchNorm momentum."""
