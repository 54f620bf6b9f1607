"""Blind pairs for gradient clipping that acts on no gradient the optimizer step applies."""
