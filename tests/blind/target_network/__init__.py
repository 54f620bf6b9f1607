"""Blind pairs for a target network / EMA teacher that is never refreshed."""
