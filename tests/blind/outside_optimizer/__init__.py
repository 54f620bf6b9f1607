"""Blind pairs for parameters that get gradients but are held by no optimizer."""
