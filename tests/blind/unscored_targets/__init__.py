"""Blind pairs: targets that the loss never scores (an ignored real class, scored padding, labels that never cover the classes)."""
