"""Every built-in op of minigrad, each a small ``Function`` class with forward and backward."""
