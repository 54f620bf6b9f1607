"""Helpers that several test modules share: imported from here, never from another test module
(importing a test module runs its module-level set-up and ties one test file to another)."""
