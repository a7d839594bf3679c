"""Fault injectors: each one file with the same small interface (probe, apply, revert, read back)."""
