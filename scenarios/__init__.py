"""Runnable scenarios: the lesson's broken-network demo and its exercises, each checking itself."""
