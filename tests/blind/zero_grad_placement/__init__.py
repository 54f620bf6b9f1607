"""Blind pairs for gradient clearing placed inside the accumulation window or before the step."""
